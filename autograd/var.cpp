#include "autograd/var.h"

#include <cmath>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "core/kernels.h"
#include "core/profile.h"

namespace lina {

Var::Var(Tensor data, bool requires_grad, std::string name) : impl_(std::make_shared<VarImpl>()) {
  check(!requires_grad || is_float(data.dtype()),
        "Var: only float tensors can require grad, got " + data.describe());
  impl_->data = std::move(data);
  impl_->requires_grad = requires_grad;
  impl_->name = std::move(name);
}

// ---- no-grad mode ------------------------------------------------------------------------

static thread_local bool t_grad_enabled = true;

bool grad_enabled() { return t_grad_enabled; }
NoGradGuard::NoGradGuard() : previous_(t_grad_enabled) { t_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { t_grad_enabled = previous_; }

bool needs_grad(const std::vector<Var>& inputs) {
  if (!t_grad_enabled) return false;
  for (const Var& v : inputs)
    if (v.requires_grad()) return true;
  return false;
}

Var record(Tensor out, std::shared_ptr<Node> node, std::vector<Var> inputs) {
  Var v(std::move(out));
  if (node && needs_grad(inputs)) {
    node->inputs = std::move(inputs);
    v.impl()->grad_fn = std::move(node);
    v.impl()->requires_grad = true;
  }
  return v;
}

// ---- backward -------------------------------------------------------------------------------

// Vars in topological order (inputs before the ops that use them), by an
// iterative depth-first walk (deep graphs would overflow a recursive one).
static std::vector<VarImpl*> topological_order(VarImpl* root) {
  std::vector<VarImpl*> order;
  std::unordered_set<VarImpl*> visited{root};
  std::vector<std::pair<VarImpl*, size_t>> stack{{root, 0}};
  while (!stack.empty()) {
    auto& [v, next_input] = stack.back();
    Node* fn = v->grad_fn.get();
    if (fn && next_input < fn->inputs.size()) {
      VarImpl* in = fn->inputs[next_input++].impl();
      if (in->requires_grad && visited.insert(in).second) stack.push_back({in, 0});
    } else {
      order.push_back(v);
      stack.pop_back();
    }
  }
  return order;
}

static void accumulate(VarImpl* v, const Tensor& g) {
  check(g.shape() == v->data.shape(), "backward: gradient " + shape_str(g.shape()) +
                                          " does not match its tensor " + v->data.describe());
  if (!v->grad.defined()) v->grad = g.clone();
  else kernels::add_inplace(v->grad, g);
}

void Var::backward() const {
  check(impl_ && impl_->requires_grad, "backward: this Var does not require grad");
  check(data().numel() == 1, "backward: needs a scalar, got " + data().describe());
  profile::PhaseScope backward_phase(profile::Phase::Backward);  // kernel profiling: "backward"
  std::vector<VarImpl*> order = topological_order(impl_.get());
  std::unordered_map<VarImpl*, Tensor> pending;  // gradients of non-leaf Vars
  pending[impl_.get()] = Tensor::ones(data().shape(), dtype(), device());
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    VarImpl* v = *it;
    Tensor g = std::move(pending[v]);
    pending.erase(v);
    if (!g.defined()) continue;
    if (!v->grad_fn) {  // a leaf: keep its gradient
      accumulate(v, g);
      continue;
    }
    std::vector<Tensor> input_grads = v->grad_fn->backward(g);
    std::vector<Var>& ins = v->grad_fn->inputs;
    for (size_t i = 0; i < ins.size(); ++i) {
      if (!ins[i].requires_grad() || !input_grads[i].defined()) continue;
      Tensor& slot = pending[ins[i].impl()];
      if (ins[i].grad_fn() == nullptr) accumulate(ins[i].impl(), input_grads[i]);
      else if (!slot.defined()) slot = input_grads[i];
      else slot = kernels::binary(BinaryFn::Add, slot, input_grads[i]);
    }
  }
}

// ---- graph dump -------------------------------------------------------------------------------

std::string graph_dot(const Var& root) {
  std::ostringstream os;
  os << "digraph lina {\n  rankdir=LR;\n  node [fontname=\"monospace\"];\n";
  std::unordered_set<VarImpl*> seen;
  std::vector<VarImpl*> todo{root.impl()};
  while (!todo.empty()) {
    VarImpl* v = todo.back();
    todo.pop_back();
    if (!seen.insert(v).second) continue;
    os << "  v" << v << " [shape=box, label=\"" << (v->name.empty() ? "" : v->name + "\\n")
       << dtype_name(v->data.dtype()) << shape_str(v->data.shape());
    if (v->grad.defined() && v->grad.device() == Device::cpu)
      os << "\\n|grad| = " << std::sqrt(kernels::sum_squares(v->grad));
    os << "\"];\n";
    if (Node* fn = v->grad_fn.get()) {
      os << "  n" << fn << " [shape=ellipse, label=\"" << fn->name() << "\"];\n";
      os << "  n" << fn << " -> v" << v << ";\n";
      for (const Var& in : fn->inputs) {
        os << "  v" << in.impl() << " -> n" << fn << ";\n";
        todo.push_back(in.impl());
      }
    }
  }
  os << "}\n";
  return os.str();
}

}  // namespace lina
