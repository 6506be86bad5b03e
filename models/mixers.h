// The two token mixers (docs/spec.md §1.1, §1.2) and the MLP (SwiGLU), as plain
// structs of parameter handles with a forward function each.
#pragma once
#include "models/config.h"
#include "models/model.h"

namespace lina {

// The names of one layer's intermediate tensors, "blocks.{i}.mix.q" and so
// on (the prefixes of the parameter names, docs/spec.md §1.4), shown by the
// graph, the trace and the debugger. Interned once when the model is built,
// so naming a tensor in every forward is one pointer store (named(), var.h).
struct LayerNames {
  explicit LayerNames(int layer);
  const char* n1;                         // n1(x), the mixer's input
  const char* q_proj, *k_proj, *v_proj;   // attention: x W_qᵀ, x W_kᵀ, x W_vᵀ
  const char* qkv_proj, *qkv_conv;        // recurrent: x [W_q; W_k; W_v]ᵀ and SiLU(conv(...)) of it
  const char* q, *k, *v;                  // what the scan (or softmax attention) reads
  const char* b_proj, *beta;              // recurrent: x W_bᵀ + b_b and β = σ(...)
  const char* a_proj, *log_alpha;         // gdn: x W_aᵀ + b_a and log α = log σ(...)
  const char* qkv;                        // recurrent, fused: q, k, v as planes [3, B, T, H, d]
  const char* beta_log_alpha;             // recurrent, fused: β then log α, from one product
  const char* scores, *weights;           // attention: q kᵀ/√d and softmax(scores)
  const char* o;                          // the read-out: o_t = S_t q_t, or weights · v
  const char* o_norm;                     // recurrent: per-head RMSNorm of o
  const char* g_proj, *gated;             // recurrent: x W_gᵀ, silu(x W_gᵀ) ⊙ o_norm(o)
  const char* mix;                        // the mixer's output, (...) W_oᵀ
  const char* residual;                   // x + dropout(mix)
  const char* n2;                         // n2(x), the MLP's input
  const char* ffn_hidden, *ffn;           // silu(x W_gateᵀ) ⊙ x W_upᵀ, the MLP's output
  const char* out;                        // the block's output, x + dropout(ffn)
};

// y = x Wᵀ for a weight W [out, in] (the [out, in] convention of docs/spec.md §1.4).
inline Var linear(const Var& x, const Var& weight) { return matmul(x, weight, false, true); }

// SwiGLU: down(silu(x W_gateᵀ) ⊙ x W_upᵀ) (dropped out in the residual sum).
struct Mlp {
  Var gate, up, down;  // [hidden, n_embd], [hidden, n_embd], [n_embd, hidden]
  Var forward(const Var& x, const LayerNames& n) const {
    // one product with [W_gate; W_up] (neighbours in the parameter buffer, so a
    // view: stacked_rows), [B, T, 2·hidden], then silu(x W_gateᵀ) ⊙ x W_upᵀ of its halves
    Var hidden = named(swiglu(linear(x, stacked_rows({gate, up}))), n.ffn_hidden);
    return named(linear(hidden, down), n.ffn);
  }
};

// Causal attention op by op (models/attention.cpp): q [B, T, H, d], k and v
// [B, Tk, Hkv, d] -> [B, T, H, d]; what causal_attention computes in one op.
// With `names`, its scores and weights are named after the layer.
// With dropout (p > 0), the weights are dropped before the product with v.
Var attention_composed(const Var& q, const Var& k, const Var& v, double scale,
                       const LayerNames* names = nullptr, const DropoutKey& drop = {});

struct AttentionMixer {
  Var q_proj, k_proj, v_proj, o_proj;  // [C, C], [kv, C], [kv, C], [C, C]; kv = n_kv_head · d
  // x [B, T, C] -> [B, T, C]; with a cache, attends to the cached keys too.
  Var forward(const ModelConfig& c, const Var& x, const LayerNames& n, int64_t pos0,
              LayerCache* cache, const Dropout& drop, int layer) const;
};

struct RecurrentMixer {
  MixerKind kind = MixerKind::Gdn;
  Var q_proj, k_proj, v_proj, o_proj;  // [C, C] each
  Var conv;                    // [3C, 1, K]: the depthwise conv of [q | k | v], channel by channel
  Var b_proj_w, b_proj_b;      // delta, gdn: [H, C], [H]
  Var a_proj_w, a_proj_b;      // gdn, mamba2: [H, C], [H]; gla: [H·d, C], [H·d]
  Var g_proj;                  // [C, C]: the output gate silu(x W_gᵀ)
  Var o_norm;                  // [head_size], shared by the heads
  // x [B, T, C] -> [B, T, C]; with a cache, continues from its state.
  // alpha_mean: the mean decay of each head (over channels for gla).
  Var forward(const ModelConfig& c, const Var& x, const LayerNames& n, LayerCache* cache,
              std::vector<double>* alpha_mean) const;
};

struct Block {
  explicit Block(int i) : layer(i), names(i) {}
  int layer;
  MixerKind kind = MixerKind::Gdn;
  LayerNames names;
  Var n1, n2;  // the RMSNorm weights before the mixer and before the MLP
  AttentionMixer attn;
  RecurrentMixer rec;
  Mlp mlp;
};

}  // namespace lina
