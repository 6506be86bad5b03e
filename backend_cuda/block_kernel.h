// Kernels whose threads cooperate (a row's sum, a row's maximum), written so
// that the same code runs on the GPU and, phase by phase, on the host in the
// tests.
//
// A block kernel is a struct with
//   using Args = ...;     // passed by value to the kernel (< 4 KB)
//   struct Shared {...};  // the block's shared memory, explicit
//   static constexpr int kPhases = N;
//   LINA_HD static void phase(int p, const Args& args, Shared& shared,
//                             int64_t block, int thread);
//   LINA_HD static int64_t blocks(const Args& args);  // work items (rows, ...)
// Phase p of every thread of a block runs before phase p + 1 of any thread
// of it: on the GPU a __syncthreads() separates them; the host emulator
// (run_block_kernel_on_host) runs phase 0 for threads 0 … kThreads − 1, then
// phase 1, and so on. A thread keeps nothing in local variables from one
// phase to the next: what must survive goes into Shared. No warp shuffles:
// lanes exchange values through Shared.
//
// Threads per block: kThreads (backend_cuda/kernels_device.h).
#pragma once
#include <cstdint>

#include "backend_cuda/kernels_device.h"

namespace lina::cuda {

// Σ over the block of shared.partial[0 .. kThreads), by halving: phase
// `first + s` adds the upper half of the live range into the lower half
// (s = 0 … kReducePhases − 1); afterwards partial[0] holds the total.
// Use from a kernel's phase():  if (p >= first && p < first + kReducePhases)
//   reduce_step(p - first, shared.partial, thread, Add{}).
constexpr int log2_of(int n) { return n <= 1 ? 0 : 1 + log2_of(n / 2); }
constexpr int kReducePhases = log2_of(kThreads);

struct AddOp {
  template <class T> LINA_HD T operator()(T a, T b) const { return a + b; }
};
struct MaxOp {
  template <class T> LINA_HD T operator()(T a, T b) const { return a > b ? a : b; }
};

template <class T, class Op>
LINA_HD void reduce_step(int step, T* partial, int thread, Op op) {
  int half = kThreads >> (step + 1);
  if (thread < half) partial[thread] = op(partial[thread], partial[thread + half]);
}

// The host emulator: every block, phase by phase, thread by thread.
template <class Kernel>
void run_block_kernel_on_host(const typename Kernel::Args& args) {
  typename Kernel::Shared shared{};
  for (int64_t block = 0; block < Kernel::blocks(args); ++block)
    for (int p = 0; p < Kernel::kPhases; ++p)
      for (int thread = 0; thread < kThreads; ++thread) Kernel::phase(p, args, shared, block, thread);
}

}  // namespace lina::cuda
