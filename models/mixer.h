// A token mixer: what a block runs before its MLP to let each token read
// earlier ones. Softmax attention (models/attention.cpp) keeps every key and
// value; the recurrent mixers (models/recurrent.cpp) keep one d×d state per
// head. Every mixer is one row of the registry (models/mixer_registry.cpp),
// from which the presets, the CLI's help and `lina state-size` are made.
//
//   const MixerRow& row = *mixer_named("gdn");
//   std::unique_ptr<Mixer> m = row.make(row, init, config, /*layer=*/0);  // registers blocks.0.mix.*
//   Var y = m->forward(config, x, call);                                  // x, y [B, T, C]
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "models/config.h"
#include "models/model.h"

namespace lina {

struct Initialiser;

// What a mixer's forward is given besides its input.
struct MixerCall {
  int64_t pos0 = 0;             // position of the first token (RoPE; 0 when training)
  LayerCache* cache = nullptr;  // step-by-step inference: the layer's cache, updated; null when training
  Dropout dropout;             // off (p = 0) unless training
  // When not null and the mixer learns a decay: the mean α of each head
  // (over tokens, and key channels for a per-channel decay), for `lina
  // train`'s report. A diagnostic: it changes nothing in the forward.
  std::vector<double>* decay_mean = nullptr;
};

class Mixer {
 public:
  virtual ~Mixer() = default;
  // x [B, T, C] -> [B, T, C], before the residual sum (which drops it out).
  virtual Var forward(const ModelConfig& c, const Var& x, const MixerCall& call) const = 0;
  // An empty cache for step-by-step inference of `batch` sequences.
  virtual LayerCache new_cache(const ModelConfig& c, int64_t batch, DType dtype, Device device) const = 0;
};

// One row of the registry: a mixer's name, what it is, and how it is made.
struct MixerRow {
  const char* name;  // "attn", "gdn": the preset of four such layers, and a word of a layer pattern
  bool survey;       // docs/spec.md §1.2b's three, beside the course's own (§1)
  bool recurrent;    // keeps a d×d state per head (and its conv's last inputs), not a KV cache
  ScanRule rule;     // recurrent mixers: the write rule (core/kernel_args.h); attention: unused
  // Registers the mixer of block `layer` and its parameters
  // ("blocks.{layer}.mix.*") in the course's order (docs/spec.md §1.4),
  // initialised from `init`'s generator.
  std::unique_ptr<Mixer> (*make)(const MixerRow& row, Initialiser& init, const ModelConfig& c, int layer);
  const char* summary;  // what it is, in one line
  bool learns_decay() const { return recurrent && lina::learns_decay(rule); }
};

// Every mixer, in the order the presets list them.
const std::vector<MixerRow>& mixer_rows();
// The row named `name`, or null.
const MixerRow* mixer_named(const std::string& name);

// The makers the registry's rows name (models/attention.cpp, models/recurrent.cpp).
std::unique_ptr<Mixer> make_attention(const MixerRow& row, Initialiser& init, const ModelConfig& c, int layer);
std::unique_ptr<Mixer> make_recurrent(const MixerRow& row, Initialiser& init, const ModelConfig& c, int layer);

// y = x Wᵀ for a weight W [out, in] (the [out, in] convention of docs/spec.md §1.4).
inline Var linear(const Var& x, const Var& weight) { return matmul(x, weight, false, true); }

}  // namespace lina
