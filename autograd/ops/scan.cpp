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

// The scan reads q, k, v (and β, log α) either as tensors of their own or,
// packed, as views of two: qkv [3, B, T, H, d] (causal_conv1d_silu_l2_norm's
// planes) and beta_and_log_alpha (beta_log_alpha's planes: β [B, T, H], then
// log α). Packed, the backward writes dq, dk, dv into one dqkv and dβ,
// dlog α into one dbeta_and_log_alpha, so no split runs either way.
struct ScanViews {
  Tensor q, k, v, beta, log_alpha;
};

// The views of qkv and beta_and_log_alpha; decay_shape is log α's ([B, T,
// H], or [B, T, H, d] for a decay per key channel).
static ScanViews packed_views(const ScanOptions& options, const Tensor& qkv, const Tensor& beta_and_log_alpha,
                              const Shape& decay_shape) {
  check(qkv.ndim() == 5 && qkv.dim(0) == 3,
        "scan: packed q, k, v must be [3, B, T, H, d], got " + qkv.describe());
  const Shape heads{qkv.dim(1), qkv.dim(2), qkv.dim(3), qkv.dim(4)};
  const int64_t n = qkv.numel() / 3;
  ScanViews in{Tensor::view_of(qkv, 0, heads), Tensor::view_of(qkv, n, heads),
               Tensor::view_of(qkv, 2 * n, heads), Tensor(), Tensor()};
  int64_t at = 0;
  if (uses_beta(options.rule)) {
    const Shape beta_shape{heads[0], heads[1], heads[2]};
    in.beta = Tensor::view_of(beta_and_log_alpha, 0, beta_shape);
    at = numel(beta_shape);
  }
  if (learns_decay(options.rule)) in.log_alpha = Tensor::view_of(beta_and_log_alpha, at, decay_shape);
  return in;
}

struct ScanOp : Node {
  ScanOp() : Node(OpKind::Scan) {}
  ScanOptions options;
  Tensor q, k, v, beta, log_alpha;  // saved inputs (views when packed); beta / log_alpha undefined when unused
  Tensor saved_states;  // S_0 … S_{T−1} (sequential) or the chunk-start states (chunked)
  Tensor Y, W, U;       // the chunked solve's results, where it keeps them (dispatch::ScanSaved); else undefined
  bool packed = false;  // inputs: {qkv, beta_and_log_alpha} instead of {q, k, v, β, log α}
  SavedTensors saved() const override {
    return {{"q", q}, {"k", k}, {"v", v}, {"beta", beta}, {"log_alpha", log_alpha},
            {"states", saved_states}, {"Y", Y}, {"W", W}, {"U", U}};
  }
  dispatch::ScanSaved kept() const { return {saved_states, Y, W, U}; }

  // inputs: the Vars recorded (the rule's only; the kernels reject the others); in: their tensors.
  static Var apply(const ScanOptions& options, const std::vector<Var>& inputs, const ScanViews& in,
                   bool packed, const Tensor& initial_state, Tensor* final_state) {
    const bool grad = needs_grad(inputs);
    Tensor last_state;
    dispatch::ScanSaved saved;  // only when a backward will run
    Tensor o = dispatch::scan_forward(options, in.q, in.k, in.v, in.beta, in.log_alpha, initial_state,
                                      last_state, grad ? &saved : nullptr);
    if (final_state) *final_state = last_state;
    if (!grad) return Var(o);
    auto node = std::make_shared<ScanOp>();
    node->options = options;
    node->q = in.q;
    node->k = in.k;
    node->v = in.v;
    node->beta = in.beta;
    node->log_alpha = in.log_alpha;
    node->saved_states = saved.states;
    node->Y = saved.Y;
    node->W = saved.W;
    node->U = saved.U;
    node->packed = packed;
    return record(o, node, inputs);
  }

  // dout [B, T, H, d]. S_T leaves the op as a plain tensor, so dS_T = 0, and
  // the initial state receives no gradient.
  std::vector<Tensor> backward(const Tensor& dout) override {
    if (packed) return backward_packed(dout);
    dispatch::ScanGrads g = dispatch::scan_backward(options, q, k, v, beta, log_alpha, kept(), dout, Tensor());
    std::vector<Tensor> grads{g.dq, g.dk, g.dv};
    if (uses_beta(options.rule)) grads.push_back(g.dbeta);
    if (learns_decay(options.rule)) grads.push_back(g.dlog_alpha);
    return grads;
  }

  // dqkv [3, B, T, H, d] and dbeta_and_log_alpha, each one buffer the kernels write in place
  std::vector<Tensor> backward_packed(const Tensor& dout) {
    const Tensor& qkv = inputs[0].data();
    Tensor dqkv = Tensor::empty(qkv.shape(), qkv.dtype(), qkv.device());
    Tensor dbeta_and_log_alpha;
    if (inputs.size() > 1) {
      const Tensor& planes = inputs[1].data();
      dbeta_and_log_alpha = Tensor::empty(planes.shape(), planes.dtype(), planes.device());
    }
    const ScanViews into =
        packed_views(options, dqkv, dbeta_and_log_alpha, log_alpha.defined() ? log_alpha.shape() : Shape{});
    dispatch::ScanGrads buffers{into.q, into.k, into.v, into.beta, into.log_alpha, Tensor()};
    dispatch::scan_backward(options, q, k, v, beta, log_alpha, kept(), dout, Tensor(), buffers);
    if (inputs.size() > 1) return {dqkv, dbeta_and_log_alpha};
    return {dqkv};
  }
};

Var scan(const ScanOptions& options, const Var& q, const Var& k, const Var& v, const Var& beta,
         const Var& log_alpha, const Tensor& initial_state, Tensor* final_state) {
  check(q.defined() && k.defined() && v.defined(), "scan: q, k and v are required");
  std::vector<Var> inputs{q, k, v};
  if (uses_beta(options.rule) && beta.defined()) inputs.push_back(beta);
  if (learns_decay(options.rule) && log_alpha.defined()) inputs.push_back(log_alpha);
  const ScanViews in{q.data(), k.data(), v.data(), beta.defined() ? beta.data() : Tensor(),
                     log_alpha.defined() ? log_alpha.data() : Tensor()};
  return ScanOp::apply(options, inputs, in, /*packed=*/false, initial_state, final_state);
}

Var scan_packed(const ScanOptions& options, const Var& qkv, const Var& beta_and_log_alpha, const Shape& decay_shape,
                const Tensor& initial_state, Tensor* final_state) {
  check(qkv.defined(), "scan: qkv is required");
  const bool reads_them = uses_beta(options.rule) || learns_decay(options.rule);
  check(beta_and_log_alpha.defined() == reads_them,
        std::string("scan: the ") + scan_rule_name(options.rule) +
            (reads_them ? " rule reads β or log α from beta_and_log_alpha" : " rule reads neither β nor log α"));
  std::vector<Var> inputs{qkv};
  if (reads_them) inputs.push_back(beta_and_log_alpha);
  const ScanViews in =
      packed_views(options, qkv.data(), reads_them ? beta_and_log_alpha.data() : Tensor(), decay_shape);
  return ScanOp::apply(options, inputs, in, /*packed=*/true, initial_state, final_state);
}

}  // namespace lina
