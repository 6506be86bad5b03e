// One pre-norm block of the model (docs/spec.md §1): a token mixer
// (models/mixer.h) and the SwiGLU MLP, each after an RMSNorm and each added
// into the residual stream.
#pragma once
#include <memory>
#include <string>

#include "models/mixer.h"

namespace lina {

// The names of the block's own intermediate tensors ("blocks.{i}.n1" and so
// on; the mixer names its own), shown by the graph, the trace and the
// debugger. Interned once when the model is built, so naming a tensor in
// every forward is one pointer store (named(), var.h).
struct BlockNames {
  explicit BlockNames(int layer) {
    const std::string p = "blocks." + std::to_string(layer) + ".";
    auto name = [&](const char* what) { return intern_name(p + what); };
    n1 = name("n1"), residual = name("residual"), n2 = name("n2");
    ffn_hidden = name("ffn.hidden"), ffn = name("ffn"), out = name("out");
  }
  const char* n1;                 // n1(x), the mixer's input
  const char* residual;           // x + dropout(mix)
  const char* n2;                 // n2(x), the MLP's input
  const char *ffn_hidden, *ffn;   // silu(x W_gateᵀ) ⊙ x W_upᵀ, the MLP's output
  const char* out;                // the block's output, x + dropout(ffn)
};

// SwiGLU: down(silu(x W_gateᵀ) ⊙ x W_upᵀ) (dropped out in the residual sum).
struct Mlp {
  Var gate, up, down;  // [hidden, n_embd], [hidden, n_embd], [n_embd, hidden]
  Var forward(const Var& x, const BlockNames& n) const {
    // one product with [W_gate; W_up] (neighbours in the parameter buffer, so a
    // view: stacked_rows), [B, T, 2·hidden], then silu(x W_gateᵀ) ⊙ x W_upᵀ of its halves
    Var hidden = named(swiglu(linear(x, stacked_rows({gate, up}))), n.ffn_hidden);
    return named(linear(hidden, down), n.ffn);
  }
};

struct Block {
  Block(int i, const MixerRow& row, std::unique_ptr<Mixer> m)
      : layer(i), names(i), mixer_row(&row), mixer(std::move(m)) {}
  int layer;
  BlockNames names;
  const MixerRow* mixer_row;     // what the mixer is (its name, whether it learns a decay)
  std::unique_ptr<Mixer> mixer;
  Mlp mlp;
  Var n1, n2;  // the RMSNorm weights before the mixer and before the MLP
};

}  // namespace lina
