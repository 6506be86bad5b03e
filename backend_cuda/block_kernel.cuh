// The GPU side of backend_cuda/block_kernel.h: one __global__ template runs
// any block kernel, each block taking work items (blocks(args) of them) in
// a grid-stride loop, phases separated by __syncthreads(). Included by .cu
// files only.
#pragma once
#include <algorithm>

#include "backend_cuda/block_kernel.h"
#include "backend_cuda/cuda_context.h"

namespace lina::cuda {

template <class Kernel>
__global__ void block_kernel(typename Kernel::Args args) {
  __shared__ typename Kernel::Shared shared;
  const int64_t items = Kernel::blocks(args);
  for (int64_t block = blockIdx.x; block < items; block += gridDim.x) {
    for (int p = 0; p < Kernel::kPhases; ++p) {
      Kernel::phase(p, args, shared, block, int(threadIdx.x));
      __syncthreads();
    }
  }
}

// Launches Kernel on the context's stream; `name` names it in errors.
template <class Kernel>
void launch_block_kernel(const typename Kernel::Args& args, const char* name) {
  const int64_t items = Kernel::blocks(args);
  if (items <= 0) return;
  const unsigned grid = unsigned(std::min<int64_t>(items, int64_t(1) << 16));
  block_kernel<Kernel><<<grid, kThreads, 0, context().stream>>>(args);
  LINA_CHECK_LAUNCH(name);
}

}  // namespace lina::cuda
