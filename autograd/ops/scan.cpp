// The recurrence of the linear / delta / gated-delta mixers (docs/recurrence.md),
// per (batch, head) with a d×d state S (value × key):
//   S_t = α_t S_{t−1} + u_t k_tᵀ,   o_t = S_t q_t
//   linear: α = 1, u = v;  delta: α = 1, u = β(v − S k);  gated delta: u = β(v − α S k)
// Its backward is hand-written in both forms (backend_cpu/scan_*.cpp):
// token by token, a reverse-time recurrence on G = dL/dS_t (§2.1)
//   G += dO_t q_tᵀ;  e = G k_t;  dv_t = β e;  dβ_t = eᵀ r_t;  dq_t = S_tᵀ dO_t
//   dk_t = Gᵀ u_t − αβ S_{t−1}ᵀ e;  dα_t = ⟨G, S_{t−1}⟩ − β eᵀ S_{t−1} k_t
//   G ← α (G − β e k_tᵀ)
// or chunk by chunk with matrix products (§3.4). The decay's gradient is taken
// with respect to g = log α: dg = α dα.
#include "autograd/functions.h"
#include "dispatch/dispatch.h"

namespace lina {

struct ScanOp : Node {
  ScanOp() : Node(OpKind::Scan) {}
  ScanOptions options;
  Tensor q, k, v, beta, log_alpha;  // saved inputs; beta / log_alpha undefined when unused
  Tensor saved_states;  // S_0 … S_{T−1} (sequential) or the chunk-start states (chunked)
  SavedTensors saved() const override {
    return {{"q", q}, {"k", k}, {"v", v}, {"beta", beta}, {"log_alpha", log_alpha},
            {"states", saved_states}};
  }

  static Var apply(const ScanOptions& options, const Var& q, const Var& k, const Var& v,
                   const Var& beta, const Var& log_alpha, const Tensor& initial_state,
                   Tensor* final_state) {
    const Tensor beta_t = beta.defined() ? beta.data() : Tensor();
    const Tensor log_alpha_t = log_alpha.defined() ? log_alpha.data() : Tensor();

    // Only the inputs the rule reads are recorded (the kernels reject the others).
    std::vector<Var> inputs{q, k, v};
    if (uses_beta(options.rule) && beta.defined()) inputs.push_back(beta);
    if (learns_decay(options.rule) && log_alpha.defined()) inputs.push_back(log_alpha);
    const bool grad = needs_grad(inputs);

    Tensor last_state, saved;
    Tensor o = dispatch::scan_forward(options, q.data(), k.data(), v.data(), beta_t, log_alpha_t,
                                      initial_state, last_state, grad ? &saved : nullptr);
    if (final_state) *final_state = last_state;
    if (!grad) return Var(o);
    auto node = std::make_shared<ScanOp>();
    node->options = options;
    node->q = q.data();
    node->k = k.data();
    node->v = v.data();
    node->beta = beta_t;
    node->log_alpha = log_alpha_t;
    node->saved_states = saved;
    return record(o, node, inputs);
  }

  // dout [B, T, H, d]. S_T leaves the op as a plain tensor, so dS_T = 0, and
  // the initial state receives no gradient.
  std::vector<Tensor> backward(const Tensor& dout) override {
    dispatch::ScanGrads g = dispatch::scan_backward(options, q, k, v, beta, log_alpha,
                                                    saved_states, dout, Tensor());
    std::vector<Tensor> grads{g.dq, g.dk, g.dv};
    if (uses_beta(options.rule)) grads.push_back(g.dbeta);
    if (learns_decay(options.rule)) grads.push_back(g.dlog_alpha);
    return grads;
  }
};

Var scan(const ScanOptions& options, const Var& q, const Var& k, const Var& v, const Var& beta,
         const Var& log_alpha, const Tensor& initial_state, Tensor* final_state) {
  check(q.defined() && k.defined() && v.defined(), "scan: q, k and v are required");
  return ScanOp::apply(options, q, k, v, beta, log_alpha, initial_state, final_state);
}

}  // namespace lina
