#include "experiments/teach.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "core/atomic_file.h"
#include "autograd/trace.h"
#include "models/model.h"

extern char** environ;

namespace lina {

namespace {

constexpr int kVocab = 65;  // the lm task's: a random batch of characters

void check_sizes(const TeachOptions& o) {
  check(o.layers >= 1, "--layers must be at least 1, got " + std::to_string(o.layers));
  check(o.batch >= 1 && o.batch <= 64, "--batch must be in 1..64, got " + std::to_string(o.batch));
  check(o.context >= 1 && o.context <= 512,
        "--context must be in 1..512, got " + std::to_string(o.context));
}

ModelConfig tiny_config(const TeachOptions& o) {
  ModelConfig c = make_config(o.preset, kVocab);
  check(o.layers <= c.n_layer(), "--layers " + std::to_string(o.layers) + ": preset " + o.preset +
                                     " has only " + std::to_string(c.n_layer()) + " layers");
  c.layers.resize(size_t(o.layers));
  c.scan_form = o.scan_form;
  return c;
}

// A batch of random characters and random targets, int32 [batch, context].
struct RandomBatch {
  Tensor ids, targets;
};
RandomBatch random_batch(const TeachOptions& o) {
  Rng rng(o.seed + 1);
  std::vector<int32_t> ids, targets;
  for (int i = 0; i < o.batch * o.context; ++i) ids.push_back(int32_t(rng.randint(kVocab)));
  for (int i = 0; i < o.batch * o.context; ++i) targets.push_back(int32_t(rng.randint(kVocab)));
  Shape shape{o.batch, o.context};
  return {Tensor::from_vector(ids, shape), Tensor::from_vector(targets, shape)};
}

Var loss_of(LanguageModel& model, const RandomBatch& b) {
  return named(cross_entropy(model.forward(b.ids), b.targets), "loss");
}

// `dot` on the PATH, or "".
std::string find_dot() {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string candidate = dirs.substr(start, end - start) + "/dot";
    if (end > start && access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

// Runs `dot -Tsvg in -o out`; true when it succeeded.
bool render_svg(const std::string& dot, const std::string& in, const std::string& out) {
  std::vector<std::string> args{dot, "-Tsvg", in, "-o", out};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, dot.c_str(), nullptr, nullptr, argv.data(), environ) != 0) return false;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

void validate(const TeachOptions& o) {
  check_sizes(o);
  tiny_config(o);
}

// ---- lina teach -----------------------------------------------------------------------------

bool teach_gradient(const TeachOptions& o) {
  validate(o);
  check(o.elements >= 1, "--elements must be at least 1");
  check(o.step > 0 && o.step < 1, "--step must be in (0, 1)");
  LanguageModel model(tiny_config(o), o.seed, DType::F64);
  check(model.params().has(o.param), "unknown --param '" + o.param + "'; this model has " + [&] {
    std::string names;
    for (const Parameter& p : model.params().parameters()) names += (names.empty() ? "" : ", ") + p.name;
    return names;
  }());
  const RandomBatch batch = random_batch(o);

  // One step: forward, then the hand-written backward of every op.
  model.params().zero_grad();
  Var loss = loss_of(model, batch);
  loss.backward();
  Var p = model.params().get(o.param);
  const std::vector<double> grad = p.grad().to_vector<double>();

  std::printf("lina teach: %s, %d layer%s, batch %d, context %d, float64, %s scan, seed %llu\n",
              o.preset.c_str(), o.layers, o.layers == 1 ? "" : "s", o.batch, o.context,
              scan_form_name(o.scan_form), (unsigned long long)o.seed);
  std::printf("loss L = %.12f (cross-entropy of random targets; ln %d = %.4f)\n", loss.item(), kVocab,
              std::log(double(kVocab)));
  std::printf("parameter %s %s: dL/dp from backward() beside (L(p + h) - L(p - h)) / 2h, h = %g\n",
              o.param.c_str(), shape_str(p.shape()).c_str(), o.step);
  std::printf("  %8s  %22s  %22s  %14s\n", "element", "backward", "finite difference",
              "relative error");

  // Central differences, one element at a time, without recording a graph.
  NoGradGuard no_graph;
  double* values = p.data().data<double>();
  const int64_t n = p.data().numel();
  const int count = int(std::min<int64_t>(o.elements, n));
  double worst = 0;
  for (int j = 0; j < count; ++j) {
    const int64_t i = int64_t(j) * n / count;  // spread over the tensor
    const double saved = values[i];
    values[i] = saved + o.step;
    const double up = loss_of(model, batch).item();
    values[i] = saved - o.step;
    const double down = loss_of(model, batch).item();
    values[i] = saved;
    const double numeric = (up - down) / (2 * o.step);
    const double scale = std::max(std::fabs(grad[size_t(i)]), std::fabs(numeric));
    const double rel = scale > 0 ? std::fabs(grad[size_t(i)] - numeric) / scale : 0.0;
    worst = std::max(worst, rel);
    std::printf("  %8lld  %22.14e  %22.14e  %14.2e\n", (long long)i, grad[size_t(i)], numeric, rel);
  }
  const bool agree = worst <= kTeachPassMark;
  std::printf("largest relative error %.2e: %s (pass mark %g)\n", worst,
              agree ? "they agree" : "THEY DISAGREE", kTeachPassMark);
  return agree;
}

// ---- lina trace -----------------------------------------------------------------------------

void trace_one_step(const TeachOptions& o) {
  validate(o);
  LanguageModel model(tiny_config(o), o.seed);
  const RandomBatch batch = random_batch(o);
  model.params().zero_grad();
  std::printf("lina trace: %s, %d layer%s, batch %d, context %d, %s scan: every op of one step\n",
              o.preset.c_str(), o.layers, o.layers == 1 ? "" : "s", o.batch, o.context,
              scan_form_name(o.scan_form));
  std::fflush(stdout);
  trace::Scope tracing(true, stdout);
  loss_of(model, batch).backward();
}

// ---- lina graph -----------------------------------------------------------------------------

std::string write_graph(const TeachOptions& o) {
  validate(o);
  LanguageModel model(tiny_config(o), o.seed);
  const RandomBatch batch = random_batch(o);
  model.params().zero_grad();
  Var loss = loss_of(model, batch);
  loss.backward();
  write_file_atomically(o.out, graph_dot(loss), "graph");
  std::string message = "wrote " + o.out;
  const std::string dot = find_dot();
  if (dot.empty()) return message + " (install graphviz to render it: dot -Tsvg " + o.out + ")";
  const std::string svg = std::filesystem::path(o.out).replace_extension(".svg").string();
  check(render_svg(dot, o.out, svg), "dot could not render " + o.out + " to " + svg);
  return message + " and " + svg;
}

}  // namespace lina
