// The two token mixers (spec §1.1, §1.2) and the MLP, as plain structs of
// parameter handles with a forward function each.
#pragma once
#include "models/config.h"
#include "models/model.h"

namespace lina {

// y = x Wᵀ for a weight W [out, in] (the [out, in] convention of spec §1.4).
inline Var linear(const Var& x, const Var& weight) { return matmul(x, weight, false, true); }

struct Mlp {
  Var fc, proj;  // [hidden, n_embd], [n_embd, hidden]
  Var forward(const Var& x) const { return linear(gelu(linear(x, fc)), proj); }
};

// Causal attention op by op (models/attention.cpp): q [B, T, H, d], k and v
// [B, Tk, Hkv, d] -> [B, T, H, d]; what causal_attention computes in one op.
Var attention_composed(const Var& q, const Var& k, const Var& v, double scale);

struct AttentionMixer {
  Var wq, wk, wv, wo;
  // x [B, T, C] -> [B, T, C]; with a cache, attends to the cached keys too.
  Var forward(const ModelConfig& c, const Var& x, int64_t pos0, LayerCache* cache) const;
};

struct RecurrentMixer {
  MixerKind kind = MixerKind::GatedDelta;
  Var wq, wk, wv, wo;
  Var conv_q, conv_k, conv_v;  // [C, K]
  Var b_proj_w, b_proj_b;      // delta, gdn: [H, C], [H]
  Var a_proj_w, a_proj_b;      // gdn, mamba2: [H, C], [H]; gla: [H·d, C], [H·d]
  Var o_norm;                  // [head_size], shared by the heads
  // x [B, T, C] -> [B, T, C]; with a cache, continues from its state.
  // alpha_mean: the mean decay of each head (over channels for gla).
  Var forward(const ModelConfig& c, const Var& x, LayerCache* cache,
              std::vector<double>* alpha_mean) const;
};

struct Block {
  MixerKind kind = MixerKind::GatedDelta;
  Var norm1, norm2;
  AttentionMixer attn;
  RecurrentMixer rec;
  Mlp mlp;
};

}  // namespace lina
