#include "experiments/train_options.h"

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <filesystem>
#include <optional>

#include "core/device_memory.h"
#include "core/error.h"
#include "experiments/checkpoint.h"
#include "experiments/data.h"
#include "experiments/option_json.h"

namespace lina {

using nlohmann::json;

// ---- the ranges of the numeric flags --------------------------------------------------

namespace {

constexpr double kMaxSteps = 1e7, kMaxBatch = 4096, kMaxContext = 65536, kMaxBatches = 1e5;

// flag, its key in a checkpoint's options, its range
struct NamedRange {
  const char* flag;
  const char* key;
  OptionRange range;
};
constexpr NamedRange kRanges[] = {
    {"--steps", "steps", {1, kMaxSteps}},
    {"--batch", "batch", {1, kMaxBatch}},
    {"--context", "context", {1, kMaxContext}},
    {"--pairs", "pairs", {1, 4096}},
    {"--keys", "keys", {1, 65536}},
    {"--values", "values", {1, 65536}},
    {"--scan-chunk", "scan_chunk", {1, 4096}},
    {"--lr", "lr", {1e-12, 1e6}},
    {"--warmup", "warmup", {0, kMaxSteps}},
    {"--clip", "clip", {0, 1e6}},
    {"--weight-decay", "weight_decay", {0, 1e3}},
    {"--beta2", "beta2", {1e-6, 0.999999}},
    {"--dropout", "dropout", {0, 0.99}},
    {"--extend-to", "", {1, kMaxSteps}},
    {"--checkpoint-every", "checkpoint_every", {1, kMaxSteps}},
    {"--stop-at", "", {0, kMaxSteps}},
    {"--eval-every", "eval_every", {1, kMaxSteps}},
    {"--eval-batches", "eval_batches", {1, kMaxBatches}},
    {"--fresh-batches", "fresh_batches", {1, kMaxBatches}},
    {"--probe-batches", "probe_batches", {1, kMaxBatches}},
    {"--extrap-batches", "extrap_batches", {0, kMaxBatches}},
};

std::string shown(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", x);
  return buf;
}

}  // namespace

std::string range_text(const OptionRange& range) { return shown(range.lo) + ".." + shown(range.hi); }

namespace {

// A checkpoint's options pass the command line's ranges: a crafted or
// damaged checkpoint cannot ask for a batch of 10^9.
void check_checkpoint_ranges(const json& saved, const std::string& path) {
  for (const NamedRange& r : kRanges) {
    if (!*r.key || !saved.contains(r.key)) continue;
    const json& v = saved[r.key];
    check(v.is_number(), "checkpoint " + path + ": option " + r.key + " is not a number");
    const double x = v.get<double>();
    check(x >= r.range.lo && x <= r.range.hi, "checkpoint " + path + ": option " + r.key + " (" + r.flag +
                                                  ") must be in " + range_text(r.range) +
                                                  ", got " + shown(x));
  }
}

}  // namespace

OptionRange train_option_range(const std::string& flag) {
  for (const NamedRange& r : kRanges)
    if (flag == r.flag) return r.range;
  throw Error("no range for " + flag);
}

namespace fs = std::filesystem;

static bool was_given(const TrainOptions& o, const char* flag) {
  return std::find(o.given.begin(), o.given.end(), flag) != o.given.end();
}

// "%g" of a number, for a run's name.
static std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

std::string run_name(const TrainOptions& o) {
  const TrainOptions course;  // the course's recipe
  std::string name = o.task + "_" + o.preset;
  if (o.feature_map != FeatureMap::Elu1) name += std::string("-") + feature_map_name(o.feature_map);
  if (o.task == "recall" && o.pairs != RecallTask::kDefaultPairs) name += "_p" + std::to_string(o.pairs);
  if (o.task == "recall" && o.keys != RecallTask::kDefaultKeys) name += "_k" + std::to_string(o.keys);
  if (o.task == "recall" && o.values != RecallTask::kDefaultValues) name += "_v" + std::to_string(o.values);
  if (o.seed != course.seed) name += "_s" + std::to_string(o.seed);  // runs of other seeds sit side by side
  if (o.dropout >= 0 && o.dropout != default_dropout(o.task)) name += "_drop" + number(o.dropout);
  if (o.schedule != course.schedule) name += "_" + o.schedule;
  if (o.clip != course.clip) name += "_clip" + number(o.clip);
  if (o.weight_decay != course.weight_decay) name += "_wd" + number(o.weight_decay);
  if (o.decay_matrices) name += "_decaymat";
  if (o.beta2 != course.beta2) name += "_b2-" + number(o.beta2);
  return name;
}

double default_dropout(const std::string& task) { return task == "lm" ? 0.1 : 0.0; }

std::string run_path(const TrainOptions& o, const std::string& extension) {
  if (!o.resume.empty() && !was_given(o, "--out"))
    return fs::path(o.resume).replace_extension(extension).string();
  return o.out + "/" + device_name(o.device) + "/" + run_name(o) + extension;
}

void validate(TrainOptions& o) {
  check(o.task == "lm" || o.task == "recall", "unknown task '" + o.task + "': use lm or recall");
  make_config(o.preset, 1);  // throws for an unknown preset
  // −1 means "the task's default" only when --steps was not given (the
  // command line refuses a given value below 1 before this).
  const bool lm = o.task == "lm";
  if (o.steps == -1 && !was_given(o, "--steps")) o.steps = lm ? 5000 : 6000;
  if (o.batch == -1 && !was_given(o, "--batch")) o.batch = lm ? 64 : 128;
  if (o.dropout < 0 && !was_given(o, "--dropout")) o.dropout = default_dropout(o.task);
  check(o.steps > 0, "--steps must be positive, got " + std::to_string(o.steps));
  check(o.batch > 0, "--batch must be positive, got " + std::to_string(o.batch));
  check(o.context > 0, "--context must be positive, got " + std::to_string(o.context));
  check(o.scan_chunk > 0, "--scan-chunk must be positive, got " + std::to_string(o.scan_chunk));
  check(!o.tf32 || o.device == Device::Cuda, "--tf32 is for --device cuda (the CPU multiplies in float32)");
  check(o.feature_map == FeatureMap::Elu1 || make_config(o.preset, 1).has_mixer("linear"),
        "--feature-map is for linear attention layers; preset '" + o.preset + "' has none");
  check(o.task == "recall" || (!was_given(o, "--pairs") && !was_given(o, "--keys") && !was_given(o, "--values")),
        "--pairs, --keys and --values are for --task recall");
  check(o.task == "recall" || (!was_given(o, "--fresh-batches") && !was_given(o, "--probe-batches")),
        "--fresh-batches and --probe-batches are for --task recall");
  check(o.task == "lm" || (!was_given(o, "--context") && !was_given(o, "--data")),
        "--context and --data are for --task lm (a recall sequence's length follows from --pairs)");
  check(!o.out.empty(), "--out must name a folder (it is empty)");
  if (o.task == "recall") (void)RecallTask(o.pairs, o.keys, o.values);  // throws for impossible sizes
  check(o.lr > 0 && std::isfinite(o.lr), "--lr must be a positive number");
  check(o.schedule == "constant" || o.schedule == "cosine",
        "unknown --schedule '" + o.schedule.substr(0, 40) + "': use constant or cosine");
  check(o.warmup >= 0, "--warmup must not be negative");
  check(o.schedule == "cosine" || o.warmup == 0, "--warmup is for --schedule cosine");
  check(o.clip >= 0 && std::isfinite(o.clip), "--clip must be a number >= 0 (0: no clipping)");
  check(o.weight_decay >= 0 && std::isfinite(o.weight_decay), "--weight-decay must not be negative");
  check(o.beta2 > 0 && o.beta2 < 1, "--beta2 must be in (0, 1)");
  check(o.dropout >= 0 && o.dropout < 1, "--dropout must be in [0, 1)");
  if (o.eval_every <= 0) o.eval_every = 500;
  if (o.eval_batches <= 0) o.eval_batches = lm ? 200 : 8;
  if (o.checkpoint_every <= 0) o.checkpoint_every = o.eval_every;
  require_device(o.device);  // core/device_memory.h: "CUDA was requested but no CUDA GPU is available"
}

// ---- options on --resume --------------------------------------------------------------

void adopt_checkpoint_options(TrainOptions& o, const CheckpointInfo& info, const std::string& path) {
  const json& saved = info.options;
  check_checkpoint_ranges(saved, path);
  auto must_agree = [&](const char* flag, const std::string& given, const std::string& saved_value) {
    check(!was_given(o, flag) || given == saved_value,
          std::string(flag) + " " + given + " differs from the " + saved_value + " of checkpoint " + path);
  };
  must_agree("--preset", o.preset, info.preset);
  must_agree("--task", o.task, info.task);
  o.preset = info.preset;
  o.task = info.task;
  // A value as the user typed it: strings without json's quotes.
  auto shown = [](const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); };
  // The checkpoint's value applies; a flag given must agree with it. An
  // option older checkpoints did not record takes `before`, the value every
  // run had then (none: the option is left as it is).
  auto adopt = [&](const char* flag, const char* key, auto& value,
                   std::optional<std::decay_t<decltype(value)>> before = std::nullopt) {
    using V = std::decay_t<decltype(value)>;
    if (!saved.contains(key) && !before) return;
    V from_ckpt = saved.contains(key) ? saved[key].get<V>() : *before;
    check(!was_given(o, flag) || value == from_ckpt, std::string(flag) + " " + shown(json(value)) +
                                                         " differs from the " + shown(json(from_ckpt)) +
                                                         " of checkpoint " + path);
    value = from_ckpt;
  };
  auto adopt_unless_given = [&](const char* flag, const char* key, auto& value) {
    using V = std::decay_t<decltype(value)>;
    if (saved.contains(key) && !was_given(o, flag)) value = saved[key].get<V>();
  };
  if (o.extend_to >= 0) {
    check(!was_given(o, "--steps"), "--extend-to sets the number of updates; drop --steps");
    check(o.extend_to > info.updates, "--extend-to " + std::to_string(o.extend_to) +
                                       " must be more than the " + std::to_string(info.updates) +
                                       " updates checkpoint " + path + " has done");
    o.steps = o.extend_to;
    adopt_unless_given("--lr", "lr", o.lr);  // the extension's peak
  } else {
    adopt("--steps", "steps", o.steps);
    adopt("--lr", "lr", o.lr);
  }
  adopt("--batch", "batch", o.batch);
  adopt("--context", "context", o.context);
  adopt("--pairs", "pairs", o.pairs);
  adopt("--scan-form", "scan_form", o.scan_form);
  adopt("--scan-chunk", "scan_chunk", o.scan_chunk, 64);         // chunks of 64 before the option
  adopt("--feature-map", "feature_map", o.feature_map, FeatureMap::Elu1);  // elu + 1 before the option
  adopt("--attention", "attention", o.attention);
  adopt("--conv", "conv", o.conv, Fusion::Fused);  // the same maths; one op since the option
  adopt("--keys", "keys", o.keys);
  adopt("--values", "values", o.values);
  // The recipe: a resumed run goes on with its own; a flag that differs is refused.
  adopt("--schedule", "schedule", o.schedule);
  adopt("--warmup", "warmup", o.warmup);
  adopt("--clip", "clip", o.clip);
  adopt("--weight-decay", "weight_decay", o.weight_decay);
  adopt("--decay-matrices", "decay_matrices", o.decay_matrices);
  adopt("--beta2", "beta2", o.beta2);
  adopt("--dropout", "dropout", o.dropout);
  adopt("--seed", "seed", o.seed);
  adopt("--eval-every", "eval_every", o.eval_every);
  adopt("--eval-batches", "eval_batches", o.eval_batches);
  adopt("--fresh-batches", "fresh_batches", o.fresh_batches);
  adopt("--probe-batches", "probe_batches", o.probe_batches);
  adopt_unless_given("--checkpoint-every", "checkpoint_every", o.checkpoint_every);
  adopt_unless_given("--data", "data", o.data);
  if (saved.contains("device") && !was_given(o, "--device"))
    o.device = saved["device"] == "cuda" ? Device::Cuda : Device::Cpu;
}

}  // namespace lina
