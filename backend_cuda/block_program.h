// Block programs: the code of one thread block written as what the block
// does, step after step, each step a parallel loop over work items. Used
// where a kernel is a long sequence of dependent steps with loops between
// them (the scan: tokens, chunks, a triangular solve), which the fixed
// phases of block_kernel.h cannot express.
//
// A block program is a struct with
//   struct Args {...};                       // passed by value (< 4 KB)
//   static constexpr int kThreads = N;       // threads per block on the GPU
//   static LINA_HD int64_t blocks(const Args&);            // work items of the grid
//   static LINA_HD int64_t shared_floats(const Args&);     // shared memory per block
//   static LINA_HD int64_t workspace_floats(const Args&);  // global scratch per block
//   static LINA_HD void run(const Args&, const Block& block);
//
// Inside run(), block.each(n, f) calls f(i) for every item i < n. On the GPU
// thread t takes items t, t + kThreads, … and a __syncthreads() follows, so
// the next each() sees everything this one wrote. On the host
// (run_block_program_on_host) the items run one after the other.
//
// The rules that make the two agree:
//   - everything outside each() is the same in every thread: loop bounds and
//     scalars computed from args only (every thread must reach every each());
//   - an item writes only its own outputs, and reads nothing that another
//     item of the same each() writes; the emulator can run items in reverse
//     order to catch a read that depends on the order;
//   - what outlives an each() is kept in block.shared or block.workspace,
//     never in a variable captured by the lambda.
// No CUDA headers here: the file must compile under g++ alone.
#pragma once
#include <cstdint>
#include <limits>
#include <vector>

#include "core/elementwise_math.h"  // LINA_HD

namespace lina::cuda {

struct Block {
  int64_t index = 0;           // which work item of the grid this block runs
  float* shared = nullptr;     // shared_floats(args) floats, on-chip
  float* workspace = nullptr;  // workspace_floats(args) floats of global memory, this block's own
  bool reverse_items = false;  // host emulator only: run each()'s items last to first

  template <class F> LINA_HD void each(int64_t n, F&& item) const {
#ifdef __CUDA_ARCH__
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) item(i);
    __syncthreads();
#else
    if (reverse_items)
      for (int64_t i = n - 1; i >= 0; --i) item(i);
    else
      for (int64_t i = 0; i < n; ++i) item(i);
#endif
  }
};

enum class ItemOrder { Forward, Reverse };

// The host emulator: every block one after the other. Shared memory starts
// as NaN in every block (on the GPU it holds whatever was there), so a read
// of shared memory no item wrote shows up as NaN in the outputs.
template <class Program>
void run_block_program_on_host(const typename Program::Args& args,
                               ItemOrder order = ItemOrder::Forward) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> shared(size_t(Program::shared_floats(args)));
  std::vector<float> workspace(size_t(Program::workspace_floats(args)), nan);
  for (int64_t b = 0; b < Program::blocks(args); ++b) {
    shared.assign(shared.size(), nan);
    Block block{b, shared.data(), workspace.data(), order == ItemOrder::Reverse};
    Program::run(args, block);
  }
}

}  // namespace lina::cuda
