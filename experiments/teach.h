// The teaching commands of `lina`: each runs one training step of a tiny
// model (the first layers of a preset, a short random batch) and shows it.
//   lina teach  --param blocks.0.mix.b_proj.bias   backward's gradient beside a finite difference
//   lina trace                                       every op, forward then backward
//   lina graph  --out g.dot                          the step's graph as Graphviz dot (+ SVG)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "models/config.h"

namespace lina {

struct TeachOptions {
  std::string preset = "gdn";      // a preset or layer pattern; its first `layers` layers are used
  int layers = 1;
  int batch = 2;
  int context = 8;
  ScanForm scan_form = ScanForm::Sequential;  // the readable token-by-token recurrence, or chunked
  uint64_t seed = 1337;                  // the weights and the random batch
  // lina teach
  std::string param = "blocks.0.mix.b_proj.bias";  // the parameter to check
  int elements = 8;        // how many of its elements (evenly spread)
  double step = 1e-4;      // h of the central difference: rounding grows like ε·L/h, truncation like h²
  // lina graph
  std::string out = "graph.dot";
};

// The one-step model and batch the commands share are checked here: one
// lina::Error line for an unknown preset, a bad size or form.
void validate(const TeachOptions& options);

// lina teach: builds the tiny model in float64, runs forward and backward,
// and prints, for `param`, dL/dp from backward() beside the central
// difference (L(p + h) − L(p − h)) / 2h and their relative error. Returns
// true when every element agrees within kTeachPassMark.
constexpr double kTeachPassMark = 1e-5;
bool teach_gradient(const TeachOptions& options);

// |backward − numeric| / max(|backward|, |numeric|), 0 when both are 0, and
// +∞ when either is a NaN or an infinity: a gradient that is not a number
// never agrees.
double gradient_relative_error(double backward, double numeric);
// The largest gradient_relative_error of the pairs (backward[i], numeric[i]);
// +∞ when any pair holds a NaN or an infinity.
double largest_relative_error(const std::vector<double>& backward, const std::vector<double>& numeric);

// lina trace: the trace (autograd/trace.h) of one float32 step.
void trace_one_step(const TeachOptions& options);

// lina graph: writes graph_dot of one float32 step (after backward, so the
// gradient norms are on it) to options.out, and renders it to SVG beside it
// with Graphviz's `dot` when that is installed. Returns what was written,
// one line.
std::string write_graph(const TeachOptions& options);

}  // namespace lina
