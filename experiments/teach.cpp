#include "experiments/teach.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "core/atomic_file.h"
#include "core/printable.h"
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

// A file that is removed when this goes out of scope (a temporary one).
struct RemovedAtEnd {
  std::string path;
  ~RemovedAtEnd() { std::remove(path.c_str()); }
};

// The first line of a file, cut to a printable length ("" when there is none).
std::string first_line_of(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return printable(line);
}

// Runs `dot -Tsvg in -o out` with its messages going to `messages`; "" when it
// succeeded, else why not (its exit, its first message).
std::string run_dot(const std::string& dot, const std::string& in, const std::string& out,
                    const std::string& messages) {
  std::vector<std::string> args{dot, "-Tsvg", in, "-o", out};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, STDERR_FILENO, messages.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, dot.c_str(), &files, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&files);
  if (spawned != 0) return std::string("cannot run it: ") + std::strerror(spawned);
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return "lost it (waitpid failed)";
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  const std::string how = WIFEXITED(status) ? "it exited " + std::to_string(WEXITSTATUS(status))
                                            : "it was killed by signal " + std::to_string(WTERMSIG(status));
  const std::string said = first_line_of(messages);
  return how + (said.empty() ? "" : ": " + said);
}

// Renders the dot file `in` to `svg` with `dot`: into a temporary file beside
// `svg`, renamed over it only when dot succeeded, so that a failure leaves the
// previous `svg` as it was and says why in one line (dot's own messages,
// often dozens of lines, are kept out of the terminal).
void render_svg(const std::string& dot, const std::string& in, const std::string& svg) {
  const RemovedAtEnd rendered{temporary_path_beside(svg)}, messages{temporary_path_beside(svg)};
  const std::string why = run_dot(dot, in, rendered.path, messages.path);
  check(why.empty(), "dot could not render the graph to " + svg + " (" + why + "); " + svg + " is unchanged");
  if (std::rename(rendered.path.c_str(), svg.c_str()) != 0) {
    const int error = errno;
    throw Error("cannot write " + svg + ": " + std::strerror(error));
  }
}

// (L(p + h) − L(p − h)) / 2h for the parameter element at `value`, which is
// left as it was.
double central_difference(LanguageModel& model, const RandomBatch& batch, double* value, double h) {
  const double saved = *value;
  *value = saved + h;
  const double up = loss_of(model, batch).item();
  *value = saved - h;
  const double down = loss_of(model, batch).item();
  *value = saved;
  return (up - down) / (2 * h);
}

}  // namespace

void validate(const TeachOptions& o) {
  check_sizes(o);
  tiny_config(o);
}

double gradient_relative_error(double backward, double numeric) {
  if (!std::isfinite(backward) || !std::isfinite(numeric)) return INFINITY;
  const double scale = std::max(std::fabs(backward), std::fabs(numeric));
  return scale > 0 ? std::fabs(backward - numeric) / scale : 0.0;
}

double largest_relative_error(const std::vector<double>& backward, const std::vector<double>& numeric) {
  check(backward.size() == numeric.size(), "largest_relative_error: the two lists differ in length");
  double worst = 0;
  for (size_t i = 0; i < backward.size(); ++i)
    worst = std::max(worst, gradient_relative_error(backward[i], numeric[i]));  // never a NaN
  return worst;
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
  const int64_t n = p.data().numel();
  const int count = int(std::min<int64_t>(o.elements, n));
  std::vector<double> backward, numeric;
  for (int j = 0; j < count; ++j) {
    const int64_t i = int64_t(j) * n / count;  // spread over the tensor
    backward.push_back(grad[size_t(i)]);
    numeric.push_back(central_difference(model, batch, p.data().data<double>() + i, o.step));
    std::printf("  %8lld  %22.14e  %22.14e  %14.2e\n", (long long)i, backward.back(), numeric.back(),
                gradient_relative_error(backward.back(), numeric.back()));
  }
  const double worst = largest_relative_error(backward, numeric);
  const bool agree = worst <= kTeachPassMark;  // false for +∞
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
  const std::string svg = std::filesystem::path(o.out).replace_extension(".svg").string();
  const std::string dot = find_dot();
  if (svg == o.out) {  // --out g.svg: the dot text is only dot's input, in a temporary file
    check(!dot.empty(), "--out " + o.out + " asks for SVG, which needs graphviz's dot (apt-get install "
                        "graphviz); or give --out a .dot file");
    const RemovedAtEnd text{temporary_path_beside(svg)};
    write_file_atomically(text.path, graph_dot(loss), "graph");
    render_svg(dot, text.path, svg);
    return "wrote " + svg;
  }
  write_file_atomically(o.out, graph_dot(loss), "graph");
  const std::string message = "wrote " + o.out;
  if (dot.empty()) return message + " (install graphviz to render it: dot -Tsvg " + o.out + ")";
  render_svg(dot, o.out, svg);
  return message + " and " + svg;
}

}  // namespace lina
