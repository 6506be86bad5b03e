// Model configuration and the five presets (spec §1). A preset is a layer
// pattern: "gdn" means four gdn layers, "hybrid" is "gdn,gdn,gdn,attn", and
// any comma-separated pattern of attn/linear/delta/gdn is accepted as is.
#pragma once
#include <string>
#include <vector>

#include "autograd/functions.h"

namespace lina {

enum class MixerKind { Attention, Linear, Delta, GatedDelta };

const char* mixer_name(MixerKind k);  // "attn", "linear", "delta", "gdn"

struct ModelConfig {
  std::string preset = "gdn";  // the name given by the user (preset or pattern)
  std::vector<MixerKind> layers;  // one entry per layer
  int vocab = 65;
  int n_embd = 128;
  int n_head = 4;
  int head_size = 32;
  int n_kv_head = 2;     // attention layers only (grouped-query attention)
  int mlp_hidden = 512;
  int conv_kernel = 4;   // recurrent layers' short causal conv
  double norm_eps = 1e-5;
  double rope_base = 10000.0;
  ScanForm scan_form = ScanForm::Chunked;  // the training form of the recurrence
  int scan_chunk = 64;
  // Attention as one fused op (causal_attention), or as the composition of
  // permute / expand / matmul / softmax ops a learner can step through.
  bool fused_attention = true;

  int n_layer() const { return int(layers.size()); }
  int attention_layers() const;
  int recurrent_layers() const;
  // Spec §1.3 memory accounting (numbers of floats).
  long long kv_per_token() const;  // 2 · n_kv_head · head_size · attention layers
  long long state_const() const;   // n_head · head_size² · recurrent layers
  long long conv_cache() const;    // (conv_kernel − 1) · 3 · n_embd · recurrent layers
};

// "attn" | "linear" | "delta" | "gdn" | "hybrid" | a pattern such as
// "gdn,gdn,gdn,attn". Throws a one-line lina::Error for anything else.
constexpr int kMaxLayers = 64;  // in a layer pattern
ModelConfig make_config(const std::string& preset, int vocab);
std::vector<std::string> preset_names();

}  // namespace lina
