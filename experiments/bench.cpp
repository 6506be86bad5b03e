// `lina bench`: options, the child processes, the tables and the json.
#include "experiments/bench.h"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/atomic_file.h"
#include "core/error.h"
#include "experiments/bench_profile.h"
#include "experiments/machine.h"

namespace lina {

using nlohmann::json;

// ---- options --------------------------------------------------------------------

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
  return out;
}

// A whole positive decimal number, or nullopt-like -1.
long long parse_count(const std::string& s) {
  if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(s);
}

}  // namespace

void finish_bench_options(BenchOptions& o) {
  const std::vector<std::string> names = all_preset_names();
  for (const std::string& p : split(o.presets_arg)) o.presets.push_back(p);
  for (const std::string& item : split(o.shapes_arg)) {
    size_t x = item.find('x');
    long long b = x == std::string::npos ? -1 : parse_count(item.substr(0, x));
    long long t = x == std::string::npos ? -1 : parse_count(item.substr(x + 1));
    check(b > 0 && t > 0, "--shapes: '" + item + "' is not BATCHxCONTEXT (e.g. 64x64,16x256)");
    o.shapes.push_back({int(b), int(t)});
  }
  for (const std::string& item : split(o.contexts_arg)) {
    long long c = parse_count(item);
    check(c > 0, "--contexts: '" + item + "' is not a positive number");
    o.contexts.push_back(int(c));
  }
  if (o.presets.empty()) o.presets = preset_names();
  for (const std::string& p : o.presets)
    check(std::find(names.begin(), names.end(), p) != names.end(),
          "--presets: unknown preset '" + p + "': use " + preset_list(", "));
  // --quick keeps both training shapes but takes 3 timed steps after 1
  // warm-up step (not 10 after 2), 3 timed tokens per context (not 8), and
  // drops inference context 4096.
  if (o.shapes.empty()) o.shapes = {{64, 64}, {16, 256}};
  if (o.contexts.empty())
    o.contexts = o.quick ? std::vector<int>{64, 256, 1024} : std::vector<int>{64, 256, 1024, 4096};
  if (o.steps < 0) o.steps = o.quick ? 3 : 10;
  if (o.warmup < 0) o.warmup = o.quick ? 1 : 2;
  if (o.infer_steps < 0) o.infer_steps = o.quick ? 3 : 8;
  if (o.rounds < 0) o.rounds = o.quick ? 1 : 3;
  if (o.products) o.profile = true;  // the products to time are the profile's
  check(o.rounds > 0, "--rounds must be positive, got " + std::to_string(o.rounds));
  check(o.warmup >= 0, "--warmup must not be negative");
  check(o.steps > 0, "--steps must be positive, got " + std::to_string(o.steps));
  check(o.scan_chunk >= 0, "--scan-chunk must be positive (or 0: the model's), got " + std::to_string(o.scan_chunk));
  check(o.pairs >= 0, "--pairs must not be negative, got " + std::to_string(o.pairs));
  check(o.pairs == 0 || std::find(o.presets.begin(), o.presets.end(), "attn") != o.presets.end(),
        "--pairs times every preset against attn: add attn to --presets");
  check(o.infer_steps > 0, "--infer-steps must be positive, got " + std::to_string(o.infer_steps));
  for (const BenchShape& s : o.shapes)
    check(s.batch > 0 && s.context > 0 && s.batch <= 4096 && s.context <= 16384,
          "--shapes: batch and context must be positive (at most 4096 and 16384)");
  for (int c : o.contexts)
    check(c > 0 && c <= 65536, "--contexts: each context must be in 1..65536, got " + std::to_string(c));
}

// ---- one child process per (preset, job) -------------------------------------------

namespace {

std::string shape_name(const BenchShape& s) {
  return std::to_string(s.batch) + "x" + std::to_string(s.context);
}

std::string join(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

// Runs `lina bench-worker <args>` as this same binary and returns its json.
json run_child(std::vector<std::string> args, const std::string& out, const std::string& what) {
  args.insert(args.begin(), {"lina", "bench-worker"});
  args.insert(args.end(), {"--out", out});
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = fork();
  check(pid >= 0, "bench: fork failed");
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);  // a killed bench leaves no child behind
    execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  int status = 0;
  check(waitpid(pid, &status, 0) == pid, "bench: waitpid failed");
  check(WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "bench: the child measuring " + what + " failed (" +
            (WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status)) : std::string("killed")) + ")");
  std::ifstream f(out);
  check(bool(f), "bench: the child measuring " + what + " wrote no result");
  return json::parse(f);
}

// A private scratch folder for the children's results, removed at the end.
struct Scratch {
  std::filesystem::path dir;
  Scratch() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "lina-bench-XXXXXX").string();
    check(mkdtemp(tmpl.data()) != nullptr, "bench: cannot create a temporary folder");
    dir = tmpl;
  }
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

// The 1-minute load average (/proc/loadavg), −1 where unknown: a bench on a
// busy machine measures the contention too, so the json records it.
double load_average() {
  std::ifstream f("/proc/loadavg");
  double load = -1;
  if (!(f >> load)) return -1;
  return load;
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

}  // namespace

// ---- the run -------------------------------------------------------------------------

namespace {

// One `lina bench`: its options, the children it starts, what it prints.
struct BenchRun {
  explicit BenchRun(const BenchOptions& options) : o(options) {}
  const BenchOptions& o;
  Scratch scratch;
  int children = 0;
  std::ostringstream out;  // every line printed, returned by run_bench

  void say(const std::string& line) {
    out << line << "\n";
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }
  // `lina bench-worker <args>`'s json, in a file of its own in the scratch folder.
  json child(const std::vector<std::string>& args, const std::string& what) {
    return run_child(args, (scratch.dir / (std::to_string(children++) + ".json")).string(), what);
  }
  // The arguments every training child shares.
  std::vector<std::string> scan_chunk_args() const {
    if (o.scan_chunk <= 0) return {};
    return {"--scan-chunk", std::to_string(o.scan_chunk)};
  }
};

std::string gemm_line(const GemmRate& g) {
  return "GEMM " + std::to_string(g.M) + "x" + std::to_string(g.K) + "x" + std::to_string(g.N) +
         " float32: lina dispatch::gemm " + fmt("%.1f", g.lina_gflops) + " GFLOP/s (" + fmt("%.1f", g.lina_ms) +
         " ms, a block per thread on " + g.lina_path + ")" +
         (g.eigen_gflops < 0 ? std::string() : "; the same blocks on Eigen " + fmt("%.1f", g.eigen_gflops) + " GFLOP/s") +
         "; OpenBLAS's own threads " +
         (g.openblas_gflops < 0 ? std::string("not installed")
                                : fmt("%.1f", g.openblas_gflops) + " GFLOP/s (" + fmt("%.1f", g.openblas_ms) +
                                      " ms, kernels for " + (g.openblas_core.empty() ? std::string("?") : g.openblas_core) +
                                      "); lina/OpenBLAS " + fmt("%.3f", g.lina_over_openblas) +
                                      " (median of pairs timed back to back)");
}

// The median of a (preset, shape)'s rounds (the lower middle one of an even
// count), whole, with every round's ms/step and the FLOP rates beside it.
json median_round(std::vector<json> rounds, const std::string& preset, const BenchShape& s, double gemm_gflops) {
  json all = json::array();
  for (const json& r : rounds) all.push_back(r["ms_per_step"]);
  std::sort(rounds.begin(), rounds.end(),
            [](const json& a, const json& b) { return double(a["ms_per_step"]) < double(b["ms_per_step"]); });
  json r = rounds[(rounds.size() - 1) / 2];
  r["ms_per_step_rounds"] = all;
  const double flops = model_flops_per_step(make_config(preset, 65), s.batch, s.context), ms = r["ms_per_step"];
  r["preset"] = preset;
  r["shape"] = shape_name(s);
  r["tokens_per_s"] = double(s.batch) * s.context / (ms / 1e3);
  r["model_flops_per_step"] = flops;
  r["model_gflops"] = flops / (ms * 1e6);
  r["fraction_of_gemm"] = flops / (ms * 1e6) / gemm_gflops;
  return r;
}

// Training: every preset and shape once per round, then each one's median round.
json training_rows(BenchRun& run, double gemm_gflops) {
  const BenchOptions& o = run.o;
  std::vector<std::vector<json>> rounds(o.presets.size() * o.shapes.size());  // [preset][shape] -> rounds
  for (int round = 0; round < o.rounds; ++round)
    for (size_t pi = 0; pi < o.presets.size(); ++pi)
      for (size_t si = 0; si < o.shapes.size(); ++si) {
        const std::string& p = o.presets[pi];
        const BenchShape& s = o.shapes[si];
        std::vector<std::string> args = {"--presets", p, "--job", "train", "--shapes", shape_name(s),
                                         "--steps", std::to_string(o.steps), "--warmup", std::to_string(o.warmup)};
        if (o.profile) args.push_back("--profile");
        for (const std::string& a : run.scan_chunk_args()) args.push_back(a);
        json r = run.child(args, p + " training at " + shape_name(s));
        std::fprintf(stderr, "  %s %s: %.1f ms/step%s\n", p.c_str(), shape_name(s).c_str(), double(r["ms_per_step"]),
                     o.rounds > 1 ? (" (round " + std::to_string(round + 1) + ")").c_str() : "");
        rounds[pi * o.shapes.size() + si].push_back(r);
      }
  json train = json::array();
  for (size_t pi = 0; pi < o.presets.size(); ++pi)
    for (size_t si = 0; si < o.shapes.size(); ++si)
      train.push_back(median_round(rounds[pi * o.shapes.size() + si], o.presets[pi], o.shapes[si], gemm_gflops));
  return train;
}

// --pairs: every other preset against attn, both in one child, steps alternating.
json paired_rows(BenchRun& run) {
  const BenchOptions& o = run.o;
  json paired = json::array();
  for (const std::string& p : o.pairs > 0 ? o.presets : std::vector<std::string>{})
    for (const BenchShape& s : o.shapes) {
      if (p == "attn") continue;
      std::vector<std::string> args = {"--presets", "attn," + p, "--job", "pair", "--shapes", shape_name(s),
                                       "--pairs", std::to_string(o.pairs), "--warmup", std::to_string(o.warmup)};
      for (const std::string& a : run.scan_chunk_args()) args.push_back(a);
      json r = run.child(args, p + " against attn at " + shape_name(s));
      r["preset"] = p;
      r["shape"] = shape_name(s);
      std::fprintf(stderr, "  %s/attn %s: %.3f (median of %d pairs)\n", p.c_str(), shape_name(s).c_str(),
                   double(r["ratio_median"]), o.pairs);
      paired.push_back(r);
    }
  return paired;
}

// Inference: every preset at every context, token by token.
json inference_rows(BenchRun& run) {
  const BenchOptions& o = run.o;
  json infer = json::array();
  for (const std::string& p : o.presets) {
    json r = run.child({"--presets", p, "--job", "infer", "--contexts", join(o.contexts), "--infer-steps",
                        std::to_string(o.infer_steps)},
                       p + " inference");
    for (json& row : r["contexts"]) {
      row["preset"] = p;
      row["peak_rss_mb"] = r["peak_rss_mb"];
      infer.push_back(row);
    }
  }
  return infer;
}

// Each training row's ratio to attn at the same shape (null without attn in
// --presets); returns gdn's, timed apart and (--pairs) in pairs.
json ratios_to_attn(json& train, const json& paired) {
  json ratios = json::object();
  for (json& r : train) {
    r["ratio_to_attn"] = nullptr;
    for (const json& a : train)
      if (a["preset"] == "attn" && a["shape"] == r["shape"])
        r["ratio_to_attn"] = double(r["ms_per_step"]) / double(a["ms_per_step"]);
    if (r["preset"] == "gdn" && !r["ratio_to_attn"].is_null())
      ratios["gdn_over_attn"][r["shape"].get<std::string>()] = r["ratio_to_attn"];
  }
  for (const json& r : paired)
    if (r["preset"] == "gdn") ratios["gdn_over_attn_paired"][r["shape"].get<std::string>()] = r["ratio_median"];
  return ratios;
}

void print_training(BenchRun& run, const json& train, const json& ratios, const json& paired) {
  const BenchOptions& o = run.o;
  char line[400];
  run.say("");
  run.say("Training step (random lm batches; median of " + std::to_string(o.steps) + " steps after " +
          std::to_string(o.warmup) + " warm-up" +
          (o.rounds > 1 ? "; the median of " + std::to_string(o.rounds) + " rounds over the presets" : std::string()) +
          ")");
  std::snprintf(line, sizeof line, "%-7s %-7s %9s %9s %8s %10s %8s %7s %7s %7s", "preset", "BxT", "ms/step",
                "tok/s", "peakMB", "GFLOP/step", "GFLOP/s", "%gemm", "/attn", "allocs");
  run.say(line);
  for (const json& r : train) {
    std::snprintf(line, sizeof line, "%-7s %-7s %9.1f %9.0f %8.0f %10.3f %8.2f %6.1f%% %7s %7.0f",
                  r["preset"].get<std::string>().c_str(), r["shape"].get<std::string>().c_str(),
                  double(r["ms_per_step"]), double(r["tokens_per_s"]), double(r["peak_rss_mb"]),
                  double(r["model_flops_per_step"]) / 1e9, double(r["model_gflops"]),
                  100 * double(r["fraction_of_gemm"]),
                  r["ratio_to_attn"].is_null() ? "-" : fmt("%.2f", double(r["ratio_to_attn"])).c_str(),
                  double(r["allocs_per_step"]));
    run.say(line);
  }
  const json gdn_over_attn = ratios.value("gdn_over_attn", json::object());
  for (auto& [shape, v] : gdn_over_attn.items()) run.say("gdn/attn at " + shape + ": " + fmt("%.2f", double(v)));
  if (paired.empty()) return;
  run.say("");
  run.say("Step time over attn's, both models in one process, " + std::to_string(o.pairs) +
          " pairs of alternating steps after " + std::to_string(o.warmup) + " warm-up each (--pairs)");
  std::snprintf(line, sizeof line, "%-7s %-7s %8s %8s %8s", "preset", "BxT", "median", "q1", "q3");
  run.say(line);
  for (const json& r : paired) {
    std::snprintf(line, sizeof line, "%-7s %-7s %8.3f %8.3f %8.3f", r["preset"].get<std::string>().c_str(),
                  r["shape"].get<std::string>().c_str(), double(r["ratio_median"]), double(r["ratio_q1"]),
                  double(r["ratio_q3"]));
    run.say(line);
  }
}

void print_inference(BenchRun& run, const json& infer) {
  char line[400];
  run.say("");
  run.say("Inference (batch 1, token by token with InferenceState; median of " + std::to_string(run.o.infer_steps) +
          " tokens at each context)");
  std::snprintf(line, sizeof line, "%-7s %8s %12s %14s %12s", "preset", "context", "ms/token", "floats/seq",
                "bytes/seq");
  run.say(line);
  for (const json& r : infer) {
    long long floats = r["kv_floats"].get<long long>() + r["state_floats"].get<long long>() +
                       r["conv_floats"].get<long long>();
    std::snprintf(line, sizeof line, "%-7s %8d %12.3f %14lld %12lld", r["preset"].get<std::string>().c_str(),
                  r["context"].get<int>(), double(r["ms_per_token"]), floats,
                  r["bytes_per_sequence"].get<long long>());
    run.say(line);
  }
}

// --profile: every kernel entry point of each training row, with its share
// and its limit on this machine (experiments/bench_profile.h).
void print_profiles(BenchRun& run, const json& train, double gemm_gflops, double memory_gbps) {
  for (const json& r : train) {
    run.say("");
    run.say("Profile " + r["preset"].get<std::string>() + " " + r["shape"].get<std::string>() + " (summed over " +
            std::to_string(run.o.steps) + " steps; allocations per step " + fmt("%.0f", double(r["allocs_per_step"])) +
            ", from the system " + fmt("%.1f", double(r["system_allocs_per_step"])) + ")");
    std::string table = profile_table(r, run.o.steps, gemm_gflops, memory_gbps);
    table.pop_back();  // say() ends the last line
    run.say(table);
  }
}

// --products: each matrix product of the profiled steps timed again on its
// own, lina's path (a block of C per thread, backend_cpu/matmul.cpp) against
// OpenBLAS's own threads on the whole product, and what each preset's step
// would spend in its products on either, or on the faster of the two for
// each product.
json product_rows(BenchRun& run, const json& train) {
  std::vector<std::string> shapes;
  for (const json& r : train)
    for (const json& e : r["profile"]["entries"])
      if (e["op"] == "matmul" && std::find(shapes.begin(), shapes.end(), e["detail"]) == shapes.end())
        shapes.push_back(e["detail"]);
  const std::vector<ProductTiming> timings = measure_products(shapes, run.o.quick ? 2 : 5);
  json out = {{"products", json::array()}, {"per_step", json::array()}};
  if (timings.empty()) {
    run.say("");
    run.say("products: not compared (lina's products do not run on OpenBLAS here)");
    return out;
  }
  run.say("");
  run.say("Products of the step, each timed on its own: lina's path (a block of C per thread) against OpenBLAS's");
  run.say("own threads on the whole product (medians of one call, alternating pairs; ratio > 1: lina's path faster)");
  char line[160];
  std::snprintf(line, sizeof line, "  %-34s %10s %12s %14s", "product", "lina ms", "OpenBLAS ms", "OpenBLAS/lina");
  run.say(line);
  for (const ProductTiming& t : timings) {
    std::snprintf(line, sizeof line, "  %-34s %10.2f %12.2f %14.3f", t.shape.c_str(), t.lina_ms, t.openblas_ms,
                  t.lina_over_openblas);
    run.say(line);
    out["products"].push_back({{"shape", t.shape}, {"lina_ms", t.lina_ms}, {"openblas_ms", t.openblas_ms},
                               {"lina_over_openblas", t.lina_over_openblas}});
  }
  for (const json& r : train) {
    double lina = 0, theirs = 0, faster = 0;
    for (const json& e : r["profile"]["entries"]) {
      if (e["op"] != "matmul") continue;
      const double calls = double(e["calls"]) / run.o.steps;
      for (const ProductTiming& t : timings)
        if (t.shape == e["detail"]) {
          lina += calls * t.lina_ms, theirs += calls * t.openblas_ms;
          faster += calls * std::min(t.lina_ms, t.openblas_ms);
        }
    }
    const std::string name = r["preset"].get<std::string>() + " " + r["shape"].get<std::string>();
    run.say("  " + name + ": its products " + fmt("%.1f", lina) + " ms a step on lina's path, " + fmt("%.1f", theirs) +
            " on OpenBLAS's threads, " + fmt("%.1f", faster) + " taking the faster for each");
    out["per_step"].push_back({{"preset", r["preset"]}, {"shape", r["shape"]}, {"lina_ms", lina},
                               {"openblas_ms", theirs}, {"faster_ms", faster}});
  }
  return out;
}

json gemm_json(const GemmRate& g) {
  auto or_null = [](double v) { return v < 0 ? json(nullptr) : json(v); };
  return {{"M", g.M}, {"K", g.K}, {"N", g.N}, {"dtype", "float32"}, {"lina_gflops", g.lina_gflops},
          {"lina_ms", g.lina_ms}, {"lina_path", g.lina_path}, {"eigen_gflops", or_null(g.eigen_gflops)},
          {"openblas", g.openblas_gflops < 0 ? "not installed" : "installed"},
          {"openblas_gflops", or_null(g.openblas_gflops)}, {"openblas_ms", or_null(g.openblas_ms)},
          {"lina_over_openblas", or_null(g.lina_over_openblas)}, {"openblas_core", g.openblas_core}};
}

}  // namespace

std::string run_bench(const BenchOptions& o) {
  auto t0 = std::chrono::steady_clock::now();
  BenchRun run(o);
  const double load_before = load_average();
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  if (load_before > 0.5 * cpus)
    run.say("note: load average " + fmt("%.2f", load_before) + " on " + std::to_string(cpus) +
            " CPUs before the run: other processes compete for the cores, and every timing includes it");
  // The machine's GEMM rate, through the same entry point the model uses.
  GemmRate g = measure_gemm(o.quick ? 3 : 5);
  run.say(gemm_line(g));
  // The memory rate, which the profile's limits read the bytes against.
  const MemoryRate memory = measure_memory_rate(o.quick ? 5 : 9);
  run.say("memory: dst += a·src over 2 x 64 MiB float32, " + fmt("%.1f", memory.gbps) + " GB/s (" +
          fmt("%.1f", memory.ms) + " ms for " + fmt("%.0f", double(memory.bytes) / 1048576.0) + " MiB moved)");

  json train = training_rows(run, g.lina_gflops);
  json paired = paired_rows(run);
  json infer = inference_rows(run);
  json ratios = ratios_to_attn(train, paired);
  print_training(run, train, ratios, paired);
  print_inference(run, infer);
  // the limits: the faster of lina's GEMM path and OpenBLAS's own threads
  if (o.profile) print_profiles(run, train, std::max(g.lina_gflops, g.openblas_gflops), memory.gbps);
  const json products = o.products ? product_rows(run, train) : json(nullptr);

  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double load_after = load_average();
  run.say("");
  run.say("wall time " + fmt("%.1f", wall) + " s; load average " + fmt("%.2f", load_before) + " before, " +
          fmt("%.2f", load_after) + " after, on " + std::to_string(std::thread::hardware_concurrency()) + " CPUs");
  if (!o.json.empty()) {
    std::vector<std::string> shapes;
    for (const BenchShape& s : o.shapes) shapes.push_back(shape_name(s));
    json doc = {{"schema", "lina-bench-1"}, {"quick", o.quick}, {"profile", o.profile}, {"products", products},
                {"scan_chunk", o.scan_chunk > 0 ? o.scan_chunk : ModelConfig().scan_chunk},
                {"steps", o.steps}, {"warmup", o.warmup}, {"infer_steps", o.infer_steps}, {"rounds", o.rounds},
                {"presets", o.presets}, {"shapes", shapes}, {"contexts", o.contexts},
                {"cpus", std::thread::hardware_concurrency()}, {"machine", machine_json()},
                {"load_average", {{"before", load_before}, {"after", load_after}}}, {"gemm", gemm_json(g)},
                {"memory", {{"bytes", memory.bytes}, {"ms", memory.ms}, {"gbps", memory.gbps}}},
                {"train", train}, {"inference", infer}, {"ratios", ratios}, {"pairs", o.pairs}, {"paired", paired},
                {"wall_seconds", wall}};
    write_file_atomically(o.json, doc.dump(1) + "\n", "bench --json");
    run.say("wrote " + o.json);
  }
  return run.out.str();
}

}  // namespace lina
