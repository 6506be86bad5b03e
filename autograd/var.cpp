#include "autograd/var.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "autograd/trace.h"
#include "core/profile.h"
#include "dispatch/dispatch.h"

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

static thread_local bool t_release_unread = false;

ReleaseUnreadOutputs::ReleaseUnreadOutputs() : previous_(t_release_unread) { t_release_unread = true; }
ReleaseUnreadOutputs::~ReleaseUnreadOutputs() { t_release_unread = previous_; }

// This handle and one per inputs list holding the Var: nobody else can
// read its data again. The tracer shows every tensor, so it keeps them.
void Var::release_if_only_graph_holds() {
  if (!t_release_unread || !impl_ || !impl_->grad_fn || !impl_->data.defined()) return;
  if (impl_.use_count() == impl_->graph_edges + 1 && !trace::active()) impl_->data.release_buffer();
}

Node::~Node() {
  for (Var& in : inputs) --in.impl()->graph_edges;
}

bool needs_grad(const std::vector<Var>& inputs) {
  if (!t_grad_enabled) return false;
  for (const Var& v : inputs)
    if (v.requires_grad()) return true;
  return false;
}

// Numbers the ops in the order they are recorded (Node::sequence).
static std::atomic<uint64_t> g_next_sequence{1};

Var record(Tensor out, std::shared_ptr<Node> node, std::vector<Var> inputs) {
  Var v(std::move(out));
  if (node && needs_grad(inputs)) {
    node->inputs = std::move(inputs);
    for (Var& in : node->inputs) ++in.impl()->graph_edges;
    node->sequence = g_next_sequence.fetch_add(1, std::memory_order_relaxed);
    v.impl()->grad_fn = std::move(node);
    v.impl()->requires_grad = true;
    if (trace::active()) trace::on_record(v);
  }
  return v;
}

// ---- names ----------------------------------------------------------------------------------

const char* intern_name(const std::string& name) {
  static std::mutex mutex;
  static std::set<std::string> names;  // only grows; a set's elements never move
  std::lock_guard<std::mutex> lock(mutex);
  return names.insert(name).first->c_str();
}

const char* display_name(const VarImpl& v) {
  if (!v.name.empty()) return v.name.c_str();
  if (v.grad_fn && v.grad_fn->output_name) return v.grad_fn->output_name;
  return "";
}

const char* Var::display_name() const { return impl_ ? lina::display_name(*impl_) : ""; }

// ---- backward -------------------------------------------------------------------------------

// The Vars made by the ops `root` depends on (root included), newest op
// first. An op's output can only feed ops recorded after it, so once every
// later op has run, the gradient of its output is complete. Held by
// shared_ptr: with Graph::Free an op that has run drops its inputs, and
// they must live until their own turn.
static std::vector<std::shared_ptr<VarImpl>> ops_newest_first(const std::shared_ptr<VarImpl>& root) {
  std::vector<std::shared_ptr<VarImpl>> ops;
  std::unordered_set<VarImpl*> seen{root.get()};
  std::vector<std::shared_ptr<VarImpl>> todo{root};
  while (!todo.empty()) {
    std::shared_ptr<VarImpl> v = std::move(todo.back());
    todo.pop_back();
    check(!v->graph_freed, "backward: part of this graph was freed by an earlier "
                           "backward(Graph::Free); run the forward again");
    if (!v->grad_fn) continue;  // a leaf
    for (const Var& in : v->grad_fn->inputs)
      if (in.requires_grad() && seen.insert(in.impl()).second) todo.push_back(in.impl_ptr());
    ops.push_back(std::move(v));
  }
  std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) {
    return a->grad_fn->sequence > b->grad_fn->sequence;
  });
  return ops;
}

// Before a freeing backward: the outputs that only the graph holds (no
// caller's Var) are not read again (see ReleaseUnreadOutputs), so their
// hold on their buffers goes first, and the gradients the backward is about
// to allocate can take the buffers that no op saved. Inside a
// ReleaseUnreadOutputs scope the forward has done this already.
static void release_outputs_no_backward_reads(const std::vector<std::shared_ptr<VarImpl>>& ops) {
  for (const auto& op : ops)
    if (op.use_count() == op->graph_edges + 1)  // the inputs lists and `ops`
      op->data.release_buffer();  // the shape stays: backward ops read their inputs' shapes
}

static void accumulate(VarImpl* v, const Tensor& g) {
  check(g.shape() == v->data.shape(), "backward: gradient " + shape_str(g.shape()) +
                                          " does not match its tensor " + v->data.describe());
  if (!v->grad.defined()) v->grad = g.clone();
  else dispatch::add_inplace(v->grad, g);
}

// A leaf's .grad where it has one of the leaf's shape (a parameter's: its
// slice of the gradient buffer), else null.
static Tensor* leaf_grad(const Var& leaf) {
  Tensor& grad = leaf.impl()->grad;
  return grad.defined() && grad.shape() == leaf.data().shape() ? &grad : nullptr;
}

// For Node::backward_into, where an op may add input i's gradient: an op
// output's pending gradient where it is a buffer no other tensor shares; a
// leaf's .grad where it has one, which accumulate() would add into anyway;
// for a reshape of such a leaf (the conv's taps), that .grad seen in the
// reshape's shape (kept in `views`): the reshape then gets no gradient and
// its backward does not run (unless a trace runs); else null.
static std::vector<Tensor*> sums_to_add_into(const std::vector<Var>& ins,
                                             std::unordered_map<VarImpl*, Tensor>& pending,
                                             std::vector<Tensor>& views) {
  std::vector<Tensor*> sums(ins.size(), nullptr);
  views.assign(ins.size(), Tensor());  // sized once: sums point into it
  for (size_t i = 0; i < ins.size(); ++i) {
    if (!ins[i].requires_grad()) continue;
    Node* op = ins[i].grad_fn();
    if (op == nullptr) {  // a leaf
      sums[i] = leaf_grad(ins[i]);
      continue;
    }
    const Var& source = op->inputs[0];
    if (op->kind == OpKind::Reshape && source.grad_fn() == nullptr && leaf_grad(source) &&
        !trace::active()) {  // a trace shows the reshape's gradient
      views[i] = leaf_grad(source)->reshape(ins[i].data().shape());
      sums[i] = &views[i];
      continue;
    }
    auto slot = pending.find(ins[i].impl());
    if (slot != pending.end() && slot->second.defined() && slot->second.sole_owner())
      sums[i] = &slot->second;
  }
  return sums;
}

// A tensor of x's shape (one element) holding 1, made once per dtype and
// device and shared by every backward: no kernel fills a new one each
// step. Its holders never own it alone, so nothing adds into it in place.
// Never freed (the CUDA runtime may be gone at exit), the map neither, so
// that the tensors stay reachable to the end (LeakSanitizer looks after
// the static destructors have run).
static std::mutex ones_mutex;
static std::map<std::pair<DType, Device>, Tensor*>& ones = *new std::map<std::pair<DType, Device>, Tensor*>;
static Tensor one_like(const Tensor& x) {
  std::lock_guard<std::mutex> lock(ones_mutex);
  Tensor*& one = ones[{x.dtype(), x.device()}];
  if (!one) one = new Tensor(Tensor::ones({1}, x.dtype(), x.device()));
  return one->reshape(x.shape());
}

bool is_backward_seed(const Tensor& dy) {
  std::lock_guard<std::mutex> lock(ones_mutex);
  auto one = ones.find({dy.dtype(), dy.device()});
  return one != ones.end() && dy.same_storage(*one->second);
}

void Var::backward(Graph after) const {
  check(impl_ && impl_->requires_grad, "backward: this Var does not require grad");
  check(data().numel() == 1, "backward: needs a scalar, got " + data().describe());
  check(!impl_->graph_freed, "backward: this graph was freed by an earlier backward(Graph::Free); "
                             "run the forward again");
  profile::PhaseScope backward_phase(profile::Phase::Backward);  // kernel profiling: "backward"
  Tensor seed = one_like(data());  // dL/dL = 1
  if (!impl_->grad_fn) return accumulate(impl_.get(), seed);     // a leaf: L is the parameter
  if (trace::active()) trace::on_backward_start();
  std::unordered_map<VarImpl*, Tensor> pending;  // gradients of op outputs, still being summed
  pending[impl_.get()] = seed;
  std::vector<std::shared_ptr<VarImpl>> ops = ops_newest_first(impl_);
  if (after == Graph::Free && !trace::active()) release_outputs_no_backward_reads(ops);
  for (std::shared_ptr<VarImpl>& op : ops) {
    VarImpl* v = op.get();
    Tensor g = std::move(pending[v]);  // complete: every later op has sent its part
    pending.erase(v);
    if (trace::active()) trace::on_backward_op(*v, g);
    if (g.defined() || v->grad_fn->second_output_grad.defined()) {
      std::vector<Var>& ins = v->grad_fn->inputs;
      std::vector<Tensor> views;  // what sums_to_add_into's sums may point into
      std::vector<Tensor> input_grads =
          v->grad_fn->adds_into_sums ? v->grad_fn->backward_into(g, sums_to_add_into(ins, pending, views))
                                     : v->grad_fn->backward(g);
      for (size_t i = 0; i < ins.size(); ++i) {
        if (!ins[i].requires_grad() || !input_grads[i].defined()) continue;
        if (ins[i].grad_fn() == nullptr) {  // a leaf keeps its gradient
          accumulate(ins[i].impl(), input_grads[i]);
          continue;
        }
        Tensor& slot = pending[ins[i].impl()];
        if (!slot.defined()) slot = input_grads[i];
        else if (slot.sole_owner()) dispatch::add_inplace(slot, input_grads[i]);  // no new buffer
        else slot = dispatch::binary(BinaryFn::Add, slot, input_grads[i]);
      }
    }
    if (after == Graph::Free && v != impl_.get()) {
      // The op has run: what it saved and its hold on its inputs go now. Its
      // output goes too unless someone else holds it (the caller's logits):
      // every op that read it ran before this one and has been dropped. The
      // root's own op stays (the caller holds it, and a debugger shows the
      // loss as made by it); a second backward stops at its freed inputs.
      v->grad_fn.reset();
      v->graph_freed = true;
      op.reset();
    }
  }
}

// ---- graph dump -------------------------------------------------------------------------------

// "float32[2, 8, 128]"
static std::string type_and_shape(const Tensor& t) {
  return std::string(dtype_name(t.dtype())) + shape_str(t.shape());
}

std::string graph_dot(const Var& root) {
  std::ostringstream os;
  os << "digraph lina {\n  rankdir=LR;\n  node [fontname=\"monospace\", fontsize=10];\n";
  std::unordered_set<VarImpl*> seen;
  std::vector<VarImpl*> todo{root.impl()};
  while (!todo.empty()) {
    VarImpl* v = todo.back();
    todo.pop_back();
    if (!seen.insert(v).second) continue;
    // The tensor: its name, type and shape, and the norm of its gradient once backward ran.
    const std::string name = display_name(*v);
    os << "  v" << v << " [shape=box, label=\"" << (name.empty() ? "" : name + "\\n")
       << type_and_shape(v->data);
    if (v->grad.defined() && v->grad.device() == Device::Cpu)
      os << "\\n|grad| = " << std::sqrt(dispatch::sum_squares(v->grad));
    os << "\"" << (v->grad_fn ? "" : ", style=filled, fillcolor=\"#e8f0ff\"") << "];\n";
    // The op that made it: its name and what it saved for backward.
    if (Node* fn = v->grad_fn.get()) {
      os << "  n" << fn << " [shape=ellipse, label=\"" << fn->name();
      for (const auto& [field, tensor] : fn->saved())
        if (tensor.defined()) os << "\\nsaved " << field << " " << type_and_shape(tensor);
      os << "\"];\n";
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
