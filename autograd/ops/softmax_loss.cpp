// Softmax, log-softmax, cross-entropy and embedding: forward and backward of
// each side by side. All work over the last axis; the kernels are fused per
// row (dispatch/dispatch.h).
#include "autograd/functions.h"
#include "dispatch/dispatch.h"

namespace lina {

// ---- softmax --------------------------------------------------------------------------
// y_j = exp(x_j) / Σ_k exp(x_k). Its Jacobian is dy_j/dx_k = y_j (δ_jk − y_k), so
//   dx = y ⊙ (dy − Σ_j y_j dy_j).
// Causal-masked entries have y = 0, so they receive no gradient.
struct SoftmaxOp : Node {
  SoftmaxOp() : Node(OpKind::Softmax) {}
  Tensor y;  // saved output [..., N]
  SavedTensors saved() const override { return {{"y", y}}; }

  static Var apply(const Var& x, bool causal) {
    Tensor y = dispatch::softmax_forward(x.data(), causal);
    if (!needs_grad({x})) return Var(y);
    auto node = std::make_shared<SoftmaxOp>();
    node->y = y;
    return record(y, node, {x});
  }

  std::vector<Tensor> backward(const Tensor& dy) override {
    return {dispatch::softmax_backward(y, dy)};
  }
};

// ---- log-softmax ----------------------------------------------------------------------
// y_j = x_j − log Σ_k exp(x_k), so dy_j/dx_k = δ_jk − softmax(x)_k and
//   dx = dy − softmax(x) · Σ_j dy_j,  with softmax(x) = exp(y).
struct LogSoftmaxOp : Node {
  LogSoftmaxOp() : Node(OpKind::LogSoftmax) {}
  Tensor y;  // saved output (log-probabilities) [..., N]
  SavedTensors saved() const override { return {{"y", y}}; }

  static Var apply(const Var& x) {
    Tensor y = dispatch::log_softmax_forward(x.data());
    if (!needs_grad({x})) return Var(y);
    auto node = std::make_shared<LogSoftmaxOp>();
    node->y = y;
    return record(y, node, {x});
  }

  std::vector<Tensor> backward(const Tensor& dy) override {
    return {dispatch::log_softmax_backward(y, dy)};
  }
};

// ---- cross-entropy --------------------------------------------------------------------
// loss = Σ_n m_n · (−log p_n[t_n]) / count,  p_n = softmax(logits_n),
// count = max(Σ_n m_n, 1). Since d(−log p[t])/dlogits = p − onehot(t):
//   dlogits_n = dloss · m_n · (p_n − onehot(t_n)) / count.
// The forward's one pass over the logits writes this for dloss = 1, so the
// backward of a loss (dloss the seed 1) is that tensor, no kernel; any other
// dloss scales it. No gradient flows to the targets or the mask.
struct CrossEntropyOp : Node {
  CrossEntropyOp() : Node(OpKind::CrossEntropy) {}
  Tensor dlogits;  // saved [..., V]: the gradient for dloss = 1
  SavedTensors saved() const override { return {{"dlogits", dlogits}}; }

  static Var apply(const Var& logits, const Tensor& targets, const Tensor& mask, const Tensor& mask_count) {
    Tensor dlogits;
    Tensor loss = dispatch::cross_entropy_forward(logits.data(), targets, mask, dlogits, mask_count);
    if (!needs_grad({logits})) return Var(loss);
    auto node = std::make_shared<CrossEntropyOp>();
    node->dlogits = dlogits;
    return record(loss, node, {logits});
  }

  std::vector<Tensor> backward(const Tensor& dloss) override {
    if (is_backward_seed(dloss)) return {dlogits};
    return {dispatch::binary(BinaryFn::Mul, dlogits, dloss)};
  }
};

// ---- embedding ------------------------------------------------------------------------
// out[n, :] = weight[ids[n], :], so each row of dweight is the sum of the
// rows of dout whose id points at it (ids may repeat); ids get no gradient.
struct EmbeddingOp : Node {
  EmbeddingOp() : Node(OpKind::Embedding) { adds_into_sums = true; }
  Tensor ids;  // saved [...] int32
  SavedTensors saved() const override { return {{"ids", ids}}; }
  int64_t vocab = 0;

  static Var apply(const Var& weight, const Tensor& ids) {
    Tensor out = dispatch::embedding_forward(weight.data(), ids);  // [..., C]
    if (!needs_grad({weight})) return Var(out);
    auto node = std::make_shared<EmbeddingOp>();
    node->ids = ids;
    node->vocab = weight.dim(0);
    return record(out, node, {weight});
  }

  std::vector<Tensor> backward(const Tensor& dout) override {
    return {dispatch::embedding_backward(dout, ids, vocab)};
  }
  // The table's gradient added straight into the sum the walk offers (the
  // weight's .grad, its slice of the parameters' gradient buffer).
  std::vector<Tensor> backward_into(const Tensor& dout, const std::vector<Tensor*>& sums) override {
    if (!sums[0]) return backward(dout);
    dispatch::embedding_backward_add(dout, ids, *sums[0]);
    return {Tensor()};
  }
};

Var softmax(const Var& x, bool causal) { return SoftmaxOp::apply(x, causal); }
Var log_softmax(const Var& x) { return LogSoftmaxOp::apply(x); }
Var cross_entropy(const Var& logits, const Tensor& targets, const Tensor& mask, const Tensor& mask_count) {
  return CrossEntropyOp::apply(logits, targets, mask, mask_count);
}
Var embedding(const Var& weight, const Tensor& ids) { return EmbeddingOp::apply(weight, ids); }

}  // namespace lina
