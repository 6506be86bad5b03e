#include "autograd/trace.h"

#include <cmath>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "dispatch/dispatch.h"

namespace lina::trace {

namespace detail {
bool g_active = false;
}

namespace {

struct Recorded {
  std::shared_ptr<VarImpl> out;  // kept alive so that its name can be printed later
  double norm = 0;               // ‖output‖, taken when it was recorded
};

struct Trace {
  std::FILE* out = stdout;
  std::vector<Recorded> forward;                   // in the order the ops ran
  std::unordered_map<const VarImpl*, int> number;  // output -> 1-based place in `forward`
  bool forward_printed = false;
};

std::unique_ptr<Trace> g_trace;  // while a trace is on

void print_line(const char* phase, int number, const VarImpl& v, const Shape& shape,
                const char* norm_label, double norm) {
  std::string dtype_shape = std::string(dtype_name(v.data.dtype())) + shape_str(shape);
  std::fprintf(g_trace->out, "%-9s %4d  %-15s %-26s %-20s %-6s %.2e\n", phase, number,
               v.grad_fn->name(), *display_name(v) ? display_name(v) : "-", dtype_shape.c_str(),
               norm_label, norm);
}

}  // namespace

void start(std::FILE* out) {
  stop();
  g_trace = std::make_unique<Trace>();
  g_trace->out = out;
  detail::g_active = true;
}

void stop() {
  detail::g_active = false;
  g_trace.reset();
}

void on_record(const Var& out) {
  if (!g_trace || !out.grad_fn()) return;
  double norm = std::sqrt(dispatch::sum_squares(out.data()));
  g_trace->forward.push_back({out.impl_ptr(), norm});
  g_trace->number[out.impl()] = int(g_trace->forward.size());
}

void on_backward_start() {
  if (!g_trace || g_trace->forward_printed) return;
  g_trace->forward_printed = true;
  for (size_t i = 0; i < g_trace->forward.size(); ++i) {
    const VarImpl& v = *g_trace->forward[i].out;
    print_line("forward", int(i + 1), v, v.data.shape(), "|out|", g_trace->forward[i].norm);
  }
  std::fflush(g_trace->out);  // in order with a debugger's output, and kept if the run is killed
}

void on_backward_op(const VarImpl& v, const Tensor& grad) {
  if (!g_trace) return;
  auto it = g_trace->number.find(&v);
  int number = it == g_trace->number.end() ? 0 : it->second;  // 0: recorded before the trace began
  if (!grad.defined()) {  // no gradient reached this op's output
    print_line("backward", number, v, v.data.shape(), "|grad|", 0.0);
    return;
  }
  print_line("backward", number, v, grad.shape(), "|grad|", std::sqrt(dispatch::sum_squares(grad)));
  std::fflush(g_trace->out);
}

}  // namespace lina::trace
