// Causal softmax attention op by op, the reference the fused op
// (causal_attention) is tested against. The mixer itself is models/attention.cpp's.
#pragma once
#include "autograd/functions.h"

namespace lina {

// q [B, T, H, d], k and v [B, Tk, Hkv, d] -> [B, T, H, d]: permute, repeat
// each KV head for its query heads, q kᵀ, scale, causal softmax, · v. With
// `scores_name` / `weights_name`, those tensors carry the names (the graph,
// the trace). With dropout (p > 0), the weights are dropped before the
// product with v.
Var attention_composed(const Var& q, const Var& k, const Var& v, double scale, const DropoutKey& drop = {},
                       const char* scores_name = nullptr, const char* weights_name = nullptr);

}  // namespace lina
