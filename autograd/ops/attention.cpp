// Causal attention as one op: forward and backward of the fused kernel
// (dispatch/dispatch.h attention_forward / attention_backward). With
// P = softmax(scale · q kᵀ) (causal) and out = P v:
//   dv = Pᵀ dout
//   dP = dout vᵀ,  dS = scale · P ⊙ (dP − Σ_j P_j dP_j)   (softmax's Jacobian)
//   dq = dS k,  dk = dSᵀ q
// summed over the query heads that share a KV head (grouped-query attention).
// With dropout on the probabilities, out = (P ⊙ M) v: dv = (P ⊙ M)ᵀ dout and
// dP = M ⊙ (dout vᵀ); M is regenerated from the key, never stored. Of P the
// op keeps only each query row's log-sum-exp, lse [B, H, Tq] (T numbers where
// P is T²): the backward recomputes P.
#include "autograd/functions.h"
#include "dispatch/dispatch.h"

namespace lina {

struct AttentionOp : Node {
  AttentionOp() : Node(OpKind::Attention) {}
  Tensor q, k, v;  // saved inputs
  Tensor lse;      // saved log Σ_j e^{scale · q·k_j} per query row [B, H, Tq]
  double scale = 1.0;
  DropoutKey dropout;
  SavedTensors saved() const override {
    return {{"q", q}, {"k", k}, {"v", v}, {"lse", lse}};
  }

  static Var apply(const Var& q, const Var& k, const Var& v, double scale,
                   const DropoutKey& dropout) {
    Tensor lse;
    Tensor out = dispatch::attention_forward(q.data(), k.data(), v.data(), scale, lse, dropout);
    if (!needs_grad({q, k, v})) return Var(out);
    auto node = std::make_shared<AttentionOp>();
    node->q = q.data();
    node->k = k.data();
    node->v = v.data();
    node->lse = lse;
    node->scale = scale;
    node->dropout = dropout;
    return record(out, node, {q, k, v});
  }

  std::vector<Tensor> backward(const Tensor& dout) override {
    dispatch::AttentionGrads g = dispatch::attention_backward(q, k, v, lse, dout, scale, dropout);
    return {g.dq, g.dk, g.dv};
  }
};

Var causal_attention(const Var& q, const Var& k, const Var& v, double scale,
                     const DropoutKey& dropout) {
  return AttentionOp::apply(q, k, v, scale, dropout);
}

}  // namespace lina
