// Model configuration and the presets (docs/spec.md §1, §1.2b). A preset is a layer
// pattern: a mixer's name ("gdn") means four such layers, a named pattern
// ("hybrid") stands for its layers ("gdn,gdn,gdn,attn"), and any
// comma-separated pattern of mixer names is accepted as is. The mixers and
// the named patterns are the registry's (models/mixer_registry.cpp).
#pragma once
#include <string>
#include <vector>

#include "autograd/functions.h"

namespace lina {

struct MixerRow;  // a token mixer's row of the registry (models/mixer.h)

// The feature map of q and k in linear attention (docs/spec.md §1.2b): elu(x) + 1,
// relu(x) + 1e-5 or sigmoid(x) + 1e-5.
enum class FeatureMap { Elu1, Relu, Sigmoid };
const char* feature_map_name(FeatureMap f);  // "elu1", "relu", "sigmoid"
// Throws a one-line lina::Error for an unknown name.
FeatureMap parse_feature_map(const std::string& name);

// An op as one fused op, or as the composition of simpler ops a learner can
// step through (--attention, --conv): the same maths either way.
enum class Fusion { Fused, Composed };
const char* fusion_name(Fusion f);  // "fused", "composed"
// Throws "unknown <flag> 'x': use fused or composed".
Fusion parse_fusion(const std::string& name, const std::string& flag);

const char* scan_form_name(ScanForm f);  // "sequential", "chunked"
// Throws "unknown --scan-form 'x': use chunked or sequential".
ScanForm parse_scan_form(const std::string& name);

// The dropout sites of one layer (docs/spec.md §1 "dropout"): each gets its
// own stream of masks, site = 4 · layer + where (core/philox.h DropoutKey).
enum class DropoutSite { AttentionWeights = 0, MixerOutput = 1, FfnOutput = 2 };
// Dropout while training: probability p, the run's seed and the update.
// p = 0 (the default, and always at evaluation): no dropout.
struct Dropout {
  double p = 0.0;
  uint64_t seed = 0;
  int64_t update = 0;
  const int32_t* update_on_device = nullptr;  // when set, the update number is read there (core/philox.h)
  DropoutKey key(int layer, DropoutSite where) const {
    return {p, seed, uint32_t(update), uint32_t(4 * layer + int(where)), update_on_device};
  }
};

struct ModelConfig {
  std::string preset = "gdn";  // the name given by the user (preset or pattern)
  std::vector<const MixerRow*> layers;  // each layer's mixer (rows of the registry)
  int vocab = 65;
  int n_embd = 128;
  int n_head = 4;
  int head_size = 32;
  int n_kv_head = 2;     // attention layers only (grouped-query attention)
  int mlp_hidden = 344;  // SwiGLU: (int(8 · 128 / 3) + 7) // 8 · 8
  int conv_kernel = 4;   // recurrent layers' short causal conv
  double norm_eps = 1e-6;
  double rope_base = 10000.0;
  ScanForm scan_form = ScanForm::Chunked;  // the training form of the recurrence
  int scan_chunk = kDefaultScanChunk;  // tokens per chunk of the chunked form (core/kernel_args.h)
  FeatureMap feature_map = FeatureMap::Elu1;  // linear layers only
  // Attention as one fused op (causal_attention), or as the composition of
  // permute / expand / matmul / softmax ops a learner can step through.
  Fusion attention = Fusion::Fused;
  // Recurrent layers' conv + SiLU as one op (causal_conv1d_silu over the
  // 3C channels of [q | k | v], which keeps no pre-activation for the
  // backward), or as causal_conv1d, silu; likewise o_norm and the output
  // gate (rms_norm_gated, or rms_norm then swiglu).
  Fusion conv = Fusion::Fused;

  int n_layer() const { return int(layers.size()); }
  int attention_layers() const;
  int recurrent_layers() const;
  bool has_mixer(const std::string& name) const;  // some layer is a `name` mixer
  bool learns_decay() const;                      // some layer learns its decay (MixerRow::learns_decay)
  std::vector<std::string> layer_names() const;   // each layer's mixer, "gdn", "attn", ...
  // docs/spec.md §1.3 memory accounting (numbers of floats).
  long long kv_per_token() const;  // 2 · n_kv_head · head_size · attention layers
  long long state_const() const;   // n_head · head_size² · recurrent layers
  long long conv_cache() const;    // (conv_kernel − 1) · 3 · n_embd · recurrent layers
};

// A preset (all_preset_names()) or a pattern such as "gdn,gdn,gdn,attn" or
// "delta,delta,attn". Throws a one-line lina::Error for anything else.
constexpr int kMaxLayers = 64;  // in a layer pattern
ModelConfig make_config(const std::string& preset, int vocab);

// The presets, from the registry (models/mixer_registry.cpp):
std::vector<std::string> preset_names();         // the course's five (docs/spec.md §1)
std::vector<std::string> survey_preset_names();  // the survey's three (docs/spec.md §1.2b)
std::vector<std::string> all_preset_names();     // both
// The layers a named pattern stands for ("hybrid" -> "gdn,gdn,gdn,attn"), or "".
std::string named_pattern(const std::string& preset);
// Every mixer and named pattern with its one-line summary, for --help.
std::string preset_help();
// Every preset joined by `separator` ("attn, linear, ..."), for --help and errors.
std::string preset_list(const std::string& separator);

}  // namespace lina
