// Causal softmax attention with grouped-query heads and RoPE (docs/spec.md §1.1).
//   q = x W_qᵀ (n_head heads), k = x W_kᵀ, v = x W_vᵀ (n_kv_head heads each)
//   RoPE on q and k (interleaved pairs); scores = q kᵀ / √d, causal;
//   o = dropout(softmax(scores)) v; query head h reads KV head h / (n_head /
//   n_kv_head); out = concat(o) W_oᵀ (dropped out in the residual sum).
#include <cmath>

#include "dispatch/layout.h"
#include "models/mixers.h"

namespace lina {

// [B, T, n_kv, d] -> [B, n_kv·g, T, d]: each KV head repeated for its g query heads.
static Var repeat_kv_heads(const Var& kv, int group) {
  Var t = permute(kv, {0, 2, 1, 3});  // [B, n_kv, T, d]
  if (group == 1) return t;
  int64_t B = t.dim(0), n_kv = t.dim(1), T = t.dim(2), d = t.dim(3);
  Var e = expand(reshape(t, {B, n_kv, 1, T, d}), {B, n_kv, group, T, d});
  return reshape(e, {B, n_kv * group, T, d});
}

// The attention of q [B, T, H, d] over k, v [B, Tk, Hkv, d] op by op — permute,
// repeat each KV head for its query heads, q kᵀ, scale, causal softmax, · v —
// the composition causal_attention fuses, kept for stepping through and as
// the reference the fused op is tested against. Returns [B, T, H, d]. With
// `names`, the scores and weights carry the layer's names.
Var attention_composed(const Var& q, const Var& k, const Var& v, double scale,
                       const LayerNames* names, const DropoutKey& drop) {
  int group = int(q.dim(2) / k.dim(2));
  Var qh = permute(q, {0, 2, 1, 3});   // [B, H, T, d]
  Var kh = repeat_kv_heads(k, group);  // [B, H, Tk, d]
  Var vh = repeat_kv_heads(v, group);
  Var scores = named(mul_scalar(matmul(qh, kh, false, true), scale),
                     names ? names->scores : nullptr);                        // [B, H, T, Tk]
  Var weights = named(softmax(scores, /*causal=*/true), names ? names->weights : nullptr);
  Var o = matmul(dropout(weights, drop), vh);  // [B, H, T, d]
  return permute(o, {0, 2, 1, 3});   // [B, T, H, d]
}

Var AttentionMixer::forward(const ModelConfig& c, const Var& x, const LayerNames& n,
                            int64_t pos0, LayerCache* cache, const Dropout& drop,
                            int layer) const {
  int64_t B = x.dim(0), T = x.dim(1), d = c.head_size;
  Var q = named(linear(x, q_proj), n.q_proj), k = named(linear(x, k_proj), n.k_proj);
  q = named(rope(reshape(q, {B, T, c.n_head, d}), pos0, c.rope_base), n.q);
  k = named(rope(reshape(k, {B, T, c.n_kv_head, d}), pos0, c.rope_base), n.k);
  Var v = named(reshape(named(linear(x, v_proj), n.v_proj), {B, T, c.n_kv_head, d}), n.v);
  if (cache) {  // prepend the keys and values of earlier tokens
    if (cache->k.defined()) {
      k = concat({Var(cache->k), k}, 1);
      v = concat({Var(cache->v), v}, 1);
    }
    cache->k = k.data();
    cache->v = v.data();
  }
  const double scale = 1.0 / std::sqrt(double(d));
  const DropoutKey weights_drop = drop.key(layer, DropoutSite::AttentionWeights);
  Var o = c.attention == Fusion::Fused ? causal_attention(q, k, v, scale, weights_drop)  // one op, GQA by index
                                       : attention_composed(q, k, v, scale, &n, weights_drop);  // op by op
  o = named(o, n.o);  // [B, T, H, d]
  Var out = linear(reshape(o, {B, T, int64_t(c.n_head) * d}), o_proj);
  return named(out, n.mix);  // its dropout joins the residual sum (LanguageModel::forward)
}

}  // namespace lina
