// A training checkpoint: the model's parameters under their docs/spec.md §1.4
// names, AdamW's moments as "optim.m.<name>" / "optim.v.<name>", and in
// __metadata__ the model config, the task, the number of updates done, the
// data generator's state, the vocabulary and the history so far.
#pragma once
#include <array>
#include <string>

#include "core/safetensors.h"
#include "models/model.h"
#include "models/optim.h"
#include <nlohmann/json.hpp>

namespace lina {

struct CheckpointInfo {
  std::string preset, task;
  int vocab = 0;
  std::string vocab_chars;  // lm: the characters of the vocabulary, in id order
  int64_t updates = 0;      // updates done (the metadata's "step")
  std::array<uint64_t, 4> rng_state{};
  nlohmann::json options;   // the TrainOptions of the run that wrote it
  nlohmann::json history;   // loss curve etc. so far
};

void save_checkpoint(const std::string& path, const LanguageModel& model, const AdamW* optimizer,
                     const CheckpointInfo& info);

// Loading is two calls on a parsed file (core/safetensors.h), the same for
// `eval`, `sample`, `train --resume` and the fuzz test:
//   SafetensorsFile f = load_safetensors(path);
//   CheckpointInfo info = checkpoint_info(f);      // validated metadata
//   LanguageModel model(make_config(info.preset, info.vocab), ...);
//   load_checkpoint(f, model, &optimizer);         // tensors, checked by name/shape/dtype
// Any defect throws one lina::Error naming the file; content of the file is
// quoted only through printable().
CheckpointInfo checkpoint_info(const SafetensorsFile& file);
void load_checkpoint(const SafetensorsFile& file, LanguageModel& model, AdamW* optimizer);

// The largest vocabulary a checkpoint may declare (the model is built from
// it before its tensors are read).
constexpr int kMaxCheckpointVocab = 1 << 16;

// Writes j to path.tmp, then renames it to path: a failed write never
// replaces a good file.
void write_json_atomically(const std::string& path, const nlohmann::json& j);

}  // namespace lina
