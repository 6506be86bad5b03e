// The language model of docs/spec.md §1 (the course's): token embedding, n
// pre-norm blocks (mixer + SwiGLU MLP), a final RMSNorm and an untied head
// with a bias. The mixer of each layer is one of the registry's
// (models/mixer.h): softmax attention or a recurrent mixer. Parameters carry the
// course's names (docs/spec.md §1.4), so a checkpoint loads into its PyTorch model.
//
//   LanguageModel model(make_config("gdn", 65), /*seed=*/1337);
//   Var logits = model.forward(ids);            // ids int32 [B, T] -> [B, T, vocab]
//
// The same forward runs token by token when given an InferenceState: then
// attention layers keep a KV cache and recurrent layers keep only their
// d×d state per head and the last K−1 inputs of their convolutions.
#pragma once
#include <vector>

#include "models/config.h"
#include "models/parameters.h"

namespace lina {

// What one layer carries between calls in step-by-step inference.
struct LayerCache {
  Tensor k, v;  // attention: keys (after RoPE) and values so far, [B, t, n_kv_head, d]
  Tensor state;                   // recurrent: S, [B, n_head, d, d] (value × key)
  Tensor conv;                    // recurrent: last K−1 conv inputs [q | k | v], [B, K−1, 3 n_embd]
};

struct InferenceState {
  std::vector<LayerCache> layers;
  int64_t position = 0;  // tokens consumed so far
  // Floats kept, split as docs/spec.md §1.3 counts them.
  long long kv_floats() const;
  long long state_floats() const;
  long long conv_floats() const;
};

// Per-head mean α of every layer that learns its decay, filled when
// requested by forward().
struct AlphaStats {
  std::vector<int> layer;                  // index of each layer that learns its decay
  std::vector<std::vector<double>> mean;   // [such layer][head]
};

struct Block;

class LanguageModel {
 public:
  LanguageModel(const ModelConfig& config, uint64_t seed, DType dtype = DType::F32,
                Device device = Device::Cpu);
  ~LanguageModel();
  LanguageModel(const LanguageModel&) = delete;
  LanguageModel& operator=(const LanguageModel&) = delete;

  // ids: int32 [B, T] -> logits [B, T, vocab]. With `state`, continues from
  // the state's position and updates it (no graph is needed then: call it
  // under a NoGradGuard). With `alpha`, records mean α per head of every
  // layer that learns its decay.
  Var forward(const Tensor& ids, InferenceState* state = nullptr, AlphaStats* alpha = nullptr);
  // An empty state for a batch of `batch` sequences.
  InferenceState new_state(int64_t batch) const;
  // Dropout for the forwards that follow (training: the run's p, seed and
  // the update about to be made); Dropout{} (p = 0) turns it off, as for
  // evaluation. Off when the model is made.
  void set_dropout(const Dropout& d) { dropout_ = d; }
  const Dropout& dropout() const { return dropout_; }

  const ModelConfig& config() const { return config_; }
  ParameterStore& params() { return params_; }
  const ParameterStore& params() const { return params_; }

 private:
  ModelConfig config_;
  ParameterStore params_;
  Var tok_, norm_f_, lm_head_, lm_head_bias_;
  std::vector<Block> blocks_;
  Dropout dropout_;
};

}  // namespace lina
