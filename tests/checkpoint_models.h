// For the checkpoint fuzzers (tests/test_checkpoint_fuzz.cpp and
// tests/fuzz/fuzz_checkpoint.cpp): loads a parsed file the way `eval`,
// `sample` and `train --resume` do (checkpoint_info, then load_checkpoint with
// the AdamW moments), into a model built once per (preset, vocabulary) that
// a valid header names, so thousands of files cost no model construction.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "core/safetensors.h"
#include "experiments/checkpoint.h"

namespace lina::test {

class CheckpointModels {
 public:
  // Throws lina::Error for a file that is not a checkpoint of a lina model.
  LanguageModel& load(const SafetensorsFile& file) {
    CheckpointInfo info = checkpoint_info(file);
    Entry& e = models_[{info.preset, info.vocab}];
    if (!e.model) {
      e.model = std::make_unique<LanguageModel>(make_config(info.preset, info.vocab), 1);
      e.optimizer = std::make_unique<AdamW>(e.model->params());
    }
    load_checkpoint(file, *e.model, e.optimizer.get());
    return *e.model;
  }

 private:
  struct Entry {
    std::unique_ptr<LanguageModel> model;
    std::unique_ptr<AdamW> optimizer;
  };
  std::map<std::pair<std::string, int>, Entry> models_;
};

}  // namespace lina::test
