// The recurrent mixer of the linear / delta / gdn presets (docs/spec.md §1.2):
//   q, k, v = x W_qᵀ, x W_kᵀ, x W_vᵀ         (each 4 heads × 32)
//   each through its causal depthwise conv (kernel 4), then SiLU
//   feature map on q, k: elu + 1 (linear) or L2-normalise per head (delta, gdn)
//   q scaled by 1/√d
//   β = σ(x W_bᵀ + b_b), log α = log σ(x W_aᵀ + b_a)
//   o = scan(q, k, v, β, log α)  — the recurrence, see docs/recurrence.md
//   per-head RMSNorm of o, concat, W_o
#include <cmath>

#include "core/layout.h"
#include "models/mixers.h"

namespace lina {

// conv + SiLU. With a cache, the conv sees the last K−1 inputs of the
// previous call instead of zero padding, and the cache is updated.
static Var conv_silu(const Var& x, const Var& weight, Tensor* cache) {
  if (!cache) return silu(causal_conv1d(x, weight));
  int64_t T = x.dim(1), keep = cache->dim(1);  // keep = K − 1
  Var window = concat({Var(*cache), x}, 1);    // [B, K−1+T, C]
  *cache = slice(window.data(), 1, T, keep);   // the newest K−1 inputs
  return silu(slice(causal_conv1d(window, weight), 1, keep, T));
}

// The feature map of q and k, on [B, T, H, d].
static Var feature_map(MixerKind kind, const Var& x) {
  if (kind == MixerKind::Linear) return add_scalar(elu(x), 1.0);  // elu(x) + 1 > 0
  return l2_norm(x, 1e-12);
}

static ScanRule rule_of(MixerKind kind) {
  switch (kind) {
    case MixerKind::Linear: return ScanRule::Linear;
    case MixerKind::Delta: return ScanRule::Delta;
    default: return ScanRule::GatedDelta;
  }
}

Var RecurrentMixer::forward(const ModelConfig& c, const Var& x, const LayerNames& n,
                            LayerCache* cache, std::vector<double>* alpha_mean) const {
  int64_t B = x.dim(0), T = x.dim(1), H = c.n_head, d = c.head_size;
  Shape heads{B, T, H, d};
  // Projection, then conv + SiLU, then split into heads (all [B, T, C] = [B, T, H·d]).
  auto project = [&](const Var& w, const Var& conv, Tensor* conv_cache, const char* proj_name,
                     const char* conv_name) {
    return reshape(named(conv_silu(named(linear(x, w), proj_name), conv, conv_cache), conv_name),
                   heads);
  };
  Var q = project(wq, conv_q, cache ? &cache->conv_q : nullptr, n.q_proj, n.q_conv);
  Var k = project(wk, conv_k, cache ? &cache->conv_k : nullptr, n.k_proj, n.k_conv);
  Var v = named(project(wv, conv_v, cache ? &cache->conv_v : nullptr, n.v_proj, n.v_conv), n.v);
  q = named(mul_scalar(feature_map(kind, q), 1.0 / std::sqrt(double(d))), n.q);
  k = named(feature_map(kind, k), n.k);

  Var beta, log_alpha;  // [B, T, H]
  if (kind != MixerKind::Linear)
    beta = named(sigmoid(named(add(linear(x, b_proj_w), b_proj_b), n.b_proj)), n.beta);
  if (kind == MixerKind::GatedDelta) {
    Var a_proj = named(add(linear(x, a_proj_w), a_proj_b), n.a_proj);
    log_alpha = named(log_sigmoid(a_proj), n.log_alpha);  // −softplus(−z), never log(σ(z))
    if (alpha_mean) {
      Tensor alpha = sum_to(kernels::unary(UnaryFn::Exp, log_alpha.data()), {H});
      alpha_mean->resize(size_t(H));
      for (int64_t h = 0; h < H; ++h) (*alpha_mean)[size_t(h)] = alpha.at(h) / double(B * T);
    }
  }

  ScanOptions options;
  options.rule = rule_of(kind);
  options.form = cache ? ScanForm::Sequential : c.scan_form;  // generation: token by token
  options.chunk = c.scan_chunk;
  Tensor s0 = cache ? cache->state : Tensor();
  Var o = named(scan(options, q, k, v, beta, log_alpha, s0, cache ? &cache->state : nullptr), n.o);
  o = named(rms_norm(o, o_norm, c.norm_eps), n.o_norm);  // per head: the last dim is one head's d
  return named(linear(reshape(o, {B, T, H * d}), wo), n.mixer);
}

}  // namespace lina
