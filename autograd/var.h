// Var: a Tensor on the autograd tape. A Var either is a leaf (a parameter or
// an input, maybe with requires_grad) or was produced by a Node, which
// remembers its inputs and how to send a gradient back to them.
//
//   Var w(Tensor::randn({3, 4}, rng), /*requires_grad=*/true, "w");
//   Var loss = sum_all(mul(w, w));
//   loss.backward();              // w.grad() == 2·w
//
// backward() walks the graph once in reverse topological order and
// accumulates (+=) into the .grad of every Var that requires grad.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/ops.h"
#include "core/tensor.h"

namespace lina {

struct Node;

struct VarImpl {
  Tensor data;
  Tensor grad;                     // undefined until a gradient arrives
  bool requires_grad = false;
  std::shared_ptr<Node> grad_fn;   // the op that made this Var; null for leaves
  std::string name;                // optional, shown in the graph dump
};

class Var {
 public:
  Var() = default;
  explicit Var(Tensor data, bool requires_grad = false, std::string name = "");

  bool defined() const { return impl_ != nullptr; }
  const Tensor& data() const { return impl_->data; }
  Tensor& data() { return impl_->data; }
  const Tensor& grad() const { return impl_->grad; }
  Tensor& grad() { return impl_->grad; }
  bool requires_grad() const { return impl_ && impl_->requires_grad; }
  Node* grad_fn() const { return impl_->grad_fn.get(); }
  const std::string& name() const { return impl_->name; }
  void set_name(const std::string& n) { impl_->name = n; }

  const Shape& shape() const { return impl_->data.shape(); }
  int ndim() const { return impl_->data.ndim(); }
  int64_t dim(int axis) const { return impl_->data.dim(axis); }
  DType dtype() const { return impl_->data.dtype(); }
  Device device() const { return impl_->data.device(); }
  double item() const { return impl_->data.item(); }

  // Runs the backward pass from this scalar (its gradient seeded with 1).
  void backward() const;
  // Forgets this Var's gradient (leaves' grads are accumulated otherwise).
  void zero_grad() { impl_->grad = Tensor(); }

  VarImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<VarImpl>& impl_ptr() const { return impl_; }

 private:
  std::shared_ptr<VarImpl> impl_;
};

// One recorded op. Subclasses (one per op, named after it, in autograd/ops/)
// save what their backward needs as named fields.
struct Node {
  explicit Node(OpKind k) : kind(k) {}
  virtual ~Node() = default;
  // Given dL/d(output), return dL/d(input i) for every input, in order; an
  // undefined Tensor means "no gradient for this input".
  virtual std::vector<Tensor> backward(const Tensor& grad_output) = 0;
  const char* name() const { return op_name(kind); }

  OpKind kind;
  std::vector<Var> inputs;
};

// ---- recording --------------------------------------------------------------------------

bool grad_enabled();
// While one of these lives (on this thread) no graph is recorded.
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// True when recording is on and some input requires grad: then the op must
// build its Node (and save tensors); otherwise it need not.
bool needs_grad(const std::vector<Var>& inputs);
// Wraps `out` in a Var produced by `node` from `inputs`.
Var record(Tensor out, std::shared_ptr<Node> node, std::vector<Var> inputs);

// ---- teaching aids ------------------------------------------------------------------------

// Graphviz dot of everything `root` depends on: one box per Var (name,
// shape, grad norm when known), one ellipse per op.
std::string graph_dot(const Var& root);

}  // namespace lina
