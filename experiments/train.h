// The training loop behind `lina train`: one preset on one task, AdamW with
// warm-up + cosine, gradient clipping, periodic evaluation, a live progress
// line, checkpoints that resume to the bit, and the run's json (docs/spec.md §3).
#pragma once
#include <atomic>
#include <string>
#include <vector>

#include "experiments/train_options.h"

namespace lina {

struct TrainResult {
  std::string json_path, checkpoint_path;
  bool interrupted = false;  // stopped early (a signal or --stop-at); checkpoint and json written
  int updates_done = 0;
};

// Runs the training. Checks `stop_signal` every update and between evaluation
// batches (a signal handler sets it to the signal's number): when it is not
// 0 the run stops after writing its checkpoint and json, with
// "interrupted": true.
//
// A diverged run (a loss, gradient or val loss that is not finite) throws
// one lina::Error naming the update, the last checkpoint with finite losses
// (left as it was; weights that score NaN are never saved)
// and the command that resumes it with a lower learning rate; the json
// records "diverged".
TrainResult train(TrainOptions options, const std::atomic<int>* stop_signal = nullptr);

}  // namespace lina
