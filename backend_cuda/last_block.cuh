// The last block of a launch, for sums that two launches used to take: each
// block writes its partial sums, then counts itself in on a device counter;
// the one block that brings the count to gridDim.x is the last to finish,
// sees every other block's writes, and adds the partials up — in a fixed
// order that does not depend on which block came last, so every run gives
// the same bits. (The pattern of CUDA's threadFenceReduction sample.)
//
//   ... each block writes partial[...]
//   if (!last_block_done(context_counter)) return;
//   ... this block adds partial[...] in order
//
// The counter (Context::blocks_done) is 0 between launches: atomicInc wraps
// it to 0 as the last block counts itself in. One counter serves every
// kernel, as the launches on lina's one stream never overlap. Included by
// .cu files only.
#pragma once
#include "backend_cuda/cuda_context.h"

namespace lina::cuda {

// True in exactly one block of the launch, the last to call it; every thread
// of every block must call it (after its last write of a partial).
__device__ inline bool last_block_done(unsigned* blocks_done) {
  __shared__ bool last;
  __threadfence();  // this thread's partials are visible device-wide ...
  __syncthreads();  // ... for every thread of the block, before the count
  if (threadIdx.x == 0) last = atomicInc(blocks_done, gridDim.x - 1) == gridDim.x - 1;
  __syncthreads();
  return last;
}

}  // namespace lina::cuda
