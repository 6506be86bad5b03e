// The options of `lina train`: what they are, which values make sense, the
// file name a run gets, and how a resumed run takes its checkpoint's options.
#pragma once
#include <string>
#include <vector>

#include "core/dtype.h"
#include "models/config.h"

namespace lina {

struct CheckpointInfo;

struct TrainOptions {
  std::string preset = "gdn";
  std::string task = "recall";  // "lm" or "recall"
  Device device = Device::Cpu;
  int steps = -1;      // updates; −1: the task's default (lm 5000, recall 6000)
  int batch = -1;      // sequences per batch; −1: the task's default (lm 64, recall 128)
  int context = 64;    // lm only (recall sequences are 4·pairs − 1 tokens)
  int pairs = 32;      // recall: key–value pairs per sequence
  int keys = 64;       // recall: distinct key tokens
  int values = 64;     // recall: distinct value tokens
  int scan_chunk = ModelConfig{}.scan_chunk;  // tokens per chunk of the chunked scan
  // The enums below are parsed once, from the command line (experiments/main.cpp).
  ScanForm scan_form = ScanForm::Chunked;     // the recurrence in training (or token by token)
  FeatureMap feature_map = FeatureMap::Elu1;  // linear layers' feature map
  Fusion attention = Fusion::Fused;           // attention layers: one op, or op by op
  Fusion conv = Fusion::Fused;                // recurrent layers' conv + SiLU: one op, or op by op
  // On cuda: each update captured once as a CUDA graph and replayed (else
  // launched kernel by kernel; the same bits). Not part of a checkpoint.
  bool cuda_graph = true;
  // On cuda: matrix products in TF32 (faster, about 1e-3 relative; off: float32).
  bool tf32 = false;
  // The recipe (docs/spec.md §2.3): the course's values by default; each a
  // flag so that one run can change one thing.
  double lr = 1e-3;    // constant; with the cosine schedule the peak, ending at lr / 10
  std::string schedule = "constant";  // "constant" or "cosine" (warm-up, then down to lr / 10)
  int warmup = 0;      // cosine: linear warm-up updates
  double clip = 0;     // global gradient-norm clipping; 0: none
  double weight_decay = 0.01;  // AdamW's decoupled decay
  bool decay_matrices = false; // decay only parameters of two or more dimensions (else every one)
  double beta2 = 0.999;        // AdamW's second-moment decay (β1 is 0.9)
  double dropout = -1;         // −1: the task's default (lm 0.1, recall 0)
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
  int fresh_batches = 50;  // recall: the course's loss estimate at each evaluation, on fresh batches
  int probe_batches = 20;  // recall: batches per number of pairs of the capacity probe
  int extrap_batches = 40; // lm: batches per context length of the extrapolation eval
  std::vector<int> extrap_contexts = {64, 128, 256, 512};
  bool quiet = false;      // no progress line
  bool trace = false;      // print every op of the first update (autograd/trace.h)
  std::string save_batches;  // write every update's batch here (json lines), for comparisons
  // Names of the options given on the command line ("--batch", ...). On
  // --resume the checkpoint's run options apply; a given one that differs
  // from the checkpoint's is an error.
  std::vector<std::string> given;
};

// The range of a numeric `lina train` flag ("--batch": 1..4096): below it is
// meaningless, above it absurd for these models on one machine. The command
// line (main.cpp) and the options a checkpoint carries (on --resume) both
// pass it. Throws for a flag without one.
struct OptionRange {
  double lo, hi;
};
OptionRange train_option_range(const std::string& flag);
// "lo..hi", as the errors of both say it.
std::string range_text(const OptionRange& range);

// Throws lina::Error (one line) for impossible options; fills in the task's
// defaults (steps, evaluation) where an option was not given.
void validate(TrainOptions& options);

// lina's name for the run: <task>_<preset>[-<feature map>][_p<pairs>][_k<keys>][_v<values>][_s<seed>]
// then the recipe flags that differ from the course's ([_drop<p>][_cosine][_clip<x>][_wd<decay>]
// [_decaymat][_b2-<β2>]): the non-default parts only, so an ablation sits beside the run it varies.
std::string run_name(const TrainOptions& options);

// The course's dropout for a task: lm 0.1, recall 0.
double default_dropout(const std::string& task);

// Where a run writes: <out>/<device>/<run_name>.json / .safetensors.
// A resumed run given no --out goes on in its checkpoint's own files: CKPT
// and CKPT with the extension .json.
std::string run_path(const TrainOptions& options, const std::string& extension);

// On --resume: the checkpoint's run options apply; a flag given on the
// command line must agree with them (a one-line error names both values),
// except the ones that only say where or how often to write. --extend-to
// sets the steps and may set a new peak --lr.
void adopt_checkpoint_options(TrainOptions& options, const CheckpointInfo& info, const std::string& path);

}  // namespace lina
