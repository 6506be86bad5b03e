// A training checkpoint: the model's parameters under their spec §1.4
// names, AdamW's moments as "optim.m.<name>" / "optim.v.<name>", and in
// __metadata__ the model config, the task, the number of updates done, the
// data generator's state, the vocabulary and the history so far.
#pragma once
#include <array>
#include <string>

#include "models/model.h"
#include "models/optim.h"
#include <nlohmann/json.hpp>

namespace lina {

struct CheckpointInfo {
  std::string preset, task;
  int vocab = 0;
  std::string vocab_chars;  // lm: the characters of the vocabulary, in id order
  int64_t step = 0;         // updates done
  std::array<uint64_t, 4> rng_state{};
  nlohmann::json options;   // the TrainOptions of the run that wrote it
  nlohmann::json history;   // loss curve etc. so far
};

void save_checkpoint(const std::string& path, const LanguageModel& model, const AdamW* optimizer,
                     const CheckpointInfo& info);
// Reads the metadata only (validating the file as a whole).
CheckpointInfo read_checkpoint_info(const std::string& path);
// Loads parameters (and moments, when `optimizer` is given) into a model of
// the checkpoint's preset; throws naming the file on any mismatch.
void load_checkpoint(const std::string& path, LanguageModel& model, AdamW* optimizer);

}  // namespace lina
