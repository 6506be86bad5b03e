// The recurrent mixer of the linear / delta / gdn / retnet / mamba2 / gla
// presets (docs/spec.md §1.2, §1.2b):
//   q, k, v = x W_qᵀ, x W_kᵀ, x W_vᵀ         (each 4 heads × 32), as one product
//   x [W_q; W_k; W_v]ᵀ: the three weights are neighbours in the parameter
//   buffer, so the stacked weight is a view of them (stacked_rows)
//   the causal depthwise conv (kernel 4) of [q | k | v], channel by channel,
//   then SiLU: one op over all 3C channels with `conv.weight` (causal_conv1d_silu,
//   unless ModelConfig::conv is Fusion::Composed), then split into q, k, v
//   feature map on q, k: elu + 1, relu + 1e-5 or sigmoid + 1e-5 (linear),
//   else L2-normalise per head; q is not scaled
//   β = σ(x W_bᵀ + b_b) (delta rules), log α = log σ(x W_aᵀ + b_a) (learned
//   decays: one per head, or one per head and key channel for gla); with
//   both (gdn), one product of x with [W_b; W_a], split after the bias
//   o = scan(q, k, v, β, log α)  — the recurrence, see docs/recurrence.md and
//   docs/recurrence-gated.md; retnet's fixed decay lives in the scan itself
//   per-head RMSNorm of o, concat, times the output gate silu(x W_gᵀ), W_o,
//   dropout
#include <cmath>

#include "dispatch/layout.h"
#include "models/mixers.h"

namespace lina {

// conv + SiLU: one op (fused) or causal_conv1d then silu. With a cache, the
// conv sees the last K−1 inputs of the previous call instead of zero
// padding, and the cache is updated.
static Var conv_silu(const Var& x, const Var& weight, Tensor* cache, bool fused) {
  auto conv_then_silu = [&](const Var& in) {
    return fused ? causal_conv1d_silu(in, weight) : silu(causal_conv1d(in, weight));
  };
  if (!cache) return conv_then_silu(x);
  int64_t T = x.dim(1), keep = cache->dim(1);  // keep = K − 1
  Var window = concat({Var(*cache), x}, 1);    // [B, K−1+T, C]
  *cache = slice(window.data(), 1, T, keep);   // the newest K−1 inputs
  return slice(conv_then_silu(window), 1, keep, T);
}

// The feature map of q and k, on [B, T, H, d]: linear attention's positive
// map (elu(x) + 1, relu(x) + 1e-5 or sigmoid(x) + 1e-5), else L2-normalise.
static Var feature_map(const ModelConfig& c, MixerKind kind, const Var& x) {
  if (kind != MixerKind::Linear) return l2_norm(x, 1e-12);
  switch (c.feature_map) {
    case FeatureMap::Relu: return add_scalar(relu(x), 1e-5);
    case FeatureMap::Sigmoid: return add_scalar(sigmoid(x), 1e-5);
    case FeatureMap::Elu1: break;
  }
  return add_scalar(elu(x), 1.0);  // elu(x) + 1 > 0
}

Var RecurrentMixer::forward(const ModelConfig& c, const Var& x, const LayerNames& n,
                            LayerCache* cache, std::vector<double>* alpha_mean,
                            const DropoutKey& drop) const {
  int64_t B = x.dim(0), T = x.dim(1), H = c.n_head, d = c.head_size;
  Shape heads{B, T, H, d};
  const ScanRule rule = scan_rule(kind);
  const int64_t C = H * d;
  // [W_q; W_k; W_v] [3C, C]: one product for q, k and v (and one for dx,
  // one for the three dW in the backward).
  Var qkv = named(linear(x, stacked_rows({q_proj, k_proj, v_proj})), n.qkv_proj);  // [B, T, 3C]
  // conv.weight [3C, 1, K] holds the taps of q's channels, then k's, then
  // v's: one conv + SiLU over the 3C channels, then split into heads.
  Var taps = reshape(conv, {3 * C, conv.dim(2)});  // [3C, K]
  qkv = named(conv_silu(qkv, taps, cache ? &cache->conv : nullptr, c.conv == Fusion::Fused), n.qkv_conv);
  std::vector<Var> parts = split(qkv, -1, {C, C, C});  // [B, T, C] each
  Var q = named(feature_map(c, kind, reshape(parts[0], heads)), n.q);
  Var k = named(feature_map(c, kind, reshape(parts[1], heads)), n.k);
  Var v = named(reshape(parts[2], heads), n.v);

  Var b_proj, a_proj;   // x W_bᵀ + b_b [B, T, H], x W_aᵀ + b_a [B, T, alphas]
  if (uses_beta(rule) && learns_decay(rule)) {
    // Both from one product with the weights stacked, [W_b; W_a] [H + alphas,
    // C]: x is read once instead of twice, and its gradient is one product
    // where it would be two and their sum (a few outputs each).
    Var w = concat({b_proj_w, a_proj_w}, 0);  // [H + alphas, C]
    Var b = concat({b_proj_b, a_proj_b}, 0);  // [H + alphas]
    Var stacked = named(add(linear(x, w), b), n.ba_proj);
    std::vector<Var> parts = split(stacked, -1, {b_proj_w.dim(0), a_proj_w.dim(0)});
    b_proj = parts[0];
    a_proj = parts[1];
  } else if (uses_beta(rule)) {
    b_proj = add(linear(x, b_proj_w), b_proj_b);
  } else if (learns_decay(rule)) {
    a_proj = add(linear(x, a_proj_w), a_proj_b);
  }
  Var beta, log_alpha;  // [B, T, H]; log_alpha [B, T, H, d] when per key channel
  if (uses_beta(rule)) beta = named(sigmoid(named(b_proj, n.b_proj)), n.beta);
  if (learns_decay(rule)) {
    a_proj = named(a_proj, n.a_proj);
    log_alpha = log_sigmoid(a_proj);  // −softplus(−z), never log(σ(z))
    if (decays_per_channel(rule)) log_alpha = reshape(log_alpha, heads);
    log_alpha = named(log_alpha, n.log_alpha);
    if (alpha_mean) {  // the mean α of each head, over tokens (and key channels)
      Tensor alpha = dispatch::unary(UnaryFn::Exp, log_alpha.data());
      const int64_t per_head = decays_per_channel(rule) ? d : 1;
      alpha = sum_to(alpha.reshape({B * T, H * per_head}), {H * per_head});
      alpha_mean->assign(size_t(H), 0.0);
      for (int64_t i = 0; i < H * per_head; ++i)
        (*alpha_mean)[size_t(i / per_head)] += alpha.at(i) / double(B * T * per_head);
    }
  }

  ScanOptions options;
  options.rule = rule;
  options.form = cache ? ScanForm::Sequential : c.scan_form;  // generation: token by token
  options.chunk = c.scan_chunk;
  Tensor initial_state = cache ? cache->state : Tensor();
  Var o = named(scan(options, q, k, v, beta, log_alpha, initial_state, cache ? &cache->state : nullptr), n.o);
  o = named(rms_norm(o, o_norm, c.norm_eps), n.o_norm);  // per head: the last dim is one head's d
  Var gate = named(linear(x, g_proj), n.g_proj);  // [B, T, C] = x W_gᵀ, from the mixer's input
  Var gated = named(swiglu(gate, reshape(o, {B, T, H * d})), n.gated);  // silu(x W_gᵀ) ⊙ o
  return named(dropout(linear(gated, o_proj), drop), n.mix);
}

}  // namespace lina
