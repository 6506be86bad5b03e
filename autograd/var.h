// Var: a Tensor on the autograd tape. A Var either is a leaf (a parameter or
// an input, maybe with requires_grad) or was produced by a Node, which
// remembers its inputs and how to send a gradient back to them.
//
//   Var w(Tensor::randn({3, 4}, rng), /*requires_grad=*/true, "w");
//   Var loss = sum_all(mul(w, w));
//   loss.backward();              // w.grad() == 2·w
//
// backward() runs the backward of every op the scalar depends on once, in
// the reverse of the order the forward recorded them, and accumulates (+=)
// into the .grad of every leaf Var that requires grad. By default the graph
// stays as it was (graph_dot can draw it, a debugger can look at it);
// backward(Graph::Free) drops each op, with what it saved, as soon as its
// backward has run, and each op's output that nothing else holds, as a
// training step does: the step's memory then shrinks through the backward
// instead of growing. Inside a ReleaseUnreadOutputs scope (a training step)
// the forward already lets go of each op output as soon as the caller's
// last Var of it goes (a buffer some backward saved lives on in that op):
// the step's peak is what the backward needs, not every tensor the forward
// made.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/ops.h"
#include "core/tensor.h"

namespace lina {

struct Node;

// What backward() leaves of the graph: all of it, or nothing (see above).
enum class Graph { Keep, Free };

struct VarImpl {
  Tensor data;
  Tensor grad;                     // undefined until a gradient arrives
  bool requires_grad = false;
  std::shared_ptr<Node> grad_fn;   // the op that made this Var; null for leaves
  bool graph_freed = false;        // made by an op that backward(Graph::Free) dropped
  long graph_edges = 0;            // how many ops' inputs lists hold this Var
  std::string name;                // a leaf's name ("blocks.0.mix.q_proj.weight"), optional
};

class Var {
 public:
  Var() = default;
  explicit Var(Tensor data, bool requires_grad = false, std::string name = "");
  Var(const Var&) = default;
  Var(Var&&) noexcept = default;
  Var& operator=(Var other) noexcept {  // the Var replaced goes as if destroyed
    std::swap(impl_, other.impl_);
    return *this;
  }
  ~Var() { release_if_only_graph_holds(); }

  bool defined() const { return impl_ != nullptr; }
  const Tensor& data() const { return impl_->data; }
  Tensor& data() { return impl_->data; }
  const Tensor& grad() const { return impl_->grad; }
  Tensor& grad() { return impl_->grad; }
  bool requires_grad() const { return impl_ && impl_->requires_grad; }
  Node* grad_fn() const { return impl_->grad_fn.get(); }
  const std::string& name() const { return impl_->name; }
  void set_name(const std::string& n) { impl_->name = n; }
  // What to call this Var in the graph, the trace and the debugger: a
  // leaf's name, or the name the model gave the op's output (see named()).
  const char* display_name() const;

  const Shape& shape() const { return impl_->data.shape(); }
  int ndim() const { return impl_->data.ndim(); }
  int64_t dim(int axis) const { return impl_->data.dim(axis); }
  DType dtype() const { return impl_->data.dtype(); }
  Device device() const { return impl_->data.device(); }
  double item() const { return impl_->data.item(); }

  // Runs the backward pass from this scalar (its gradient seeded with 1).
  void backward(Graph after = Graph::Keep) const;
  // Forgets this Var's gradient (leaves' grads are accumulated otherwise).
  void zero_grad() { impl_->grad = Tensor(); }

  VarImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<VarImpl>& impl_ptr() const { return impl_; }

 private:
  // In a ReleaseUnreadOutputs scope: when this is the last Var of an op's
  // output outside the graph, the output's buffer goes (its shape stays).
  void release_if_only_graph_holds();
  std::shared_ptr<VarImpl> impl_;
};

// The tensors an op saved for its backward, by field name ("rstd").
using SavedTensors = std::vector<std::pair<const char*, Tensor>>;

// One recorded op. Subclasses (one per op, named after it, in autograd/ops/)
// save what their backward needs as named fields.
struct Node {
  explicit Node(OpKind k) : kind(k) {}
  virtual ~Node();  // lets go of its inputs (VarImpl::graph_edges)
  // Given dL/d(output), return dL/d(input i) for every input, in order; an
  // undefined Tensor means "no gradient for this input".
  virtual std::vector<Tensor> backward(const Tensor& grad_output) = 0;
  // For ops with adds_into_sums set, what the walk calls instead of backward:
  // backward, given the chance to add input i's gradient straight into
  // sums[i]: the gradient already pending for input i, a buffer no other
  // tensor shares, or a leaf's .grad (null where there is neither). Returns
  // an undefined Tensor for an input it added into. Matmul adds with the
  // GEMM's beta = 1: x feeds q, k and v, and two of its three products'
  // dx then need no tensor and no add of their own; nor does any weight's
  // gradient, added into its slice of the parameters' gradient buffer.
  virtual std::vector<Tensor> backward_into(const Tensor& grad_output,
                                            const std::vector<Tensor*>& sums) {
    (void)sums;
    return backward(grad_output);
  }
  bool adds_into_sums = false;
  const char* name() const { return op_name(kind); }  // the op: "matmul", "scan", ...
  // The tensors this op saved for its backward, by field name (shown on the
  // op in graph_dot). Ops that save nothing keep this default.
  virtual SavedTensors saved() const { return {}; }

  OpKind kind;
  std::vector<Var> inputs;
  // What the model calls this op's output ("blocks.0.mix.q"), set by
  // named(); an interned string, so naming costs one pointer store.
  const char* output_name = nullptr;
  // When the forward recorded this op (1, 2, 3, ... per process): backward
  // runs the ops from the highest number down, the forward in reverse.
  uint64_t sequence = 0;
  // An op with a second output (residual_rms_norm: the sum, beside its
  // norm) records that output through second_output() (autograd/functions.h),
  // a node of its own whose backward, which runs before this op's, leaves
  // the second output's gradient here. The walk then runs this op's
  // backward even where its first output got no gradient (dy undefined).
  Tensor second_output_grad;
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

// While one of these lives (on this thread), an op's output lets go of its
// buffer as soon as only the graph holds it: the caller's last Var of it is
// gone, so only a backward could read it, and no backward does — each op
// keeps what its backward reads in its own fields (which share the buffer
// and keep it alive) and reads no more than its inputs' shapes. What no
// backward saved (a projection that feeds RoPE, a residual sum that feeds
// only the next sum) then goes during the forward. Off by default: a
// debugger stepping through a graph sees every tensor; the training step
// and the benchmark turn it on.
class ReleaseUnreadOutputs {
 public:
  ReleaseUnreadOutputs();
  ~ReleaseUnreadOutputs();
  ReleaseUnreadOutputs(const ReleaseUnreadOutputs&) = delete;
  ReleaseUnreadOutputs& operator=(const ReleaseUnreadOutputs&) = delete;

 private:
  bool previous_;
};

// True when recording is on and some input requires grad: then the op must
// build its Node (and save tensors); otherwise it need not.
bool needs_grad(const std::vector<Var>& inputs);
// Wraps `out` in a Var produced by `node` from `inputs`.
Var record(Tensor out, std::shared_ptr<Node> node, std::vector<Var> inputs);
// Whether dy is the gradient a backward starts from, dL/dL = 1 (Var::backward):
// the op that made the loss may then hand over a gradient it formed in its
// forward for dL = 1, with no kernel to multiply by 1.
bool is_backward_seed(const Tensor& dy);

// ---- names ------------------------------------------------------------------------------------

// A leaf's name, or the name the model gave the op that made `v`, or "".
const char* display_name(const VarImpl& v);

// A copy of `name` that lives as long as the process, the same pointer for
// equal strings. Models intern the names of their tensors once, when they
// are built, so that naming a tensor in every forward allocates nothing.
const char* intern_name(const std::string& name);

// Names the output of the op that made `v` (`name` must be interned or a
// string literal); a Var that no op recorded (no-grad mode) stays unnamed.
inline Var named(Var v, const char* name) {
  if (v.defined() && v.grad_fn()) v.grad_fn()->output_name = name;
  return v;
}

// ---- teaching aids ------------------------------------------------------------------------

// Graphviz dot of everything `root` depends on: one box per Var (name,
// dtype and shape, grad norm when known), one ellipse per op (op, the name
// of its output, the tensors it saved for backward and their shapes).
std::string graph_dot(const Var& root);

}  // namespace lina
