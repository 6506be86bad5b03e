#include "experiments/train.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "core/kernels.h"
#include "experiments/checkpoint.h"
#include "experiments/data.h"
#include "experiments/progress.h"
#include "models/optim.h"

#ifndef LINA_GIT_COMMIT
#define LINA_GIT_COMMIT "unknown"
#endif

namespace lina {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

static double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string run_path(const TrainOptions& o, const std::string& extension) {
  return o.out + "/" + device_name(o.device) + "/" + o.task + "_" + o.preset + extension;
}

void validate(TrainOptions& o) {
  check(o.task == "lm" || o.task == "recall", "unknown task '" + o.task + "': use lm or recall");
  make_config(o.preset, 1);  // throws for an unknown preset
  if (o.steps < 0 && o.steps != -1) o.steps = 0;
  if (o.steps == -1) o.steps = o.task == "lm" ? 5000 : 2000;
  check(o.steps > 0, "--steps must be positive, got " + std::to_string(o.steps));
  check(o.batch > 0, "--batch must be positive, got " + std::to_string(o.batch));
  check(o.context > 0, "--context must be positive, got " + std::to_string(o.context));
  check(o.lr > 0 && std::isfinite(o.lr), "--lr must be a positive number");
  check(o.warmup >= 0, "--warmup must not be negative");
  if (o.eval_every <= 0) o.eval_every = o.task == "lm" ? 500 : 100;
  if (o.eval_batches <= 0) o.eval_batches = o.task == "lm" ? 200 : 8;
  kernels::require_device(o.device);  // "CUDA was requested but no CUDA GPU is available"
}

namespace {

// The task: where batches come from and how a model is scored on it.
struct Task {
  std::unique_ptr<CharDataset> text;  // lm
  RecallTask recall;
  std::vector<Batch> heldout;         // recall: fixed evaluation set
  int vocab = 0;

  Batch train_batch(const TrainOptions& o, Rng& rng) const {
    if (text) return text->sample_batch(Split::train, o.batch, o.context, rng, o.device);
    return recall.sample_batch(o.batch, rng, o.device);
  }
};

struct EvalResult {
  double loss = 0, accuracy = 0;
};

// Mean loss (and, with a mask, accuracy where the mask is 1) over batches.
EvalResult evaluate(LanguageModel& model, const std::vector<Batch>& batches) {
  NoGradGuard no_grad;
  EvalResult r;
  double correct = 0, counted = 0;
  for (const Batch& b : batches) {
    Var logits = model.forward(b.x);
    r.loss += cross_entropy(logits, b.y, b.mask).item();
    if (b.mask.defined()) {
      std::vector<int32_t> pred = kernels::argmax_last(logits.data()).to_vector<int32_t>();
      std::vector<int32_t> y = b.y.to_vector<int32_t>();
      std::vector<float> m = b.mask.to_vector<float>();
      for (size_t i = 0; i < y.size(); ++i) {
        counted += m[i];
        correct += m[i] * (pred[i] == y[i]);
      }
    }
  }
  r.loss /= double(batches.size());
  r.accuracy = counted > 0 ? correct / counted : 0.0;
  return r;
}

// lm: `n` val batches at `context`, drawn from a generator seeded for
// evaluation so that every evaluation of a run sees the same text.
std::vector<Batch> val_batches(const CharDataset& text, int n, int batch, int context,
                               uint64_t seed, Device device) {
  Rng rng(seed);
  std::vector<Batch> out;
  for (int i = 0; i < n; ++i) out.push_back(text.sample_batch(Split::val, batch, context, rng, device));
  return out;
}

json options_json(const TrainOptions& o) {
  return {{"preset", o.preset}, {"task", o.task}, {"device", device_name(o.device)},
          {"steps", o.steps}, {"batch", o.batch}, {"context", o.context}, {"lr", o.lr},
          {"min_lr", o.lr / 10}, {"warmup", o.warmup}, {"clip", o.clip}, {"seed", o.seed},
          {"data", o.data}, {"eval_every", o.eval_every}, {"eval_batches", o.eval_batches},
          {"weight_decay", 0.1}, {"betas", {0.9, 0.99}}, {"eps", 1e-8}};
}

json model_json(const ModelConfig& c) {
  json layers = json::array();
  for (MixerKind k : c.layers) layers.push_back(mixer_name(k));
  return {{"preset", c.preset}, {"layers", layers}, {"vocab", c.vocab}, {"n_embd", c.n_embd},
          {"n_head", c.n_head}, {"head_size", c.head_size}, {"n_kv_head", c.n_kv_head},
          {"mlp_hidden", c.mlp_hidden}, {"conv_kernel", c.conv_kernel},
          {"norm_eps", c.norm_eps}, {"rope_base", c.rope_base},
          {"scan_form", c.scan_form == ScanForm::Chunked ? "chunked" : "sequential"},
          {"scan_chunk", c.scan_chunk}};
}

// Writes to path.tmp, then renames: a failed write never replaces a good file.
void write_json_atomically(const std::string& path, const json& j) {
  std::string tmp = path + ".tmp";
  std::ofstream f(tmp);
  check(bool(f), "cannot write " + tmp);
  f << j.dump(2) << "\n";
  f.close();
  if (!f) {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    throw Error("error writing " + tmp);
  }
  std::filesystem::rename(tmp, path);
}

// On --resume: the checkpoint's run options apply; an option given on the
// command line must agree with them.
void adopt_checkpoint_options(TrainOptions& o, const json& saved, const std::string& path) {
  auto adopt = [&](const char* flag, const char* key, auto& value) {
    using V = std::decay_t<decltype(value)>;
    if (!saved.contains(key)) return;
    V from_ckpt = saved[key].get<V>();
    bool given = std::find(o.given.begin(), o.given.end(), flag) != o.given.end();
    check(!given || value == from_ckpt, std::string(flag) + " " + json(value).dump() +
                                            " differs from the " + json(from_ckpt).dump() +
                                            " of checkpoint " + path);
    value = from_ckpt;
  };
  adopt("--steps", "steps", o.steps);
  adopt("--batch", "batch", o.batch);
  adopt("--context", "context", o.context);
  adopt("--lr", "lr", o.lr);
  adopt("--warmup", "warmup", o.warmup);
  adopt("--seed", "seed", o.seed);
  adopt("--eval-every", "eval_every", o.eval_every);
  adopt("--eval-batches", "eval_batches", o.eval_batches);
}

}  // namespace

TrainResult train(TrainOptions o, const std::atomic<bool>* stop_requested) {
  CheckpointInfo resumed;
  if (!o.resume.empty()) {
    resumed = read_checkpoint_info(o.resume);
    check(resumed.task == o.task && resumed.preset == o.preset,
          "checkpoint " + o.resume + " is of " + resumed.task + "/" + resumed.preset + ", not " +
              o.task + "/" + o.preset);
    adopt_checkpoint_options(o, resumed.options, o.resume);
  }
  validate(o);
  // ---- the task ----
  Task task;
  if (o.task == "lm") {
    task.text = std::make_unique<CharDataset>(CharDataset::load(o.data));
    task.text->check_context(o.context);
    task.vocab = task.text->vocab_size();
  } else {
    o.context = RecallTask::kContext;
    task.vocab = RecallTask::kVocab;
    task.heldout = task.recall.heldout(o.eval_batches, o.batch, o.seed + 1, o.device);
  }
  std::vector<Batch> val;
  if (task.text) val = val_batches(*task.text, o.eval_batches, o.batch, o.context, o.seed + 1, o.device);
  else val = task.heldout;

  // ---- model, optimiser, and where a resumed run left off ----
  ModelConfig config = make_config(o.preset, task.vocab);
  LanguageModel model(config, o.seed, DType::f32, o.device);
  AdamW optimizer(model.params(), AdamWConfig{o.lr, 0.9, 0.99, 1e-8, 0.1});
  Rng rng(o.seed);
  const std::string vocab_chars = task.text ? task.text->vocab() : std::string();
  json history = {{"loss_curve", json::array()}, {"eval", json::array()}};
  int first_step = 0;
  double previous_train_seconds = 0;
  if (!o.resume.empty()) {
    const CheckpointInfo& info = resumed;
    check(info.vocab_chars == vocab_chars,
          "checkpoint " + o.resume + " was trained on another text (its vocabulary differs)");
    load_checkpoint(o.resume, model, &optimizer);
    rng.set_state(info.rng_state);
    history = info.history;
    first_step = int(info.step);
    previous_train_seconds = history.value("train_seconds", 0.0);
    check(first_step <= o.steps, "checkpoint " + o.resume + " has done " +
                                     std::to_string(first_step) + " updates, more than --steps " +
                                     std::to_string(o.steps));
  }

  std::filesystem::create_directories(o.out + "/" + device_name(o.device));
  const std::string json_path = run_path(o, ".json"), ckpt_path = run_path(o, ".safetensors");

  auto save = [&](int step) {
    CheckpointInfo info{o.preset, o.task, task.vocab, vocab_chars, step, rng.state(),
                        options_json(o), history};
    save_checkpoint(ckpt_path, model, &optimizer, info);
  };
  auto record_eval = [&](int step, Progress& progress) {
    EvalResult r = evaluate(model, val);
    json e = {{"step", step}, {"val_loss", r.loss}};
    if (o.task == "recall") e["val_accuracy"] = r.accuracy;
    history["eval"].push_back(e);
    char line[160];
    std::snprintf(line, sizeof line, "eval at step %d: val loss %.4f%s", step, r.loss,
                  o.task == "recall" ? (", accuracy " + std::to_string(r.accuracy)).c_str() : "");
    progress.note(line);
    return r;
  };

  // ---- the loop ----
  Progress progress(o.steps, o.quiet, first_step);
  auto wall_start = Clock::now();
  double train_seconds = 0;
  int step = first_step;
  bool interrupted = false;
  const int64_t tokens_per_step = int64_t(o.batch) * o.context;
  while (step < o.steps) {
    if ((stop_requested && stop_requested->load()) || (o.stop_at >= 0 && step >= o.stop_at)) {
      interrupted = true;
      break;
    }
    auto t0 = Clock::now();
    Batch b = task.train_batch(o, rng);
    model.params().zero_grad();
    Var loss = cross_entropy(model.forward(b.x), b.y, b.mask);
    loss.backward();
    double lr = lr_at(step, o.steps, o.lr, o.lr / 10, o.warmup);
    double grad_norm = clip_grad_norm(model.params(), o.clip);
    optimizer.step(lr);
    double loss_value = loss.item();
    train_seconds += seconds_since(t0);
    ++step;
    history["loss_curve"].push_back({{"step", step}, {"loss", loss_value}, {"lr", lr},
                                     {"grad_norm", grad_norm}});
    progress.update(step, loss_value, lr, double(tokens_per_step) * (step - first_step) / train_seconds);
    check(std::isfinite(loss_value), "training diverged: loss is " + std::to_string(loss_value) +
                                         " at step " + std::to_string(step));
    if (step % o.eval_every == 0 || step == o.steps) {
      record_eval(step, progress);
      history["train_seconds"] = previous_train_seconds + train_seconds;
      save(step);
    }
  }
  progress.finish();
  history["train_seconds"] = previous_train_seconds + train_seconds;
  if (interrupted) save(step);

  // ---- the run's json (spec §3) ----
  json j;
  j["preset"] = o.preset;
  j["task"] = o.task;
  j["device"] = device_name(o.device);
  j["git_commit"] = LINA_GIT_COMMIT;
  j["config"] = {{"model", model_json(config)}, {"train", options_json(o)}};
  j["params"] = model.params().count();
  j["kv_per_token"] = config.kv_per_token();
  j["state_const"] = config.state_const();
  j["conv_cache"] = config.conv_cache();
  j["steps_done"] = step;
  j["interrupted"] = interrupted;
  j["loss_curve"] = history["loss_curve"];
  j["eval"] = history["eval"];
  if (!history["eval"].empty()) {
    const json& last = history["eval"].back();
    j["final"] = {{"step", last["step"]}, {"val_loss", last["val_loss"]}};
    if (last.contains("val_accuracy")) j["final"]["val_accuracy"] = last["val_accuracy"];
  }
  if (!history["loss_curve"].empty()) j["final"]["train_loss"] = history["loss_curve"].back()["loss"];

  // A stop requested after the last update skips the long final evaluations.
  if (stop_requested && stop_requested->load()) interrupted = true;
  if (!interrupted && task.text && o.extrap_batches > 0) {  // extrapolation: longer contexts
    json ex = json::array();
    for (int ctx : o.extrap_contexts) {
      if (int64_t(ctx) + 1 > int64_t(task.text->tokens(Split::val).size())) continue;
      auto batches = val_batches(*task.text, o.extrap_batches, o.batch, ctx, o.seed + 2, o.device);
      EvalResult r = evaluate(model, batches);
      ex.push_back({{"context", ctx}, {"val_loss", r.loss}});
      progress.note("extrapolation: context " + std::to_string(ctx) + " val loss " +
                    std::to_string(r.loss));
    }
    j["extrapolation"] = ex;
  }
  if (!interrupted && config.layers.end() != std::find(config.layers.begin(), config.layers.end(),
                                                       MixerKind::GatedDelta)) {
    NoGradGuard no_grad;
    AlphaStats stats;
    std::vector<std::vector<double>> sum;
    for (const Batch& b : val) {  // mean α of every gated head over the evaluation text
      model.forward(b.x, nullptr, &stats);
      if (sum.empty()) sum.assign(stats.mean.size(), std::vector<double>(stats.mean[0].size(), 0));
      for (size_t l = 0; l < stats.mean.size(); ++l)
        for (size_t h = 0; h < stats.mean[l].size(); ++h) sum[l][h] += stats.mean[l][h] / val.size();
    }
    json alpha = json::array();
    for (size_t l = 0; l < sum.size(); ++l) alpha.push_back({{"layer", stats.layer[l]}, {"mean_alpha", sum[l]}});
    j["alpha"] = alpha;
  }
  double total_train = history["train_seconds"].get<double>();
  int done_here = step - first_step;
  j["wall_time_s"] = seconds_since(wall_start);
  j["train_time_s"] = total_train;
  j["ms_per_step"] = done_here > 0 ? 1000.0 * train_seconds / done_here : 0.0;
  j["tokens_per_s"] = train_seconds > 0 ? double(tokens_per_step) * done_here / train_seconds : 0.0;
  write_json_atomically(json_path, j);
  return TrainResult{json_path, interrupted};
}

}  // namespace lina
