// The GPU side of backend_cuda/block_program.h: one __global__ template runs
// any block program, each block taking work items (blocks(args) of them) in a
// grid-stride loop, with dynamic shared memory and a slice of one global
// workspace per resident block. Included by .cu files only.
#pragma once
#include <algorithm>

#include "backend_cuda/block_program.h"
#include "backend_cuda/cuda_context.h"
#include "backend_cuda/cuda_kernels.h"
#include "core/error.h"

namespace lina::cuda {

template <class Program>
__global__ void __launch_bounds__(Program::kThreads)
    block_program_kernel(typename Program::Args args, float* workspace) {
  LINA_DYNAMIC_SHARED(float, dynamic_shared);
  const int64_t items = Program::blocks(args);
  Block block;
  block.shared = dynamic_shared;
  block.workspace = workspace + int64_t(blockIdx.x) * Program::workspace_floats(args);
  for (int64_t b = blockIdx.x; b < items; b += gridDim.x) {
    block.index = b;
    Program::run(args, block);
  }
}

// Launches Program on the context's stream; `name` names it in errors. The
// workspace comes from the stream-ordered pool and goes back to it after the
// launch (the pool reuses it only after the kernel has finished).
template <class Program>
void launch_block_program(const typename Program::Args& args, const char* name) {
  const int64_t items = Program::blocks(args);
  if (items <= 0) return;
  const int64_t grid = std::min<int64_t>(items, int64_t(1) << 16);
  const size_t shared_bytes = size_t(Program::shared_floats(args)) * sizeof(float);
  if (shared_bytes > 48 * 1024)  // above the default limit a kernel must ask for it
    LINA_CUDA_CHECK(cudaFuncSetAttribute(block_program_kernel<Program>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         int(shared_bytes)),
                    std::string(name) + ": shared memory of " + std::to_string(shared_bytes) + " bytes");
  const size_t workspace_bytes = size_t(grid * Program::workspace_floats(args)) * sizeof(float);
  float* workspace = workspace_bytes ? static_cast<float*>(alloc(workspace_bytes)) : nullptr;
  LINA_LAUNCH(block_program_kernel<Program>, unsigned(grid), Program::kThreads, shared_bytes, context().stream)(args, workspace);
  LINA_CHECK_LAUNCH(name);
  if (workspace) free(workspace);
}

}  // namespace lina::cuda
