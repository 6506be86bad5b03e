// The trace of one training step (`LINA_TRACE=1 lina train ...`,
// `lina train --trace`, `lina trace`): every op as the forward records it,
// then every op as backward reaches it, one line each:
//
//   forward     1  embedding       tok_emb                    float32[2, 8, 128]   |out|  2.26e-01
//   ...
//   forward    52  cross_entropy   loss                       float32[]            |out|  4.17e+00
//   backward   52  cross_entropy   loss                       float32[]            |grad| 1.00e+00
//   ...
//   backward    1  embedding       tok_emb                    float32[2, 8, 128]   |grad| 3.02e-02
//
// The number is the op's place in the forward. Backward runs the ops newest
// first, so its lines are the forward's in reverse, each with the norm of
// the whole gradient that reached the op's output (the same shape as the
// output). Names are those the model gave its tensors (named(), var.h).
//
// Off, tracing costs one test of a bool per op in the forward and in the
// backward; on, it keeps every recorded Var alive until stop().
#pragma once
#include <cstdio>

#include "autograd/var.h"

namespace lina::trace {

namespace detail {
extern bool g_active;
}
inline bool active() { return detail::g_active; }

// Starts a trace on this thread's ops: the forward lines are printed to
// `out` when backward() begins (the model names its tensors after they are
// recorded), the backward lines as each op runs.
void start(std::FILE* out = stdout);
// Ends the trace (the graph is no longer held).
void stop();

// While one lives, a trace is on (nothing when `on` is false).
class Scope {
 public:
  explicit Scope(bool on, std::FILE* out = stdout) : on_(on) {
    if (on_) start(out);
  }
  ~Scope() {
    if (on_) stop();
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  bool on_;
};

// The hooks autograd calls when active() (autograd/var.cpp).
void on_record(const Var& out);
void on_backward_start();
void on_backward_op(const VarImpl& v, const Tensor& grad);

}  // namespace lina::trace
