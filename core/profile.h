// Optional per-kernel profiling: time spent in each backend entry point.
//
// Every kernel entry point goes through dispatch::detail::on_backend
// (dispatch/backends.h) with its op name, and Tensor::full's fill (core/tensor.cpp)
// through profile::timed as "fill". When profiling is on, that call is
// timed and added to a table keyed by (op name, phase); when it is off, the
// cost is one test of a global bool. The phase is Forward unless autograd's
// backward walk (Var::backward) or the caller (an optimiser step) set it.
//
//   profile::set_enabled(true);
//   ... training steps ...
//   for (const profile::Entry& e : profile::entries()) ...  // sorted, slowest first
//
// Only the outermost entry point of nested calls is timed, so the totals do
// not count a kernel twice. An entry point may also name a detail (a
// DetailScope around its call): the table then keeps one row per detail, so
// the products of different shapes (dispatch::gemm names each "MxNxK") show
// apart. CUDA calls are timed on the host (asynchronous
// launches are not waited for).
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace lina::profile {

enum class Phase { Forward, Backward, Optimizer };
const char* phase_name(Phase p);  // "forward", "backward", "optimizer"

// The switch. A plain global (read on every kernel call): set it from the
// main thread between steps, not while kernels run.
extern bool g_enabled;
inline bool enabled() { return g_enabled; }
void set_enabled(bool on);

Phase phase();
// Sets the phase for its lifetime and restores the previous one.
class PhaseScope {
 public:
  explicit PhaseScope(Phase p);
  ~PhaseScope();
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  Phase previous_;
};

// Gives the entry points called on this thread during its lifetime the
// detail `text` (copied when a call ends). Nested scopes: the innermost wins.
class DetailScope {
 public:
  explicit DetailScope(const std::string& text);
  ~DetailScope();
  DetailScope(const DetailScope&) = delete;
  DetailScope& operator=(const DetailScope&) = delete;

 private:
  const std::string* previous_;
};

struct Entry {
  std::string op;
  std::string detail;  // "" unless the call named one (DetailScope)
  Phase phase = Phase::Forward;
  int64_t calls = 0;
  double seconds = 0;
  double bytes = 0, flops = 0;  // summed over the calls that stated them (add_work); 0: not stated
};
std::vector<Entry> entries();  // sorted by seconds, largest first
void reset();                  // forgets every entry

// What the next call must cost at least, for `lina bench --profile`: the
// bytes of the tensors it reads and writes, each counted once, and its
// arithmetic (a multiply, an add, an exp: one each). An entry point states
// it just before its call; the next outermost call timed on this thread
// adds it to its entry. Off, or inside a call being timed, it does nothing.
void add_work(double bytes, double flops);

// Used by timed: the start of a call (returns false when an enclosing
// entry point is already being timed) and its end.
bool begin_call();
void end_call(const char* op, double seconds);

// Runs fn(), timed as the entry point `op` when profiling is on. Off, the
// cost is one predictable branch on a global bool.
template <class Fn>
void timed(const char* op, Fn&& fn) {
  if (!enabled()) {
    fn();
    return;
  }
  using Clock = std::chrono::steady_clock;
  bool outermost = begin_call();
  auto t0 = Clock::now();
  try {
    fn();
  } catch (...) {
    end_call(nullptr, 0);
    throw;
  }
  end_call(outermost ? op : nullptr, std::chrono::duration<double>(Clock::now() - t0).count());
}

}  // namespace lina::profile
