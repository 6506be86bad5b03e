// Block programs: the code of one thread block written as what the block
// does, step after step, each step a parallel loop over work items. Used
// where a kernel is a long sequence of dependent steps with loops between
// them (the scan: tokens, chunks, a triangular solve).
//
// A block program is a struct with
//   struct Args {...};                       // passed by value (< 4 KB)
//   static constexpr int kThreads = N;       // threads per block on the GPU
//   static LINA_HD int64_t blocks(const Args&);            // work items of the grid
//   static LINA_HD int64_t shared_floats(const Args&);     // shared memory per block
//   static LINA_HD int64_t workspace_floats(const Args&);  // global scratch per block
//   static LINA_HD void run(const Args&, const Block& block);
//
// Inside run(), block.each(n, f) calls f(i) for every item i < n: thread t
// takes items t, t + kThreads, … and a __syncthreads() follows, so the next
// each() sees everything this one wrote.
//
// The rules that make it correct:
//   - everything outside each() is the same in every thread: loop bounds and
//     scalars computed from args only (every thread must reach every each(),
//     or the barrier waits for ever: the simulator reports it);
//   - an item writes only its own outputs, and reads nothing that another
//     item of the same each() writes (the simulator runs threads in forward,
//     reverse and shuffled order, so a read that depends on the order shows);
//   - what outlives an each() is kept in block.shared or block.workspace,
//     never in a variable captured by the lambda.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/elementwise_math.h"  // LINA_HD

namespace lina::cuda {

struct Block {
  int64_t index = 0;           // which work item of the grid this block runs
  float* shared = nullptr;     // shared_floats(args) floats, on-chip
  float* workspace = nullptr;  // workspace_floats(args) floats of global memory, this block's own

  template <class F> LINA_HD void each(int64_t n, F&& item) const {
#if defined(__CUDA_ARCH__) || !defined(__CUDACC__)  // device code (nvcc) or the simulator (g++)
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) item(i);
    __syncthreads();
#endif
  }
};

}  // namespace lina::cuda
