// Causal softmax attention with grouped-query heads and RoPE (docs/spec.md §1.1).
//   q = x W_qᵀ (n_head heads), k = x W_kᵀ, v = x W_vᵀ (n_kv_head heads each)
//   RoPE on q and k (interleaved pairs); scores = q kᵀ / √d, causal;
//   o = dropout(softmax(scores)) v; query head h reads KV head h / (n_head /
//   n_kv_head); out = concat(o) W_oᵀ (dropped out in the residual sum).
// In step-by-step inference its cache holds every earlier token's k and v.
#include "models/attention.h"

#include <cmath>

#include "dispatch/layout.h"
#include "models/initialiser.h"
#include "models/mixer.h"

namespace lina {

// [B, T, n_kv, d] -> [B, n_kv·g, T, d]: each KV head repeated for its g query heads.
static Var repeat_kv_heads(const Var& kv, int group) {
  Var t = permute(kv, {0, 2, 1, 3});  // [B, n_kv, T, d]
  if (group == 1) return t;
  int64_t B = t.dim(0), n_kv = t.dim(1), T = t.dim(2), d = t.dim(3);
  Var e = expand(reshape(t, {B, n_kv, 1, T, d}), {B, n_kv, group, T, d});
  return reshape(e, {B, n_kv * group, T, d});
}

Var attention_composed(const Var& q, const Var& k, const Var& v, double scale, const DropoutKey& drop,
                       const char* scores_name, const char* weights_name) {
  int group = int(q.dim(2) / k.dim(2));
  Var qh = permute(q, {0, 2, 1, 3});   // [B, H, T, d]
  Var kh = repeat_kv_heads(k, group);  // [B, H, Tk, d]
  Var vh = repeat_kv_heads(v, group);
  Var scores = named(mul_scalar(matmul(qh, kh, false, true), scale), scores_name);  // [B, H, T, Tk]
  Var weights = named(softmax(scores, /*causal=*/true), weights_name);
  Var o = matmul(dropout(weights, drop), vh);  // [B, H, T, d]
  return permute(o, {0, 2, 1, 3});   // [B, T, H, d]
}

namespace {

// The names of the layer's intermediate tensors ("blocks.{i}.mix.q" and so
// on), shown by the graph, the trace and the debugger; interned once.
struct AttentionNames {
  explicit AttentionNames(int layer) {
    const std::string p = "blocks." + std::to_string(layer) + ".mix";
    auto name = [&](const char* what) { return intern_name(p + what); };
    q_proj = name(".q_proj"), k_proj = name(".k_proj"), v_proj = name(".v_proj");
    q = name(".q"), k = name(".k"), v = name(".v");
    scores = name(".scores"), weights = name(".weights");
    o = name(".o"), mix = name("");
  }
  const char *q_proj, *k_proj, *v_proj;  // x W_qᵀ, x W_kᵀ, x W_vᵀ
  const char *q, *k, *v;                 // after RoPE (q, k) and reshaping to heads
  const char *scores, *weights;          // q kᵀ/√d and softmax(scores) (the composed path)
  const char *o, *mix;                   // weights · v, and the mixer's output (...) W_oᵀ
};

class AttentionMixer : public Mixer {
 public:
  AttentionMixer(Initialiser& init, const ModelConfig& c, int layer) : layer_(layer), names_(layer) {
    const std::string p = "blocks." + std::to_string(layer) + ".mix.";
    const int64_t C = c.n_embd, kv = int64_t(c.n_kv_head) * c.head_size;
    q_proj_ = init.linear(p + "q_proj.weight", C, C);
    k_proj_ = init.linear(p + "k_proj.weight", kv, C);
    v_proj_ = init.linear(p + "v_proj.weight", kv, C);
    o_proj_ = init.linear(p + "o_proj.weight", C, C);
  }

  // With a cache, attends to the cached keys too and appends this call's.
  Var forward(const ModelConfig& c, const Var& x, const MixerCall& call) const override {
    const AttentionNames& n = names_;
    int64_t B = x.dim(0), T = x.dim(1), d = c.head_size;
    Var q = named(linear(x, q_proj_), n.q_proj), k = named(linear(x, k_proj_), n.k_proj);
    q = named(rope(reshape(q, {B, T, c.n_head, d}), call.pos0, c.rope_base), n.q);
    k = named(rope(reshape(k, {B, T, c.n_kv_head, d}), call.pos0, c.rope_base), n.k);
    Var v = named(reshape(named(linear(x, v_proj_), n.v_proj), {B, T, c.n_kv_head, d}), n.v);
    if (LayerCache* cache = call.cache) {  // prepend the keys and values of earlier tokens
      if (cache->k.defined()) {
        k = concat({Var(cache->k), k}, 1);
        v = concat({Var(cache->v), v}, 1);
      }
      cache->k = k.data();
      cache->v = v.data();
    }
    const double scale = 1.0 / std::sqrt(double(d));
    const DropoutKey weights_drop = call.dropout.key(layer_, DropoutSite::AttentionWeights);
    Var o = c.attention == Fusion::Fused
                ? causal_attention(q, k, v, scale, weights_drop)  // one op, GQA by index
                : attention_composed(q, k, v, scale, weights_drop, n.scores, n.weights);  // op by op
    o = named(o, n.o);  // [B, T, H, d]
    Var out = linear(reshape(o, {B, T, int64_t(c.n_head) * d}), o_proj_);
    return named(out, n.mix);  // its dropout joins the residual sum (LanguageModel::forward)
  }

  // The KV cache starts empty: forward appends to it.
  LayerCache new_cache(const ModelConfig&, int64_t, DType, Device) const override { return {}; }

 private:
  int layer_;
  AttentionNames names_;
  Var q_proj_, k_proj_, v_proj_, o_proj_;  // [C, C], [kv, C], [kv, C], [C, C]; kv = n_kv_head · d
};

}  // namespace

std::unique_ptr<Mixer> make_attention(const MixerRow&, Initialiser& init, const ModelConfig& c, int layer) {
  return std::make_unique<AttentionMixer>(init, c, layer);
}

}  // namespace lina
