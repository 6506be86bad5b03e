#include "experiments/train.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>

#include "autograd/trace.h"
#include "core/cuda_status.h"
#include "dispatch/dispatch.h"
#include "experiments/checkpoint.h"
#include "experiments/data.h"
#include "experiments/fault_injection.h"
#include "experiments/lr_schedule.h"
#include "experiments/machine.h"
#include "experiments/option_json.h"
#include "experiments/progress.h"
#include "experiments/resident_memory.h"
#include "experiments/run_lock.h"
#include "experiments/update_plan.h"
#include "models/optim.h"

#include "lina_git_commit.h"  // LINA_GIT_COMMIT, written at build time (third_party/GitCommit.cmake)

namespace lina {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

// A double for the json: itself when finite, else its name ("nan", "inf").
static json json_number(double v) { return std::isfinite(v) ? json(v) : json(std::to_string(v)); }

static double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

namespace {

// Updates of --extend-to's fresh warm-up (cosine schedule; fewer when it adds fewer).
constexpr int kExtensionWarmup = 100;
// Updates per window (experiments/update_plan.h): on cuda the log is read
// back once per window, so at most 0.01 reads per update; on the CPU a read
// costs nothing and the log is read after every update.
constexpr int kCudaWindow = 100;
// recall: the capacity probe after training, accuracy at these numbers of
// pairs (the course's), --probe-batches batches each.
constexpr int kProbePairs[] = {8, 16, 24, 32};

// Appends `text` and a newline to the file at `path`. The stream buffers what
// it is given, so a full disk (or /dev/full) shows only when it is flushed and
// closed: both are checked, and a failure is one lina::Error naming `flag`.
void append_line(const std::string& path, const std::string& text, const std::string& flag) {
  errno = 0;
  std::ofstream f(path, std::ios::app);
  f << text << '\n';
  f.close();  // flushes
  const int error = errno;  // read before the message's strings can touch it
  check(!f.fail(), flag + ": cannot write " + path + (error ? std::string(": ") + std::strerror(error) : ""));
}

// ---- the task -------------------------------------------------------------------------

// Where batches come from and how a model is scored on it.
struct Task {
  std::unique_ptr<CharDataset> text;  // lm
  RecallTask recall;
  std::vector<Batch> heldout;         // recall: a fixed held-out set, the same in every run
  int vocab = 0;

  Batch train_batch(const TrainOptions& o, Rng& rng, Device device) const {
    if (text) return text->sample_batch(Split::Train, o.batch, o.context, rng, device);
    return recall.sample_batch(o.batch, rng, device);
  }
};

// `n` fresh random batches: lm windows of `split` at `context`, or recall
// sequences of the task's pairs.
std::vector<Batch> random_batches(const Task& task, Split split, int n, int batch, int context,
                                  Rng& rng, Device device) {
  std::vector<Batch> out;
  for (int i = 0; i < n; ++i)
    out.push_back(task.text ? task.text->sample_batch(split, batch, context, rng, device)
                            : task.recall.sample_batch(batch, rng, device));
  return out;
}

// The generator of the evaluation after `updates` updates: its own stream, the
// same for a resumed run, apart from the training batches' generator.
Rng evaluation_rng(uint64_t seed, int updates, uint64_t purpose) {
  return Rng(seed * 0x9E3779B97F4A7C15ULL + uint64_t(updates) * 0xBF58476D1CE4E5B9ULL + purpose);
}

Task make_task(TrainOptions& o) {
  Task task;
  if (o.task == "lm") {
    task.text = std::make_unique<CharDataset>(CharDataset::load(o.data));
    task.text->check_context(o.context);
    task.vocab = task.text->vocab_size();
  } else {
    task.recall = RecallTask(o.pairs, o.keys, o.values);
    o.context = task.recall.context();
    task.vocab = task.recall.vocab();
    task.heldout = task.recall.heldout(o.eval_batches, o.batch, o.seed + 1, o.device);
  }
  return task;
}

struct EvalResult {
  double loss = 0, accuracy = 0;
};

// Mean loss (and, with a mask, accuracy where the mask is 1) over batches;
// nothing when a stop was requested before the last batch.
std::optional<EvalResult> evaluate(LanguageModel& model, const std::vector<Batch>& batches,
                                   const std::atomic<int>* stop_signal) {
  NoGradGuard no_grad;
  EvalResult r;
  double correct = 0, counted = 0;
  for (const Batch& b : batches) {
    if (stop_signal && stop_signal->load() != 0) return std::nullopt;
    Var logits = model.forward(b.x);
    r.loss += cross_entropy(logits, b.y, b.mask).item();
    if (b.mask.defined()) {
      std::vector<int32_t> pred = dispatch::argmax_last(logits.data()).to_vector<int32_t>();
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

// ---- the run's json (docs/spec.md §3) -------------------------------------------------

double min_lr(const TrainOptions& o) { return o.schedule == "cosine" ? o.lr / 10 : o.lr; }

// The run's options, the recipe (docs/spec.md §2.3) among them: what the json
// records and what a resumed run adopts (train_options.cpp).
json options_json(const TrainOptions& o) {
  return {{"preset", o.preset}, {"task", o.task}, {"device", device_name(o.device)},
          {"steps", o.steps}, {"batch", o.batch}, {"context", o.context}, {"seed", o.seed},
          {"data", o.data}, {"eval_every", o.eval_every}, {"eval_batches", o.eval_batches},
          {"fresh_batches", o.fresh_batches}, {"probe_batches", o.probe_batches},
          {"checkpoint_every", o.checkpoint_every}, {"pairs", o.pairs}, {"keys", o.keys},
          {"values", o.values}, {"scan_form", o.scan_form}, {"scan_chunk", o.scan_chunk},
          {"feature_map", o.feature_map}, {"attention", o.attention}, {"conv", o.conv},
          // the recipe
          {"lr", o.lr}, {"schedule", o.schedule}, {"warmup", o.warmup}, {"min_lr", min_lr(o)},
          {"clip", o.clip}, {"weight_decay", o.weight_decay}, {"decay_matrices", o.decay_matrices},
          {"beta2", o.beta2}, {"betas", {0.9, o.beta2}}, {"eps", 1e-8}, {"dropout", o.dropout}};
}

json model_json(const ModelConfig& c) {
  return {{"preset", c.preset}, {"layers", c.layer_names()}, {"vocab", c.vocab}, {"n_embd", c.n_embd},
          {"n_head", c.n_head}, {"head_size", c.head_size}, {"n_kv_head", c.n_kv_head},
          {"mlp_hidden", c.mlp_hidden}, {"conv_kernel", c.conv_kernel},
          {"norm_eps", c.norm_eps}, {"rope_base", c.rope_base},
          {"scan_form", c.scan_form}, {"scan_chunk", c.scan_chunk}, {"feature_map", c.feature_map},
          {"fused_attention", c.attention == Fusion::Fused}, {"fused_conv", c.conv == Fusion::Fused}};
}

// ---- one training run -----------------------------------------------------------------------

class TrainingRun {
 public:
  TrainingRun(TrainOptions options, const std::atomic<int>* stop_signal)
      : o_(std::move(options)), stop_(stop_signal) {}
  TrainResult run();

 private:
  bool stop_requested() const { return stop_ && stop_->load() != 0; }
  bool stop_due(int done) const;
  void make_model();
  void resume_from(const SafetensorsFile& file, const CheckpointInfo& info);
  void train_loop();
  int next_window() const;
  void train_window(int n);
  bool run_update();
  bool capture_update();
  void update_on_device();
  void count_cuda_updates(const dispatch::DeviceCounters& from, int updates, double seconds);
  void record_evaluation();
  void save_batch(const Batch& b, int update);
  void save();
  void final_evaluations();
  void extrapolation();
  void capacity_probe();
  void alpha_statistics();
  void write_json();
  [[noreturn]] void diverged(int bad_update, const std::string& numbers, json record);

  TrainOptions o_;
  const std::atomic<int>* stop_;
  Task task_;
  std::unique_ptr<LanguageModel> model_;
  std::unique_ptr<AdamW> optimizer_;
  std::unique_ptr<UpdatePlan> plan_;  // the window of updates in the device's memory
  dispatch::CudaGraph graph_;         // on cuda: the update, captured (run_update)
  int updates_run_ = 0;               // by this process
  Rng rng_{0};
  std::string vocab_chars_, json_path_, ckpt_path_;
  json history_ = {{"loss_curve", json::array()}, {"eval", json::array()}};  // + "schedule", "train_seconds" when saved
  LrSchedule schedule_;
  json final_results_ = json::object();  // extrapolation, alpha; once measured
  json diverged_;                         // set when the run diverged
  int updates_done_ = 0, first_update_ = 0;
  std::string last_checkpoint_;           // the newest good checkpoint of this run, if any
  int last_checkpoint_update_ = -1;
  bool interrupted_ = false;
  double previous_train_seconds_ = 0, train_seconds_ = 0;
  json cuda_update_counts_;  // what one CUDA update launched, allocated and read back (count_cuda_updates)
  std::vector<dispatch::KernelTime> kernel_times_;  // --cuda-graph off: one update's kernels, timed
  std::string cuda_graph_error_;  // why the capture failed, if it did (the run went on eagerly)
  Clock::time_point wall_start_ = Clock::now();
  std::unique_ptr<Progress> progress_;
  InjectedFault fault_ = InjectedFault::from_environment();
  std::optional<RunLock> lock_;  // held from the run's paths on: one run per json (run_lock.h)
};

TrainResult TrainingRun::run() {
  // ---- options: the checkpoint's, when resuming ----
  std::optional<SafetensorsFile> resumed_file;
  CheckpointInfo resumed;
  if (!o_.resume.empty()) {
    resumed_file = load_safetensors(o_.resume);
    resumed = checkpoint_info(*resumed_file);
    adopt_checkpoint_options(o_, resumed, o_.resume);
  } else {
    check(o_.extend_to < 0, "--extend-to needs --resume CKPT (the run to train on)");
  }
  validate(o_);

  make_model();
  if (resumed_file) {
    resume_from(*resumed_file, resumed);
    resumed_file.reset();
  }
  updates_done_ = first_update_;

  json_path_ = run_path(o_, ".json");
  if (fs::path folder = fs::path(json_path_).parent_path(); !folder.empty()) fs::create_directories(folder);
  lock_.emplace(json_path_);  // before this run writes anything of its own
  ckpt_path_ = run_path(o_, ".safetensors");

  train_loop();
  if (interrupted_) {
    save();
  } else {
    final_evaluations();
    write_json();
  }
  return TrainResult{json_path_, ckpt_path_, interrupted_, updates_done_};
}

// The task, the model, the optimiser and the learning-rate schedule of a
// fresh run.
void TrainingRun::make_model() {
  task_ = make_task(o_);
  ModelConfig config = make_config(o_.preset, task_.vocab);
  config.scan_form = o_.scan_form;
  config.scan_chunk = o_.scan_chunk;
  config.feature_map = o_.feature_map;
  config.attention = o_.attention;
  config.conv = o_.conv;
  model_ = std::make_unique<LanguageModel>(config, o_.seed, DType::F32, o_.device);
  optimizer_ = std::make_unique<AdamW>(
      model_->params(), AdamWConfig{o_.lr, 0.9, o_.beta2, 1e-8, o_.weight_decay, !o_.decay_matrices});
  if (o_.device == Device::Cuda) dispatch::set_cuda_tf32(o_.tf32);
  const int window = o_.device == Device::Cuda ? kCudaWindow : 1;
  plan_ = std::make_unique<UpdatePlan>(window, o_.batch, o_.context, !task_.text, DType::F32, o_.device);
  rng_ = Rng(o_.seed);
  vocab_chars_ = task_.text ? task_.text->vocab() : std::string();
  schedule_.add(0, o_.steps, o_.lr, o_.warmup, min_lr(o_));
}

// Where a resumed run left off: the checkpoint's weights, optimiser state,
// random state, history and schedule (extended by --extend-to).
void TrainingRun::resume_from(const SafetensorsFile& file, const CheckpointInfo& info) {
  check(info.vocab_chars == vocab_chars_,
        "checkpoint " + o_.resume + " was trained on another text (its vocabulary differs)");
  load_checkpoint(file, *model_, optimizer_.get());
  rng_.set_state(info.rng_state);
  first_update_ = int(info.updates);
  history_ = info.history;
  schedule_ = LrSchedule::from_json(history_.value("schedule", json::array()));
  check(!schedule_.empty(), "checkpoint " + o_.resume + " has no learning-rate schedule");
  if (o_.extend_to >= 0) {  // cosine: a fresh warm-up and cosine over the added updates
    const int warmup = o_.schedule == "cosine" ? std::min(kExtensionWarmup, o_.extend_to - first_update_) : 0;
    schedule_.add(first_update_, o_.extend_to, o_.lr, warmup, min_lr(o_));
  }
  previous_train_seconds_ = history_.value("train_seconds", 0.0);
  check(first_update_ <= o_.steps, "checkpoint " + o_.resume + " has done " + std::to_string(first_update_) +
                                     " updates, more than --steps " + std::to_string(o_.steps));
  last_checkpoint_ = o_.resume;
  last_checkpoint_update_ = first_update_;
}

// Updates until --steps (or a stop), evaluating and saving on their
// schedules; interrupted_ says whether it stopped early.
void TrainingRun::train_loop() {
  progress_ = std::make_unique<Progress>(o_.steps, o_.quiet, first_update_);
  if (first_update_ == o_.steps && !o_.resume.empty())
    progress_->note("checkpoint " + o_.resume + " has done all its " + std::to_string(o_.steps) +
                    " updates: evaluating only (--extend-to N trains it on)");
  if (updates_done_ == 0 && history_["eval"].empty()) record_evaluation();  // before the first update
  while (updates_done_ < o_.steps) {
    if (stop_due(updates_done_)) {
      interrupted_ = true;
      break;
    }
    train_window(next_window());
    bool last = updates_done_ == o_.steps;
    if (updates_done_ % o_.eval_every == 0 || last) record_evaluation();
    if (interrupted_) break;  // a stop during the evaluation
    if (updates_done_ % o_.checkpoint_every == 0 || last) save();
  }
  progress_->finish();
}

// How many updates the next window holds: up to the plan's window, never
// past the next evaluation, checkpoint or the last update. (A stop request
// or --stop-at may end it early: train_window.)
int TrainingRun::next_window() const {
  int n = std::min(plan_->window(), o_.steps - updates_done_);
  n = std::min(n, o_.eval_every - updates_done_ % o_.eval_every);
  return std::min(n, o_.checkpoint_every - updates_done_ % o_.checkpoint_every);
}

// A stop request, or --stop-at reached, after `done` updates of the run.
bool TrainingRun::stop_due(int done) const {
  return stop_requested() || (o_.stop_at >= 0 && done >= o_.stop_at);
}

// n updates: their batches and AdamW numbers drawn on the host in update
// order and uploaded at once (experiments/update_plan.h), the updates run,
// then their log read back in one go and recorded. A stop request ends the
// window early (as does --stop-at); the batch generator then goes back to
// where the first update not run drew its batch, so a resumed run draws the
// same batches.
void TrainingRun::train_window(int n) {
  const auto t0 = Clock::now();
  std::vector<Batch> batches;
  std::vector<std::array<uint64_t, 4>> rng_before;
  std::vector<std::array<double, 3>> adamw;
  std::vector<double> lrs;
  const int64_t updates_before = optimizer_->update_count();
  for (int i = 0; i < n; ++i) {
    rng_before.push_back(rng_.state());
    batches.push_back(task_.train_batch(o_, rng_, Device::Cpu));
    lrs.push_back(schedule_.lr(updates_done_ + i));
    adamw.push_back(optimizer_->scalars(lrs.back(), updates_before + 1 + i));
  }
  plan_->load(batches, adamw, updates_done_);

  std::optional<dispatch::DeviceCounters> counted_from;  // the updates count_cuda_updates sees
  auto t_counted = t0;
  int done = 0, counted = 0;
  for (; done < n && !(done > 0 && stop_due(updates_done_ + done)); ++done) {
    if (o_.device == Device::Cuda && cuda_update_counts_.is_null() && !counted_from &&
        updates_run_ >= (o_.cuda_graph ? 3 : 1)) {  // past the eager, rehearsed and captured ones
      counted_from = dispatch::cuda_counters();
      t_counted = Clock::now();
    }
    if (counted_from && counted == 0 && !o_.cuda_graph)  // eager: one update's GPU time, kernel by kernel
      kernel_times_ = dispatch::cuda_kernel_times([&] { run_update(); });
    else
      run_update();
    counted += counted_from.has_value();
    fault_.fail_if_due(updates_done_ + done + 1);  // LINA_INJECT_CUDA_STATUS (tests only)
  }
  if (done < n) rng_.set_state(rng_before[size_t(done)]);
  optimizer_->set_update_count(updates_before + done);
  const UpdatePlan::Log log = plan_->read(done);  // on cuda the window's one read back: it waits for the updates
  if (counted > 0) count_cuda_updates(*counted_from, counted, seconds_since(t_counted));
  train_seconds_ += seconds_since(t0);

  for (int i = 0; i < done; ++i) {
    const double loss = log.loss[size_t(i)], grad_norm = std::sqrt(log.sum_of_squares[size_t(i)]);
    if (!o_.save_batches.empty()) save_batch(batches[size_t(i)], updates_done_ + 1);
    if (!std::isfinite(loss) || !std::isfinite(grad_norm)) {  // this update (and the window's rest) was refused
      char numbers[96];
      std::snprintf(numbers, sizeof numbers, "loss %g, gradient norm %g", loss, grad_norm);
      diverged(updates_done_ + 1, numbers, {{"loss", json_number(loss)}, {"grad_norm", json_number(grad_norm)}});
    }
    ++updates_done_;
    history_["loss_curve"].push_back({{"step", updates_done_}, {"loss", loss}, {"lr", lrs[size_t(i)]},
                                      {"grad_norm", grad_norm}});
    const double tokens_per_update = double(o_.batch) * o_.context;
    progress_->update(updates_done_, loss, lrs[size_t(i)],
                      tokens_per_update * (updates_done_ - first_update_) / train_seconds_);
  }
}

// One update. On cuda (unless --cuda-graph off) the process's second update
// rehearses the graph's memory, its third is captured, and every later one
// replays that graph: the same kernels on the same buffers, one launch.
// Returns whether it was a replay.
bool TrainingRun::run_update() {
  const int phase = updates_run_++;
  if (o_.device != Device::Cuda || !o_.cuda_graph || phase == 0) {
    update_on_device();
    return false;
  }
  if (phase == 1) {
    graph_.rehearse([&] { update_on_device(); });
    return false;
  }
  const bool replay = graph_.captured();
  if (!replay && !capture_update()) {
    update_on_device();
    return false;
  }
  graph_.replay();
  return replay;
}

// Records the update as a graph. Where the device refuses the capture, says
// why once and goes on launching kernel by kernel (--cuda-graph off: the
// same bits); the refused capture ran nothing.
bool TrainingRun::capture_update() {
  try {
    graph_.capture([&] { update_on_device(); });
    return true;
  } catch (const Error& e) {
    o_.cuda_graph = false;
    cuda_graph_error_ = e.what();
    progress_->note("cuda graph: the capture failed, going on kernel by kernel (the same bits): " + cuda_graph_error_);
    return false;
  }
}

// One update from the plan's buffers, as in any training loop: a batch,
// forward, backward, clip, AdamW. Nothing is read back: the loss and Σ g² go
// to the plan's log, and the AdamW kernel skips an update they refused, or
// clips the gradients by that Σ g² as it reads them (--clip).
void TrainingRun::update_on_device() {
  plan_->begin();  // this update's batch and AdamW numbers, from the window
  model_->params().zero_grad();
  trace::Scope tracing(o_.trace && updates_run_ == 1);  // --trace: the first update, op by op
  ReleaseUnreadOutputs release_unread;  // the forward keeps only what some backward reads
  model_->set_dropout({o_.dropout, o_.seed, 0, plan_->update_counter()});  // this update's masks (core/philox.h)
  Var loss = named(cross_entropy(model_->forward(plan_->x()), plan_->y(), plan_->mask(), plan_->mask_count()), "loss");
  model_->set_dropout({});  // evaluations see no dropout
  loss.backward(Graph::Free);  // each op's saved tensors go as soon as its backward has run
  plan_->end(loss.data(), model_->params().grad());  // Σ g² into the log
  optimizer_->update(plan_->scalars(), plan_->control(), plan_->sum_of_squares(), o_.clip);
}

// On cuda, what one update launched, allocated and read back, per update,
// over `updates` updates after the first three (replays of the graph, or
// with --cuda-graph off eager updates), the window's read back included;
// with --cuda-graph off also the GPU time of each kernel of one update.
void TrainingRun::count_cuda_updates(const dispatch::DeviceCounters& from, int updates, double seconds) {
  const dispatch::DeviceCounters now = dispatch::cuda_counters();
  auto per_update = [&](int64_t a, int64_t b) { return double(b - a) / updates; };
  cuda_update_counts_ = {
      {"graph", o_.cuda_graph},
      {"updates", updates},
      {"kernels", o_.cuda_graph ? double(graph_.kernels()) : per_update(from.launches, now.launches)},
      {"launches", per_update(from.launches, now.launches)},
      {"graph_launches", per_update(from.graph_launches, now.graph_launches)},
      {"allocations", per_update(from.allocations, now.allocations)},
      {"device_to_host_copies", per_update(from.device_to_host_copies, now.device_to_host_copies)},
      {"ms", 1e3 * seconds / updates}};
  if (kernel_times_.empty()) return;
  std::sort(kernel_times_.begin(), kernel_times_.end(),
            [](const dispatch::KernelTime& a, const dispatch::KernelTime& b) { return a.ms > b.ms; });
  json& kernels = cuda_update_counts_["kernel_ms"] = json::array();  // one update, slowest first
  for (const dispatch::KernelTime& k : kernel_times_)
    kernels.push_back({{"kernel", k.kernel}, {"launches", k.launches}, {"ms", k.ms}});
}

// lm: train and val loss on fresh random batches (the course's estimate);
// recall: loss and accuracy on the fixed held-out set, and on the course's
// estimate, --fresh-batches fresh batches.
void TrainingRun::record_evaluation() {
  json e = {{"step", updates_done_}};
  Rng rng = evaluation_rng(o_.seed, updates_done_, 1);
  std::optional<EvalResult> r;
  if (task_.text) {
    auto train = random_batches(task_, Split::Train, o_.eval_batches, o_.batch, o_.context, rng, o_.device);
    std::optional<EvalResult> t = evaluate(*model_, train, stop_);
    if (t) e["train_loss"] = t->loss;
    auto val = random_batches(task_, Split::Val, o_.eval_batches, o_.batch, o_.context, rng, o_.device);
    if (t) r = evaluate(*model_, val, stop_);
  } else {
    auto fresh = random_batches(task_, Split::Val, o_.fresh_batches, o_.batch, o_.context, rng, o_.device);
    std::optional<EvalResult> f = evaluate(*model_, fresh, stop_);
    if (f) e["fresh_loss"] = f->loss, e["fresh_accuracy"] = f->accuracy;
    if (f) r = evaluate(*model_, task_.heldout, stop_);
  }
  if (!r) {
    interrupted_ = true;
    return;
  }
  if (!std::isfinite(r->loss)) {  // the weights of this update score NaN: not saved
    char numbers[64];
    std::snprintf(numbers, sizeof numbers, "val loss %g at its evaluation", r->loss);
    diverged(updates_done_, numbers, {{"val_loss", json_number(r->loss)}});
  }
  ResidentMemory mem = resident_memory();
  e["val_loss"] = r->loss;
  e["rss_mb"] = mem.current_mb;
  if (o_.task == "recall") e["val_accuracy"] = r->accuracy;
  history_["eval"].push_back(e);
  char line[200];
  if (task_.text)
    std::snprintf(line, sizeof line, "eval at step %d: train loss %.4f, val loss %.4f (resident memory %.0f MB)",
                  updates_done_, e["train_loss"].get<double>(), r->loss, mem.current_mb);
  else
    std::snprintf(line, sizeof line, "eval at step %d: held-out loss %.4f, accuracy %.4f (resident memory %.0f MB)",
                  updates_done_, r->loss, r->accuracy, mem.current_mb);
  progress_->note(line);
}

// --save-batches: one json line per update (its 1-based number as "step", x, y, mask or null).
void TrainingRun::save_batch(const Batch& b, int update) {
  const int64_t B = b.x.dim(0), T = b.x.dim(1);
  auto rows = [&](const auto& flat) {  // [B·T] -> B rows of T
    using V = typename std::decay_t<decltype(flat)>::value_type;
    json out = json::array();
    for (int64_t i = 0; i < B; ++i) out.push_back(std::vector<V>(flat.begin() + i * T, flat.begin() + (i + 1) * T));
    return out;
  };
  json line = {{"step", update}, {"x", rows(b.x.to_vector<int32_t>())}, {"y", rows(b.y.to_vector<int32_t>())},
               {"mask", b.mask.defined() ? rows(b.mask.to_vector<float>()) : json()}};
  append_line(o_.save_batches, line.dump(), "--save-batches");
}

// The checkpoint, then the json that describes it.
void TrainingRun::save() {
  history_["train_seconds"] = previous_train_seconds_ + train_seconds_;
  history_["schedule"] = schedule_.to_json();
  CheckpointInfo info{o_.preset, o_.task, task_.vocab, vocab_chars_, updates_done_, rng_.state(),
                      options_json(o_), history_};
  save_checkpoint(ckpt_path_, *model_, optimizer_.get(), info);
  last_checkpoint_ = ckpt_path_;
  last_checkpoint_update_ = updates_done_;
  write_json();
}

// After the last update: extrapolation to longer contexts (lm), the
// capacity probe (recall) and the mean α of every head that learns its decay. A stop
// request skips what is left.
void TrainingRun::final_evaluations() {
  if (task_.text && o_.extrap_batches > 0) extrapolation();
  if (!task_.text) capacity_probe();
  if (!stop_requested()) alpha_statistics();
  if (stop_requested()) interrupted_ = true;  // the checkpoint of the last update is already written
}

// lm: the val loss at longer contexts, extrap_batches fresh batches each, of
// max(4, batch · context / C) windows (about as many tokens as a training batch).
void TrainingRun::extrapolation() {
  json ex = json::array();
  for (int ctx : o_.extrap_contexts) {
    if (int64_t(ctx) + 1 > int64_t(task_.text->tokens(Split::Val).size())) continue;
    const int batch = std::max<int>(4, int(int64_t(o_.batch) * o_.context / ctx));
    Rng rng = evaluation_rng(o_.seed, ctx, 2);
    auto batches = random_batches(task_, Split::Val, o_.extrap_batches, batch, ctx, rng, o_.device);
    std::optional<EvalResult> r = evaluate(*model_, batches, stop_);
    if (!r) break;
    ex.push_back({{"context", ctx}, {"batch", batch}, {"val_loss", r->loss}});
    progress_->note("extrapolation: context " + std::to_string(ctx) + " val loss " + std::to_string(r->loss));
  }
  final_results_["extrapolation"] = ex;
}

// recall: accuracy at each number of pairs of kProbePairs (at most --keys) for
// the model trained at --pairs, --probe-batches fresh batches each.
void TrainingRun::capacity_probe() {
  json probe = json::array();
  for (int pairs : kProbePairs) {
    if (pairs > o_.keys) continue;
    RecallTask task(pairs, o_.keys, o_.values);
    std::vector<Batch> batches = task.heldout(o_.probe_batches, o_.batch, o_.seed + 3 + uint64_t(pairs), o_.device);
    std::optional<EvalResult> r = evaluate(*model_, batches, stop_);
    if (!r) break;
    probe.push_back({{"pairs", pairs}, {"accuracy", r->accuracy}, {"loss", r->loss}});
    progress_->note("capacity: " + std::to_string(pairs) + " pairs, accuracy " + std::to_string(r->accuracy));
  }
  final_results_["capacity"] = probe;
}

// The mean α of every head with a learned decay on evaluation
// text: lm one val batch of 64 windows of 256 (the course's), recall the
// held-out set.
void TrainingRun::alpha_statistics() {
  if (!model_->config().learns_decay()) return;
  std::vector<Batch> batches = task_.heldout;
  if (task_.text) {
    const int ctx = int(std::min<int64_t>(256, int64_t(task_.text->tokens(Split::Val).size()) - 1));
    Rng rng = evaluation_rng(o_.seed, ctx, 4);
    batches = random_batches(task_, Split::Val, 1, 64, ctx, rng, o_.device);
  }
  NoGradGuard no_grad;
  AlphaStats stats;
  std::vector<std::vector<double>> sum;
  for (const Batch& b : batches) {
    model_->forward(b.x, nullptr, &stats);
    if (sum.empty()) sum.assign(stats.mean.size(), std::vector<double>(stats.mean[0].size(), 0));
    for (size_t l = 0; l < stats.mean.size(); ++l)
      for (size_t h = 0; h < stats.mean[l].size(); ++h) sum[l][h] += stats.mean[l][h] / double(batches.size());
  }
  json alpha = json::array();
  for (size_t l = 0; l < sum.size(); ++l) alpha.push_back({{"layer", stats.layer[l]}, {"mean_alpha", sum[l]}});
  final_results_["alpha"] = alpha;
}

void TrainingRun::write_json() {
  const ModelConfig& config = model_->config();
  json j;
  j["preset"] = o_.preset;
  j["task"] = o_.task;
  j["device"] = device_name(o_.device);
  if (o_.device == Device::Cuda) j["cuda_runtime"] = dispatch::cuda_runtime();  // "cuda" or "sim"
  j["git_commit"] = LINA_GIT_COMMIT;
  j["machine"] = machine_json();  // of the last stretch, for a resumed run
  const json options = options_json(o_);
  j["config"] = {{"model", model_json(config)}, {"train", options}};
  j["params"] = model_->params().count();
  // The recipe (docs/spec.md §2.3): the options that make it, as config.train records them.
  json& recipe = j["recipe"] = json::object();
  for (const char* key : {"lr", "schedule", "warmup", "clip", "weight_decay", "beta2", "dropout", "batch", "steps"})
    recipe[key] = options[key];
  recipe["decay"] = o_.decay_matrices ? "matrices" : "all";
  if (o_.task == "recall")
    for (const char* key : {"pairs", "keys", "values"}) recipe[key] = options[key];
  j["kv_per_token"] = config.kv_per_token();
  j["state_const"] = config.state_const();
  j["conv_cache"] = config.conv_cache();
  j["steps_done"] = updates_done_;
  j["finished"] = updates_done_ == o_.steps && !interrupted_ && diverged_.is_null();
  j["interrupted"] = interrupted_;
  j["checkpoint"] = last_checkpoint_;
  j["checkpoint_step"] = last_checkpoint_update_;
  if (!diverged_.is_null()) j["diverged"] = diverged_;
  j["schedule"] = schedule_.to_json();
  j["loss_curve"] = history_["loss_curve"];
  j["eval"] = history_["eval"];
  if (!history_["eval"].empty()) {
    const json& last = history_["eval"].back();
    j["final"] = {{"step", last["step"]}, {"val_loss", last["val_loss"]}};
    for (const char* key : {"val_accuracy", "train_loss", "fresh_loss", "fresh_accuracy"})
      if (last.contains(key)) j["final"][key] = last[key];
  }
  if (!history_["loss_curve"].empty()) j["final"]["last_update_loss"] = history_["loss_curve"].back()["loss"];
  for (const auto& [key, value] : final_results_.items()) j[key] = value;
  int done_here = updates_done_ - first_update_;
  j["wall_time_s"] = seconds_since(wall_start_);
  j["train_time_s"] = previous_train_seconds_ + train_seconds_;
  j["ms_per_step"] = done_here > 0 ? 1000.0 * train_seconds_ / done_here : 0.0;
  j["tokens_per_s"] = train_seconds_ > 0 ? double(o_.batch) * o_.context * done_here / train_seconds_ : 0.0;
  j["peak_rss_mb"] = resident_memory().peak_mb;
  if (o_.device == Device::Cuda) j["cuda_graph"] = o_.cuda_graph, j["tf32"] = o_.tf32;
  if (!cuda_graph_error_.empty()) j["cuda_graph_error"] = cuda_graph_error_;
  if (!cuda_update_counts_.is_null()) j["cuda_step"] = cuda_update_counts_;
  write_json_atomically(json_path_, j);
}

// A number that is not finite: in an update's loss or gradient (the update
// is not applied) or in an evaluation's val loss (the weights it scored are
// not saved). The last checkpoint, all of whose losses were finite, stays as
// it is; the json says where it happened (`record`: the numbers, by name).
void TrainingRun::diverged(int bad_update, const std::string& numbers, json record) {
  diverged_ = std::move(record);
  diverged_["step"] = bad_update;
  progress_->finish();
  write_json();
  char lower_lr[32];
  std::snprintf(lower_lr, sizeof lower_lr, "%g", o_.lr / 2);
  std::string what = "training diverged at step " + std::to_string(bad_update) + " (" + numbers + "); ";
  if (last_checkpoint_.empty())
    throw Error(what + "no checkpoint was written yet: start again with a lower learning rate, e.g. --lr " + lower_lr);
  throw Error(what + "the last checkpoint with finite losses is " + last_checkpoint_ + " (step " +
              std::to_string(last_checkpoint_update_) + "): resume it with a lower learning rate: lina train --resume " +
              last_checkpoint_ + " --extend-to " + std::to_string(o_.steps) + " --lr " + lower_lr);
}

}  // namespace

TrainResult train(TrainOptions options, const std::atomic<int>* stop_signal) {
  return TrainingRun(std::move(options), stop_signal).run();
}

}  // namespace lina
