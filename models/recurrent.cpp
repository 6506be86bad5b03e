// The recurrent mixer of the linear / delta / gdn / retnet / mamba2 / gla
// presets (docs/spec.md §1.2, §1.2b):
//   q, k, v = x W_qᵀ, x W_kᵀ, x W_vᵀ         (each 4 heads × 32), as one product
//   x [W_q; W_k; W_v]ᵀ (with W_g, W_b, W_a on the fused path): the weights
//   are neighbours in the parameter buffer, so the stacked weight is a view
//   of them (stacked_rows)
//   the causal depthwise conv (kernel 4) of [q | k | v], channel by channel,
//   then SiLU, with `conv.weight`
//   feature map on q, k: elu + 1, relu + 1e-5 or sigmoid + 1e-5 (linear),
//   else L2-normalise per head; q is not scaled
//   β = σ(x W_bᵀ + b_b) (delta rules), log α = log σ(x W_aᵀ + b_a) (learned
//   decays: one per head, or one per head and key channel for gla)
// The fused path (scan_of_packed_inputs) makes q, k, v in one op as three
// planes and β, log α in one op as two, both from one product with
// [W_q; W_k; W_v; W_g; W_b; W_a], whose columns [3C, 4C) are also the output
// gate's x W_gᵀ; the scan reads the planes in place, the gated norm its gate.
// The split path (scan_of_split_inputs) runs op by op: linear attention's
// feature map, and the composed reference.
//   o = scan(q, k, v, β, log α)  — the recurrence, see docs/recurrence.md and
//   docs/recurrence-gated.md; retnet's fixed decay lives in the scan itself
//   per-head RMSNorm of o, concat, times the output gate silu(x W_gᵀ), W_o
//   (dropped out in the residual sum, LanguageModel::forward); the fused
//   path takes the norm and the gate as one op (rms_norm_gated)
#include <cmath>

#include "dispatch/layout.h"
#include "models/mixers.h"

namespace lina {

// conv(x), a causal conv along x's axis 1 ([B, T, C]). With a cache, the
// conv sees the last K−1 inputs of the previous call instead of zero
// padding, the cache is updated, and the output keeps its last T steps
// along its own time axis (`out_time_axis`: 1, or 2 for an output in planes).
template <class Conv>
static Var with_conv_cache(const Var& x, Tensor* cache, int out_time_axis, Conv conv) {
  if (!cache) return conv(x);
  int64_t T = x.dim(1), keep = cache->dim(1);  // keep = K − 1
  Var window = concat({Var(*cache), x}, 1);    // [B, K−1+T, C]
  *cache = slice(window.data(), 1, T, keep);   // the newest K−1 inputs
  return slice(conv(window), out_time_axis, keep, T);
}

// conv + SiLU: one op (fused) or causal_conv1d then silu.
static Var conv_silu(const Var& x, const Var& weight, Tensor* cache, bool fused) {
  return with_conv_cache(x, cache, 1, [&](const Var& in) {
    return fused ? causal_conv1d_silu(in, weight) : silu(causal_conv1d(in, weight));
  });
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

// The mean α of each head, over tokens (and key channels): log_alpha [B, T,
// H] or [B, T, H, d] (per_head = d).
static void mean_decay_per_head(const Tensor& log_alpha, int64_t H, int64_t per_head,
                                std::vector<double>* alpha_mean) {
  const int64_t rows = log_alpha.numel() / (H * per_head);
  Tensor alpha = dispatch::unary(UnaryFn::Exp, log_alpha);
  alpha = sum_to(alpha.reshape({rows, H * per_head}), {H * per_head});
  alpha_mean->assign(size_t(H), 0.0);
  for (int64_t i = 0; i < H * per_head; ++i)
    (*alpha_mean)[size_t(i / per_head)] += alpha.at(i) / double(rows * per_head);
}

// What every recurrent mixer's scan is given, besides q, k, v and β, log α.
struct ScanCall {
  ScanOptions options;
  Tensor initial_state;  // undefined: zeros
  Tensor* final_state;   // null: not kept
};

// The scan's inputs packed (every rule but linear attention's, with the
// fused conv): one product z = x [W_q; W_k; W_v; W_g; W_b; W_a]ᵀ (W_b, W_a
// where the rule has them; the weights side by side in the buffer:
// place_together) [B, T, 4C + gates], handed back in *z for the output
// gate, whose x W_gᵀ is z's columns [3C, 4C) (gated_output); one op makes β
// and log α from z's last columns, laid out as two planes; one op makes q,
// k, v from its first 3C — conv + SiLU, q's and k's heads L2-normalised —
// laid out as three planes [3, B, T, H, d]. The scan reads every plane in
// place: nothing is split. The backward runs z's readers in reverse: the
// gated norm's first, returning z's whole gradient (0 outside the gate's
// columns), then the conv's and the gates', each adding into its columns.
static Var scan_of_packed_inputs(const RecurrentMixer& m, const ModelConfig& c, const Var& x,
                                 const Var& taps, const LayerNames& n, Tensor* conv_cache,
                                 const ScanCall& call, std::vector<double>* alpha_mean, Var* z) {
  const int64_t B = x.dim(0), T = x.dim(1), H = c.n_head, d = c.head_size, C = H * d;
  const ScanRule rule = call.options.rule;
  std::vector<Var> w{m.q_proj, m.k_proj, m.v_proj, m.g_proj}, b;  // the stacked weights; the gates' biases
  if (uses_beta(rule)) {
    w.push_back(m.b_proj_w);
    b.push_back(m.b_proj_b);
  }
  if (learns_decay(rule)) {
    w.push_back(m.a_proj_w);
    b.push_back(m.a_proj_b);
  }
  *z = named(linear(x, stacked_rows(w)), n.qkv_proj);  // [B, T, 4C + gates]

  Var gates;  // [β | log α], flat
  Shape decay_shape;
  if (!b.empty()) {
    gates = named(beta_log_alpha(*z, stacked_rows(b), uses_beta(rule) ? H : 0), n.beta_log_alpha);
    decay_shape = decays_per_channel(rule) ? Shape{B, T, H, d} : Shape{B, T, H};
    if (alpha_mean && learns_decay(rule)) {
      const int64_t at = uses_beta(rule) ? B * T * H : 0;
      mean_decay_per_head(Tensor::view_of(gates.data(), at, decay_shape), H,
                          decays_per_channel(rule) ? d : 1, alpha_mean);
    }
  }
  // [3, B, T, C]: q, k normalised per head of d, v as it is; with a conv
  // cache (generation) from z's first 3C columns, copied
  Var conv_in = conv_cache ? slice(*z, 2, 0, 3 * C) : *z;
  Var planes = with_conv_cache(conv_in, conv_cache, /*out_time_axis=*/2, [&](const Var& in) {
    return causal_conv1d_silu_l2_norm_planes(in, taps, d, /*planes=*/3, /*normed=*/2);
  });
  planes = named(reshape(planes, {3, B, T, H, d}), n.qkv);
  return scan_packed(call.options, planes, gates, decay_shape, call.initial_state, call.final_state);
}

// The scan's inputs op by op (linear attention, whose feature map is not an
// L2 norm, and the composed conv, the fused path's reference): conv + SiLU,
// split into q, k, v, the feature map; β = σ(x W_bᵀ + b_b), log α =
// log σ(x W_aᵀ + b_a), each from a product of its own.
static Var scan_of_split_inputs(const RecurrentMixer& m, const ModelConfig& c, const Var& x,
                                const Var& taps, const LayerNames& n, Tensor* conv_cache,
                                const ScanCall& call, std::vector<double>* alpha_mean) {
  const int64_t B = x.dim(0), T = x.dim(1), H = c.n_head, d = c.head_size, C = H * d;
  const Shape heads{B, T, H, d};
  const ScanRule rule = call.options.rule;
  // [W_q; W_k; W_v] [3C, C]: one product for q, k and v (and one for dx,
  // one for the three dW in the backward)
  Var qkv_proj = named(linear(x, stacked_rows({m.q_proj, m.k_proj, m.v_proj})), n.qkv_proj);  // [B, T, 3C]
  Var qkv = named(conv_silu(qkv_proj, taps, conv_cache, c.conv == Fusion::Fused), n.qkv_conv);
  std::vector<Var> parts = split(qkv, -1, {C, C, C});  // [B, T, C] each
  Var q = named(feature_map(c, m.kind, reshape(parts[0], heads)), n.q);
  Var k = named(feature_map(c, m.kind, reshape(parts[1], heads)), n.k);
  Var v = named(reshape(parts[2], heads), n.v);
  Var beta, log_alpha;  // [B, T, H]; log_alpha [B, T, H, d] when per key channel
  if (uses_beta(rule))
    beta = named(sigmoid(named(add(linear(x, m.b_proj_w), m.b_proj_b), n.b_proj)), n.beta);
  if (learns_decay(rule)) {
    Var a_proj = named(add(linear(x, m.a_proj_w), m.a_proj_b), n.a_proj);
    log_alpha = log_sigmoid(a_proj);  // −softplus(−z), never log(σ(z))
    if (decays_per_channel(rule)) log_alpha = reshape(log_alpha, heads);
    log_alpha = named(log_alpha, n.log_alpha);
    if (alpha_mean) mean_decay_per_head(log_alpha.data(), H, decays_per_channel(rule) ? d : 1, alpha_mean);
  }
  return scan(call.options, q, k, v, beta, log_alpha, call.initial_state, call.final_state);
}

// silu(x W_gᵀ) ⊙ o_norm(o) [B, T, C], the norm per head (o [B, T, H, d]).
// Fused, one op (rms_norm_gated): reading its gate in place from the packed
// product z's columns [3C, 4C) where there is one, else from a product of
// its own. Composed: rms_norm, then swiglu.
static Var gated_output(const RecurrentMixer& m, const ModelConfig& c, const Var& x, const Var& o, const Var& z,
                        const LayerNames& n) {
  const int64_t B = x.dim(0), T = x.dim(1), H = c.n_head, d = c.head_size, C = H * d;
  Var gated;
  if (z.defined()) {
    gated = rms_norm_gated(o, m.o_norm, z, c.norm_eps, /*gate_column=*/3 * C);
  } else {
    Var gate = named(linear(x, m.g_proj), n.g_proj);  // [B, T, C] = x W_gᵀ, from the mixer's input
    if (c.conv == Fusion::Fused) {
      gated = rms_norm_gated(o, m.o_norm, reshape(gate, {B, T, H, d}), c.norm_eps);
    } else {
      Var normed = named(rms_norm(o, m.o_norm, c.norm_eps), n.o_norm);
      gated = swiglu(gate, reshape(normed, {B, T, C}));
    }
  }
  return named(reshape(gated, {B, T, C}), n.gated);
}

Var RecurrentMixer::forward(const ModelConfig& c, const Var& x, const LayerNames& n,
                            LayerCache* cache, std::vector<double>* alpha_mean) const {
  const int64_t C = c.n_head * c.head_size;
  // conv.weight [3C, 1, K] holds the taps of q's channels, then k's, then v's
  Var taps = reshape(conv, {3 * C, conv.dim(2)});  // [3C, K]

  ScanCall call;
  call.options.rule = scan_rule(kind);
  call.options.form = cache ? ScanForm::Sequential : c.scan_form;  // generation: token by token
  call.options.chunk = c.scan_chunk;
  call.initial_state = cache ? cache->state : Tensor();
  call.final_state = cache ? &cache->state : nullptr;
  Tensor* conv_cache = cache ? &cache->conv : nullptr;
  const bool packed = kind != MixerKind::Linear && c.conv == Fusion::Fused;
  Var z;  // packed: the one product, whose columns [3C, 4C) are x W_gᵀ
  Var o = packed ? scan_of_packed_inputs(*this, c, x, taps, n, conv_cache, call, alpha_mean, &z)
                 : scan_of_split_inputs(*this, c, x, taps, n, conv_cache, call, alpha_mean);
  o = named(o, n.o);  // [B, T, H, d]
  Var gated = gated_output(*this, c, x, o, z, n);  // [B, T, C]
  return named(linear(gated, o_proj), n.mix);  // its dropout joins the residual sum
}

}  // namespace lina
