// The training loop behind `lina train`: one preset on one task, AdamW with
// warm-up + cosine, gradient clipping, periodic evaluation, a live progress
// line, checkpoints that resume to the bit, and the run's json (docs/spec.md §3).
#pragma once
#include <atomic>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "models/config.h"

namespace lina {

struct TrainOptions {
  std::string preset = "gdn";
  std::string task = "recall";  // "lm" or "recall"
  Device device = Device::cpu;
  int steps = -1;      // updates; −1: the task's default (lm 5000, recall 2000)
  int batch = 64;
  int context = 64;    // lm only (recall sequences are 4·pairs − 1 tokens)
  int pairs = 32;      // recall: key–value pairs per sequence
  int keys = 64;       // recall: distinct key tokens (values are always 16)
  int scan_chunk = ModelConfig{}.scan_chunk;  // tokens per chunk of the chunked scan
  std::string scan_form = "chunked";  // the recurrence in training: "chunked" or "sequential" (token by token)
  std::string feature_map = "elu1";   // linear layers: "elu1", "relu" or "sigmoid"
  std::string attention = "fused";    // attention layers: "fused" (one op) or "composed" (op by op)
  std::string conv = "fused";         // recurrent layers' conv + SiLU: "fused" (one op) or "composed"
  double lr = 1e-3;    // peak; the cosine ends at lr / 10 (1e-4 at the default)
  int warmup = 100;
  double clip = 1.0;
  uint64_t seed = 1337;
  std::string data = "data/tinyshakespeare.txt";
  std::string out = "runs";
  std::string resume;  // checkpoint to continue from (its options apply)
  int extend_to = -1;  // with resume: train on to this many updates in all, with a
                       // fresh warm-up and cosine over the added updates; −1: no
  int stop_at = -1;    // stop (as if interrupted) after this many updates; −1: never
  int checkpoint_every = -1;  // updates between checkpoints (+ json); −1: every evaluation
  int eval_every = -1;     // −1: lm 500, recall 100
  int eval_batches = -1;   // −1: lm 200, recall 8 (of `batch` sequences each)
  int extrap_batches = 40; // lm: batches per context length of the extrapolation eval
  std::vector<int> extrap_contexts = {64, 128, 256, 512};
  bool quiet = false;      // no progress line
  bool trace = false;      // print every op of the first update (autograd/trace.h)
  // Names of the options given on the command line ("--batch", ...). On
  // --resume the checkpoint's run options apply; a given one that differs
  // from the checkpoint's is an error.
  std::vector<std::string> given;
};

struct TrainResult {
  std::string json_path, checkpoint_path;
  bool interrupted = false;  // stopped early (a signal or --stop-at); checkpoint and json written
  int steps_done = 0;
};

// Throws lina::Error (one line) for impossible options.
void validate(TrainOptions& options);

// Runs the training. Checks `stop_signal` every step and between evaluation
// batches (a signal handler sets it to the signal's number): when it is not
// 0 the run stops after writing its checkpoint and json, with
// "interrupted": true.
//
// A diverged run (a loss or gradient that is not finite) throws one
// lina::Error naming the step, the last good checkpoint (left as it was)
// and the command that resumes it with a lower learning rate; the json
// records "diverged".
TrainResult train(TrainOptions options, const std::atomic<int>* stop_signal = nullptr);

// Where a run writes: <out>/<device>/<task>_<preset>.json / .safetensors.
// A resumed run given no --out goes on in its checkpoint's own files: CKPT
// and CKPT with the extension .json.
std::string run_path(const TrainOptions& options, const std::string& extension);

}  // namespace lina
