// One child of `lina bench` (the hidden `lina bench-worker`): measures one
// preset in a fresh process and writes a json for the parent to read.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>

#include "backend_cpu/host_allocator.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/profile.h"
#include "core/rng.h"
#include "experiments/bench.h"
#include "models/mixer.h"
#include "experiments/resident_memory.h"
#include "models/model.h"
#include "models/optim.h"

namespace lina {

using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kVocab = 65;  // the lm task's vocabulary (tiny shakespeare's characters)

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Random tokens of the lm vocabulary: model FLOPs and time do not depend on the data.
Tensor random_ids(Rng& rng, int64_t batch, int64_t context) {
  std::vector<int32_t> ids(size_t(batch * context));
  for (int32_t& id : ids) id = int32_t(rng.randint(kVocab));
  return Tensor::from_vector(ids, {batch, context});
}

// One update as `lina train` makes it: forward, backward, clip, AdamW.
void train_step(LanguageModel& model, AdamW& opt, const Tensor& x, const Tensor& y) {
  model.params().zero_grad();
  ReleaseUnreadOutputs release_unread;
  Var loss = cross_entropy(model.forward(x), y);
  loss.backward(Graph::Free);
  profile::PhaseScope optimizer_phase(profile::Phase::Optimizer);
  clip_grad_norm(model.params(), 1.0);
  (void)loss.item();
  opt.update(1e-3);
}

ModelConfig bench_config(const std::string& preset, int scan_chunk) {
  ModelConfig config = make_config(preset, kVocab);
  if (scan_chunk > 0) config.scan_chunk = scan_chunk;
  return config;
}

// One preset's model and optimizer, as the jobs below train them.
struct BenchModel {
  ModelConfig config;
  LanguageModel model;
  AdamW opt;
  BenchModel(const std::string& preset, int scan_chunk)
      : config(bench_config(preset, scan_chunk)),
        model(config, 1337),
        opt(model.params(), AdamWConfig{1e-3, 0.9, 0.99, 1e-8, 0.1}) {}
  // ms of one training step on a random batch of shape s (drawn before the clock starts)
  double step_ms(Rng& rng, const BenchShape& s) {
    Tensor x = random_ids(rng, s.batch, s.context), y = random_ids(rng, s.batch, s.context);
    auto t0 = Clock::now();
    train_step(model, opt, x, y);
    return ms_since(t0);
  }
};

json train_job(const BenchOptions& o) {
  const BenchShape s = o.shapes.at(0);
  BenchModel m(o.presets.at(0), o.scan_chunk);
  Rng rng(1);
  auto run_steps = [&](int n, std::vector<double>* ms) {
    for (int i = 0; i < n; ++i) {
      const double t = m.step_ms(rng, s);
      if (ms) ms->push_back(t);
    }
  };
  run_steps(o.warmup, nullptr);
  cpu::reset_host_memory_counters();
  std::vector<double> ms;
  run_steps(o.steps, &ms);
  cpu::HostMemoryStats mem = cpu::host_memory_stats();
  json r = {{"batch", s.batch}, {"context", s.context}, {"steps", o.steps}, {"warmup", o.warmup},
            {"ms_all", ms}, {"ms_per_step", median(ms)},
            {"allocs_per_step", double(mem.requests) / o.steps},
            {"system_allocs_per_step", double(mem.system_allocs) / o.steps},
            {"host_peak_mb", double(mem.peak_bytes) / 1048576.0},
            {"peak_rss_mb", resident_memory().peak_mb}};
  if (o.profile) {  // a second pass of o.steps, so the timing above is unprofiled
    profile::reset();
    profile::set_enabled(true);
    run_steps(o.steps, nullptr);
    profile::set_enabled(false);
    json entries = json::array();
    for (const profile::Entry& e : profile::entries())
      entries.push_back({{"op", e.op}, {"detail", e.detail}, {"phase", profile::phase_name(e.phase)},
                         {"calls", e.calls}, {"ms", e.seconds * 1e3},
                         {"bytes", e.bytes}, {"flops", e.flops}});
    r["profile"] = {{"steps", o.steps}, {"entries", entries}};
  }
  return r;
}

// o.presets[1]'s training step against o.presets[0]'s (attn), both models
// in this process: after o.warmup steps of each, o.pairs pairs of one step
// of each, which goes first alternating from pair to pair. Each pair's
// ratio is taken within the pair, a few hundred milliseconds apart.
json pair_job(const BenchOptions& o) {
  const BenchShape s = o.shapes.at(0);
  BenchModel base(o.presets.at(0), o.scan_chunk), other(o.presets.at(1), o.scan_chunk);
  Rng rng(1);
  for (int i = 0; i < o.warmup; ++i) {
    base.step_ms(rng, s);
    other.step_ms(rng, s);
  }
  std::vector<double> ms_base, ms_other, ratios;
  for (int i = 0; i < o.pairs; ++i) {
    double b, t;
    if (i % 2 == 0) b = base.step_ms(rng, s), t = other.step_ms(rng, s);
    else t = other.step_ms(rng, s), b = base.step_ms(rng, s);
    ms_base.push_back(b);
    ms_other.push_back(t);
    ratios.push_back(t / b);
  }
  std::vector<double> sorted = ratios;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  return {{"batch", s.batch}, {"context", s.context}, {"pairs", o.pairs}, {"warmup", o.warmup},
          {"ms_attn", ms_base}, {"ms_preset", ms_other}, {"ratios", ratios},
          {"ratio_median", median(ratios)}, {"ratio_q1", n ? sorted[n / 4] : 0.0},
          {"ratio_q3", n ? sorted[(3 * n) / 4] : 0.0}};
}

// The state a sequence would hold after `context` tokens, with random
// contents: the time of the next token does not depend on the values, and
// filling it token by token would cost O(context) steps per context.
// Attention layers: K (after RoPE) and V of every earlier token; recurrent
// layers: S and the last K−1 conv inputs.
void fill_state(InferenceState& state, const ModelConfig& c, int context, Rng& rng) {
  for (size_t i = 0; i < state.layers.size(); ++i) {
    LayerCache& l = state.layers[i];
    if (!c.layers[i]->recurrent) {
      l.k = Tensor::randn({1, context, c.n_kv_head, c.head_size}, rng);
      l.v = Tensor::randn({1, context, c.n_kv_head, c.head_size}, rng);
    } else {
      l.state = Tensor::randn(l.state.shape(), rng, 0.1);
      l.conv = Tensor::randn(l.conv.shape(), rng);
    }
  }
  state.position = context;
}

// Batch 1, one token at a time with an InferenceState: at each context, the
// median time of o.infer_steps tokens generated after `context` tokens.
json infer_job(const BenchOptions& o) {
  ModelConfig config = make_config(o.presets.at(0), kVocab);
  LanguageModel model(config, 1337);
  NoGradGuard no_grad;
  Rng rng(2);
  json rows = json::array();
  for (int c : o.contexts) {
    InferenceState state = model.new_state(1);
    fill_state(state, config, c, rng);
    long long kv = state.kv_floats(), st = state.state_floats(), conv = state.conv_floats();
    auto one_token = [&] { (void)model.forward(random_ids(rng, 1, 1), &state).data().to_vector<float>(); };
    one_token();  // warm-up: the first call at a new size allocates
    std::vector<double> ms;
    for (int i = 0; i < o.infer_steps; ++i) {
      auto t0 = Clock::now();
      one_token();
      ms.push_back(ms_since(t0));
    }
    rows.push_back({{"context", c}, {"ms_per_token", median(ms)}, {"ms_all", ms},
                    {"kv_floats", kv}, {"state_floats", st}, {"conv_floats", conv},
                    {"bytes_per_sequence", (kv + st + conv) * 4}});  // float32
  }
  return {{"contexts", rows}, {"peak_rss_mb", resident_memory().peak_mb}};
}

}  // namespace

void run_bench_worker(const BenchOptions& o, const std::string& job, const std::string& out) {
  json r;
  if (job == "pair") {
    check(o.presets.size() == 2 && o.pairs > 0, "bench-worker: job pair needs two presets and --pairs");
    r = pair_job(o);
  }
  else if (o.presets.size() != 1) throw Error("bench-worker: job " + job + " needs exactly one preset");
  else if (job == "train") r = train_job(o);
  else if (job == "infer") r = infer_job(o);
  else throw Error("bench-worker: unknown job '" + job + "': use train, infer or pair");
  write_file_atomically(out, r.dump() + "\n", "bench-worker result");
}

}  // namespace lina
