// The recurrent mixer of the linear / delta / gdn / retnet / mamba2 / gla
// presets (docs/spec.md §1.2, §1.2b):
//   q, k, v = x W_qᵀ, x W_kᵀ, x W_vᵀ         (each 4 heads × 32)
//   the causal depthwise conv (kernel 4) of [q | k | v], channel by channel,
//   then SiLU: run as one conv per third of the channels with that third of
//   `conv.weight` (one fused op, causal_conv1d_silu, unless ModelConfig::conv
//   is Fusion::Composed; for q and k the L2 feature map below joins it,
//   causal_conv1d_silu_l2_norm, in all but linear)
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

// conv + SiLU: one op (fused) or causal_conv1d then silu; with l2_head > 0
// (fused only), each head then L2-normalised, in the same op
// (causal_conv1d_silu_l2_norm). With a cache, the conv sees the last K−1 inputs of
// the previous call instead of zero padding, and the cache is updated.
static Var conv_silu(const Var& x, const Var& weight, Tensor* cache, bool fused,
                     int64_t l2_head = 0) {
  auto conv_then_silu = [&](const Var& in) {
    if (l2_head > 0) return causal_conv1d_silu_l2_norm(in, weight, l2_head);
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
  // With the fused conv, q's and k's L2 feature map (all but linear) joins
  // the conv's op (causal_conv1d_silu_l2_norm), whose output is then q or k itself.
  const bool map_in_conv = c.conv == Fusion::Fused && kind != MixerKind::Linear;
  const int64_t l2_head = map_in_conv ? d : 0;
  // conv.weight [3C, 1, K] holds the taps of q's channels, then k's, then v's.
  const int64_t C = H * d;
  std::vector<Var> taps = split(reshape(conv, {3 * C, conv.dim(2)}), 0, {C, C, C});  // [C, K] each
  // Projection, then conv + SiLU (with l2_head > 0, then each head's L2
  // norm), then split into heads (all [B, T, C] = [B, T, H·d]).
  auto project = [&](const Var& w, const Var& taps, Tensor* conv_cache, const char* proj_name,
                     const char* conv_name, int64_t l2 = 0) {
    Var y = conv_silu(named(linear(x, w), proj_name), taps, conv_cache, c.conv == Fusion::Fused, l2);
    return reshape(l2 > 0 ? y : named(y, conv_name), heads);
  };
  Var q = project(q_proj, taps[0], cache ? &cache->conv_q : nullptr, n.q_proj, n.q_conv, l2_head);
  Var k = project(k_proj, taps[1], cache ? &cache->conv_k : nullptr, n.k_proj, n.k_conv, l2_head);
  Var v = project(v_proj, taps[2], cache ? &cache->conv_v : nullptr, n.v_proj, n.v_conv);
  if (!map_in_conv) {
    q = feature_map(c, kind, q);
    k = feature_map(c, kind, k);
  }
  q = named(q, n.q);
  k = named(k, n.k);
  v = named(v, n.v);

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
