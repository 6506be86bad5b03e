// lina — the experiment binary.
//   lina train --preset gdn --task recall      train one preset on one task
//   lina eval --checkpoint F --text FILE --context N
//   lina eval --task recall --checkpoint F --predictions P.json [--batches N]
//   lina sample --checkpoint F --prompt "ROMEO:" --tokens 200
//   lina state-size --context 4096
//   lina presets                  every preset: name, course or survey, layers
//   lina bench [--quick] [--presets attn,gdn] [--profile] [--products] [--json F]
//   lina teach [--param NAME]    a gradient by backward() beside a finite difference
//   lina trace                   every op of one step, forward then backward
//   lina graph --out g.dot       the graph of one step (and g.svg with graphviz)
// Every failure ends with one line "lina: error: ..." and exit code 1 (2 for
// a bad command line). SIGINT (Ctrl-C) and SIGTERM stop a training run after
// it wrote its checkpoint and json; the exit code is then 128 + the signal.
#include <CLI/CLI.hpp>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>

#include "core/error.h"
#include "core/printable.h"
#include "experiments/bench.h"
#include "experiments/commands.h"
#include "experiments/teach.h"
#include "experiments/train.h"

namespace {

std::atomic<int> g_stop_signal{0};
std::atomic<long long> g_first_signal_ms{0};  // when the first stop signal came

long long monotonic_ms() {  // clock_gettime is async-signal-safe
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

// The first SIGINT or SIGTERM asks the run to stop cleanly; one that comes a
// second or more later kills it. A copy arriving within the second is the
// same request: `timeout` and job schedulers signal the process and then its
// whole process group, so lina often receives the one stop twice.
extern "C" void on_stop_signal(int signal_number) {
  const long long now = monotonic_ms();
  long long first = 0;
  if (g_first_signal_ms.compare_exchange_strong(first, now)) {
    g_stop_signal.store(signal_number);
    return;
  }
  if (now - first < 1000) return;
  std::signal(signal_number, SIG_DFL);
  std::raise(signal_number);
}

// A numeric flag's range, checked while the command line is parsed, before
// any work: "--steps -1" ends with "lina: error: --steps: must be in
// 1..10000000, got -1". A value that is not a number is left to CLI11's own
// conversion error.
CLI::Validator within(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        char* end = nullptr;
        const double x = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0') return "";
        if (x >= lo && x <= hi) return "";
        return "must be in " + lina::range_text({lo, hi}) + ", got " + lina::printable(text, 40);
      },
      "");
}

// A seed is any integer 0..2^64 − 1, in decimal; CLI11 would wrap "-1"
// round to 2^64 − 1 and saturate 2^64 and above to it.
CLI::Validator seed_range() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const std::string shown = lina::printable(text, 40);
        if (text.find('-') != std::string::npos) return "must not be negative, got " + shown;
        if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
          return "must be a whole number in decimal, got " + shown;
        errno = 0;
        (void)std::strtoull(text.c_str(), nullptr, 10);
        return errno == ERANGE ? "must be at most 18446744073709551615 (2^64 - 1), got " + shown : "";
      },
      "");
}

lina::Device parse_device(const std::string& s) {
  if (s == "cpu") return lina::Device::Cpu;
  if (s == "cuda") return lina::Device::Cuda;
  throw lina::Error("unknown device '" + s + "': use cpu or cuda");
}

// ---- one struct per subcommand: its options, how it is added, how it runs ----------

// A path flag given as '' names nothing: refused before any work.
void refuse_empty_paths(const CLI::App* app, std::initializer_list<std::pair<const char*, const std::string*>> paths) {
  for (const auto& [flag, value] : paths)
    if (app->count(flag) > 0 && value->empty()) throw lina::Error(std::string(flag) + " needs a path (it is empty)");
}

// The numeric train flags' ranges, shared with a checkpoint's options
// (train_options.h) and with eval's --context and --batches; the other
// subcommands' ranges are written where they are added.
CLI::Validator range(const char* flag) {
  lina::OptionRange r = lina::train_option_range(flag);
  return within(r.lo, r.hi);
}

struct TrainCommand {
  CLI::App* app = nullptr;
  lina::TrainOptions t;
  std::string device = "cpu";
  // The enum flags, parsed once after the command line (lina::parse_*).
  std::string scan_form = "chunked", feature_map = "elu1", attention = "fused", conv = "fused", cuda_graph = "on";
  bool decay_all = false, dry_run = false;

  void add(CLI::App& lina_app) {
    app = lina_app.add_subcommand("train", "train one preset on one task, write json + checkpoint");
    app->add_option("--preset", t.preset, lina::preset_list(" | ") + " | a pattern like gdn,gdn,gdn,attn (required unless --resume)");
    app->footer(lina::preset_help());
    app->add_option("--task", t.task, "lm | recall (required unless --resume)");
    app->add_option("--device", device, "cpu | cuda");
    app->add_option("--steps", t.steps, "updates (default: lm 5000, recall 6000)")->check(range("--steps"));
    app->add_option("--batch", t.batch, "sequences per batch (default: lm 64, recall 128)")->check(range("--batch"));
    app->add_option("--context", t.context, "lm context length")->check(range("--context"));
    app->add_option("--pairs", t.pairs, "recall: key–value pairs per sequence (default 32)")->check(range("--pairs"));
    app->add_option("--keys", t.keys, "recall: distinct key tokens (default 64)")->check(range("--keys"));
    app->add_option("--values", t.values, "recall: distinct value tokens (default 64)")->check(range("--values"));
    app->add_option("--attention", attention, "fused (default) | composed: attention as one op, or op by op (permute, expand, matmul, softmax) to step through");
    app->add_option("--conv", conv, "fused (default) | composed: recurrent layers' conv + SiLU (+ q's and k's L2 norm, all but linear) and o_norm + output gate each as one op, or as causal_conv1d, silu (, l2_norm), rms_norm, swiglu to step through");
    app->add_option("--cuda-graph", cuda_graph, "on (default) | off: on cuda, each update captured once as a CUDA graph and replayed, or launched kernel by kernel (the same bits)");
    app->add_flag("--tf32", t.tf32, "on cuda: matrix products in TF32 on the tensor cores (faster, about 1e-3 relative; default float32)");
    app->add_option("--scan-form", scan_form, "chunked (default) | sequential: the recurrence's training form; sequential runs the readable token-by-token backward");
    app->add_option("--scan-chunk", t.scan_chunk, "tokens per chunk of the chunked scan (default 16)")->check(range("--scan-chunk"));
    app->add_option("--feature-map", feature_map, "linear layers' feature map: elu1 (default, elu(x)+1) | relu (relu(x)+1e-5) | sigmoid (sigmoid(x)+1e-5)");
    add_recipe();
    app->add_option("--save-batches", t.save_batches, "write every update's batch to this file (json lines: step, x, y, mask)");
    app->add_option("--seed", t.seed, "seed of every random choice")->check(seed_range());
    app->add_option("--data", t.data, "tiny shakespeare text (lm)");
    app->add_option("--out", t.out, "output folder: writes <out>/<device>/<task>_<preset>.json");
    app->add_option("--resume", t.resume, "continue from this checkpoint, with its options");
    app->add_option("--extend-to", t.extend_to, "with --resume: train on to N updates in all (fresh warm-up, cosine over the added updates)")->check(range("--extend-to"));
    app->add_option("--checkpoint-every", t.checkpoint_every, "updates between checkpoints (default: every evaluation)")->check(range("--checkpoint-every"));
    app->add_option("--stop-at", t.stop_at, "stop after this many updates, as if interrupted (0: save the initial weights)")->check(range("--stop-at"));
    add_evaluation();
    app->add_flag("--quiet", t.quiet, "no progress line");
    app->add_flag("--dry-run", dry_run, "check the options and print the json path the run would write; train nothing");
    app->add_flag("--trace", t.trace, "print every op of the first update, forward then backward (also LINA_TRACE=1)");
  }

  // The recipe (docs/spec.md §2.3): the course's values by default.
  void add_recipe() {
    app->add_option("--lr", t.lr, "learning rate (default 1e-3; with --schedule cosine the peak, ending at lr/10)")->check(range("--lr"));
    app->add_option("--schedule", t.schedule, "constant (default) | cosine: linear warm-up (--warmup), then a cosine down to lr/10");
    app->add_option("--warmup", t.warmup, "cosine schedule: warm-up updates (default 0)")->check(range("--warmup"));
    app->add_option("--clip", t.clip, "clip the global gradient norm to this (default 0: no clipping)")->check(range("--clip"));
    app->add_option("--weight-decay", t.weight_decay, "AdamW's decoupled weight decay (default 0.01)")->check(range("--weight-decay"));
    app->add_flag("--decay-all", decay_all, "weight decay on every parameter (the default)");
    app->add_flag("--decay-matrices", t.decay_matrices, "weight decay only on parameters of two or more dimensions");
    app->add_option("--beta2", t.beta2, "AdamW's second-moment decay (default 0.999)")->check(range("--beta2"));
    app->add_option("--dropout", t.dropout, "dropout probability (default: lm 0.1, recall 0)")->check(range("--dropout"));
  }

  void add_evaluation() {
    app->add_option("--eval-every", t.eval_every, "updates between evaluations (default 500)")->check(range("--eval-every"));
    app->add_option("--eval-batches", t.eval_batches, "batches per evaluation (default: lm 200 train and 200 val, recall a held-out set of 8)")->check(range("--eval-batches"));
    app->add_option("--fresh-batches", t.fresh_batches, "recall: fresh batches of the course's loss estimate at each evaluation (default 50)")->check(range("--fresh-batches"));
    app->add_option("--probe-batches", t.probe_batches, "recall: batches per number of pairs in the capacity probe (default 20)")->check(range("--probe-batches"));
    app->add_option("--extrap-batches", t.extrap_batches, "lm: batches per extrapolation context (0: no extrapolation)")->check(range("--extrap-batches"));
  }

  // The options as given, their enums parsed; the names of those given.
  void finish() {
    refuse_empty_paths(app, {{"--resume", &t.resume}, {"--save-batches", &t.save_batches}, {"--data", &t.data},
                             {"--out", &t.out}});
    t.device = parse_device(device);
    t.scan_form = lina::parse_scan_form(scan_form);
    t.feature_map = lina::parse_feature_map(feature_map);
    t.attention = lina::parse_fusion(attention, "--attention");
    t.conv = lina::parse_fusion(conv, "--conv");
    if (cuda_graph != "on" && cuda_graph != "off")
      throw lina::Error("unknown --cuda-graph '" + cuda_graph + "': use on or off");
    t.cuda_graph = cuda_graph == "on";
    for (const CLI::Option* opt : app->get_options())
      if (opt->count() > 0) t.given.push_back(opt->get_name());
    if (decay_all) {  // --decay-all is --decay-matrices set to false
      if (t.decay_matrices) throw lina::Error("--decay-all and --decay-matrices exclude each other");
      t.given.push_back("--decay-matrices");
    }
    if (const char* env = std::getenv("LINA_TRACE"); env && std::string(env) == "1") t.trace = true;
    if (t.resume.empty()) {
      if (app->count("--preset") == 0) throw lina::Error("--preset is required (or --resume CKPT)");
      if (app->count("--task") == 0) throw lina::Error("--task is required (or --resume CKPT)");
    }
  }

  int run() {
    finish();
    if (dry_run) {
      if (!t.resume.empty()) throw lina::Error("--dry-run names a new run: not with --resume");
      lina::validate(t);
      std::printf("%s\n", lina::run_path(t, ".json").c_str());
      return 0;
    }
    lina::TrainResult result = lina::train(t, &g_stop_signal);
    std::printf("wrote %s\n", result.json_path.c_str());
    if (int sig = g_stop_signal.load(); result.interrupted && sig != 0) {
      std::fprintf(stderr, "lina: stopped by %s at update %d; checkpoint %s and json written\n",
                   sig == SIGTERM ? "SIGTERM" : "SIGINT", result.updates_done,
                   lina::printable(result.checkpoint_path, 200).c_str());
      return 128 + sig;
    }
    return 0;
  }
};

struct EvalCommand {
  CLI::App* app = nullptr;
  std::string checkpoint, text, task = "lm", predictions;
  int context = 64, batches = 0;

  void add(CLI::App& lina_app) {
    app = lina_app.add_subcommand("eval", "lm: mean cross-entropy over a text file; recall: held-out accuracy and predictions");
    app->add_option("--checkpoint", checkpoint, "a checkpoint of the task")->required();
    app->add_option("--task", task, "lm (default) | recall");
    app->add_option("--text", text, "lm: text file");
    app->add_option("--context", context, "lm: window length")->check(range("--context"));
    app->add_option("--predictions", predictions, "recall: write a few held-out sequences and the answers here (json)");
    app->add_option("--batches", batches, "recall: held-out batches (default: the run's eval batches)")->check(range("--eval-batches"));
  }

  int run() {
    refuse_empty_paths(app, {{"--checkpoint", &checkpoint}, {"--text", &text}, {"--predictions", &predictions}});
    if (task == "recall") {
      if (app->count("--text") || app->count("--context"))
        throw lina::Error("--text and --context are for eval --task lm");
      lina::RecallEvalResult r = lina::eval_recall_checkpoint(checkpoint, predictions, batches);
      std::printf("recall held-out: %d sequences, loss %.6f, accuracy %.6f; wrote %s\n", r.sequences,
                  r.loss, r.accuracy, predictions.c_str());
      return 0;
    }
    if (task != "lm") throw lina::Error("unknown task '" + task + "': use lm or recall");
    if (text.empty()) throw lina::Error("eval --task lm needs --text FILE");
    if (app->count("--predictions") || app->count("--batches"))
      throw lina::Error("--predictions and --batches are for eval --task recall");
    std::printf("%.9f\n", lina::eval_checkpoint(checkpoint, text, context));
    return 0;
  }
};

struct SampleCommand {
  CLI::App* app = nullptr;
  std::string checkpoint, prompt;
  int tokens = 200;
  double temperature = 1.0;
  uint64_t seed = 1337;

  void add(CLI::App& lina_app) {
    app = lina_app.add_subcommand("sample", "generate text with the constant-state recurrent form");
    app->add_option("--checkpoint", checkpoint, "an lm checkpoint")->required();
    app->add_option("--prompt", prompt, "text to start from");
    app->add_option("--tokens", tokens, "characters to generate")->check(within(1, 1e6));
    app->add_option("--temperature", temperature, "sampling temperature (0: greedy)")->check(within(0, 100));
    app->add_option("--seed", seed, "sampling seed")->check(seed_range());
  }

  int run() {
    refuse_empty_paths(app, {{"--checkpoint", &checkpoint}});
    std::printf("%s%s\n", prompt.c_str(), lina::sample_checkpoint(checkpoint, prompt, tokens, temperature, seed).c_str());
    return 0;
  }
};

struct StateSizeCommand {
  CLI::App* app = nullptr;
  int64_t context = 4096;

  void add(CLI::App& lina_app) {
    app = lina_app.add_subcommand("state-size", "floats each preset keeps at a context length");
    app->add_option("--context", context, "context length")->check(within(1, 1e12));
  }

  int run() {
    std::printf("%s", lina::state_size_table(context).c_str());
    return 0;
  }
};

struct PresetsCommand {
  CLI::App* app = nullptr;

  void add(CLI::App& lina_app) {
    app = lina_app.add_subcommand("presets", "every preset, one line each: its name, course or survey, and its layers");
  }

  int run() {
    std::printf("%s", lina::preset_table().c_str());
    return 0;
  }
};

// `lina bench` and its hidden child, `lina bench-worker`, share their options.
struct BenchCommand {
  CLI::App* app = nullptr;
  CLI::App* worker = nullptr;
  lina::BenchOptions bo;
  std::string worker_job, worker_out;

  void add(CLI::App& lina_app) {
    app = lina_app.add_subcommand("bench", "time, FLOP rate and memory of every preset on this machine");
    worker = lina_app.add_subcommand("bench-worker", "internal: one child process of bench");
    worker->group("");  // hidden from --help
    for (CLI::App* sub : {app, worker}) {
      sub->add_option("--presets", bo.presets_arg, "comma-separated presets (default: all five)");
      sub->add_option("--shapes", bo.shapes_arg, "training shapes BATCHxCONTEXT (default: 64x64,16x256)");
      sub->add_option("--contexts", bo.contexts_arg, "inference contexts (default: 64,256,1024,4096)");
      sub->add_option("--steps", bo.steps, "timed training steps per shape (default 10; --quick 3)")->check(within(1, 1e4));
      sub->add_option("--warmup", bo.warmup, "untimed steps first (default 2; --quick 1)")->check(within(0, 1e4));
      sub->add_option("--infer-steps", bo.infer_steps, "timed tokens per inference context (default 8; --quick 3)")->check(within(1, 1e4));
      sub->add_option("--scan-chunk", bo.scan_chunk, "tokens per chunk of the chunked scan (default 0: the model's, 16)")->check(within(0, 4096));
      sub->add_flag("--profile", bo.profile, "time every kernel entry point (forward/backward) and count allocations");
      sub->add_option("--pairs", bo.pairs, "also time every preset against attn in one process, N pairs of alternating steps (default 0: off)")->check(within(0, 1e4));
    }
    app->add_flag("--products", bo.products, "also time each product of the profiled steps on lina's path and on OpenBLAS's own threads (implies --profile)");
    app->add_flag("--quick", bo.quick, "fewer steps and tokens, no inference context 4096, one round (at most 2 minutes)");
    app->add_option("--rounds", bo.rounds, "rounds over every preset and shape, the median kept (default 3; --quick 1)")->check(within(1, 100));
    app->add_option("--json", bo.json, "write the results to this json file");
    worker->add_option("--job", worker_job, "train | infer | pair")->required();
    worker->add_option("--out", worker_out, "result json")->required();
  }

  int run() {
    refuse_empty_paths(app, {{"--json", &bo.json}});
    lina::finish_bench_options(bo);
    if (*worker) lina::run_bench_worker(bo, worker_job, worker_out);
    else lina::run_bench(bo);
    return 0;
  }
};

// The teaching commands: one step of a tiny model (experiments/teach.h).
struct TeachCommands {
  CLI::App *teach = nullptr, *trace = nullptr, *graph = nullptr;
  lina::TeachOptions to;
  std::string scan_form = "sequential";

  void add(CLI::App& lina_app) {
    teach = lina_app.add_subcommand("teach", "one step of a tiny float64 model: a parameter's gradient from backward() beside a central finite difference");
    trace = lina_app.add_subcommand("trace", "every op of one training step of a tiny model, forward then backward, with names, shapes and norms");
    graph = lina_app.add_subcommand("graph", "the graph of one training step of a tiny model as Graphviz dot (and SVG when dot is installed)");
    for (CLI::App* sub : {teach, trace, graph}) {
      sub->add_option("--preset", to.preset, "preset or layer pattern (default gdn)");
      sub->add_option("--layers", to.layers, "use the first N layers of the preset (default 1)")->check(within(1, 64));
      sub->add_option("--batch", to.batch, "sequences (default 2)")->check(within(1, 64));
      sub->add_option("--context", to.context, "tokens per sequence (default 8)")->check(within(1, 512));
      sub->add_option("--scan-form", scan_form, "sequential (default) | chunked");
      sub->add_option("--seed", to.seed, "seed of the weights and the random batch")->check(seed_range());
    }
    teach->add_option("--param", to.param, "parameter to check (default blocks.0.mix.b_proj.bias)");
    teach->add_option("--elements", to.elements, "how many of its elements (default 8, evenly spread)")->check(within(1, 1e6));
    teach->add_option("--step", to.step, "h of the central difference (default 1e-4)")->check(within(1e-12, 1));
    graph->add_option("--out", to.out, "dot file to write (default graph.dot; the SVG goes beside it)");
  }

  bool parsed() const { return *teach || *trace || *graph; }

  int run() {
    refuse_empty_paths(graph, {{"--out", &to.out}});
    to.scan_form = lina::parse_scan_form(scan_form);
    if (*teach) return lina::teach_gradient(to) ? 0 : 1;
    if (*trace) lina::trace_one_step(to);
    else std::printf("%s\n", lina::write_graph(to).c_str());
    return 0;
  }
};

}  // namespace

int main(int argc, char** argv) {
  // Installed first, so a Ctrl-C at any moment of a training run is handled;
  // the other subcommands put the default back.
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  CLI::App app{"lina: linear-attention experiments on a from-scratch C++ engine"};
  app.require_subcommand(1);
  TrainCommand train;
  EvalCommand eval;
  SampleCommand sample;
  StateSizeCommand state_size;
  PresetsCommand presets;
  BenchCommand bench;
  TeachCommands teach;
  train.add(app);
  eval.add(app);
  sample.add(app);
  state_size.add(app);
  presets.add(app);
  bench.add(app);
  teach.add(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "lina: error: %s (see lina --help)\n", lina::printable(e.what(), 1000).c_str());
    return 2;
  }

  if (!*train.app) {
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
  }
  try {
    if (*train.app) return train.run();
    if (*eval.app) return eval.run();
    if (*sample.app) return sample.run();
    if (*state_size.app) return state_size.run();
    if (*presets.app) return presets.run();
    if (teach.parsed()) return teach.run();
    if (*bench.app || *bench.worker) return bench.run();
  } catch (const std::exception& e) {
    // One line, whatever bytes a file put into the message.
    std::fprintf(stderr, "lina: error: %s\n", lina::printable(e.what(), 1000).c_str());
    return 1;
  }
  return 0;
}
