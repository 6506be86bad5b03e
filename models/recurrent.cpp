// The recurrent mixer of the linear / delta / gdn / retnet / mamba2 / gla
// presets (spec §1.2, §1.2b):
//   q, k, v = x W_qᵀ, x W_kᵀ, x W_vᵀ         (each 4 heads × 32)
//   each through its causal depthwise conv (kernel 4), then SiLU
//   feature map on q, k: elu + 1, relu + 1e-5 or sigmoid + 1e-5 (linear),
//   else L2-normalise per head
//   q scaled by 1/√d
//   β = σ(x W_bᵀ + b_b) (delta rules), log α = log σ(x W_aᵀ + b_a) (learned
//   decays: one per head, or one per head and key channel for gla)
//   o = scan(q, k, v, β, log α)  — the recurrence, see recurrence.md and
//   docs/recurrence-gated.md; retnet's fixed decay lives in the scan itself
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

Var RecurrentMixer::forward(const ModelConfig& c, const Var& x, LayerCache* cache,
                            std::vector<double>* alpha_mean) const {
  int64_t B = x.dim(0), T = x.dim(1), H = c.n_head, d = c.head_size;
  Shape heads{B, T, H, d};
  const ScanRule rule = scan_rule(kind);
  Var q = reshape(conv_silu(linear(x, wq), conv_q, cache ? &cache->conv_q : nullptr), heads);
  Var k = reshape(conv_silu(linear(x, wk), conv_k, cache ? &cache->conv_k : nullptr), heads);
  Var v = reshape(conv_silu(linear(x, wv), conv_v, cache ? &cache->conv_v : nullptr), heads);
  q = mul_scalar(feature_map(c, kind, q), 1.0 / std::sqrt(double(d)));
  k = feature_map(c, kind, k);

  Var beta, log_alpha;  // [B, T, H]; log_alpha [B, T, H, d] when per key channel
  if (uses_beta(rule)) beta = sigmoid(add(linear(x, b_proj_w), b_proj_b));
  if (uses_gate(rule)) {
    log_alpha = log_sigmoid(add(linear(x, a_proj_w), a_proj_b));  // −softplus(−z), never log(σ(z))
    if (gate_per_channel(rule)) log_alpha = reshape(log_alpha, heads);
    if (alpha_mean) {  // the mean α of each head, over tokens (and key channels)
      Tensor alpha = kernels::unary(UnaryFn::Exp, log_alpha.data());
      const int64_t per_head = gate_per_channel(rule) ? d : 1;
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
  // The GPU's chunked programs take a decay per head only (backend_cuda/scan.cu):
  // a decay per key channel runs token by token there.
  if (gate_per_channel(rule) && x.data().device() == Device::cuda) options.form = ScanForm::Sequential;
  Tensor s0 = cache ? cache->state : Tensor();
  Var o = scan(options, q, k, v, beta, log_alpha, s0, cache ? &cache->state : nullptr);
  o = rms_norm(o, o_norm, c.norm_eps);  // per head: the last dim is one head's d values
  return linear(reshape(o, {B, T, H * d}), wo);
}

}  // namespace lina
