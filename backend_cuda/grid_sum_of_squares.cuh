// Σ x² over a whole tensor in one launch, for sum_squares (layout.cu) and
// the update plan's end_update (optim.cu). Each thread squares a
// grid-strided share in double; each block writes the total of its
// threads' shares to block_totals[blockIdx.x]; the last block to finish
// (last_block.cuh) adds the block totals in a fixed order, with no
// floating-point atomics, so the same input gives the same bits on every
// run. Blocks of kThreads threads, at most kMaxReductionBlocks of them (the
// size of Context::reduction_scratch). Included by .cu files only.
#pragma once
#include "backend_cuda/cuda_context.h"
#include "backend_cuda/kernels_device.h"
#include "backend_cuda/last_block.cuh"

namespace lina::cuda {

// Σ value over the block (blockDim.x = kThreads, a power of two), by halving
// in shared memory; every thread gets the total.
template <class T> __device__ T block_sum(T* partial, T value) {
  partial[threadIdx.x] = value;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (int(threadIdx.x) < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  T total = partial[0];
  __syncthreads();  // all have read partial[0] before the caller reuses it
  return total;
}

// True in the launch's last block only, whose every thread then holds
// total = Σ x² over x [n]. Every thread of every block calls it.
__device__ inline bool grid_sum_of_squares(const float* x, int64_t n, double* block_totals,
                                           unsigned* blocks_done, double& total) {
  __shared__ double partial[kThreads];
  const double block = block_sum(partial, sum_squares_partial(first_index(), index_stride(), x, n));
  if (threadIdx.x == 0) block_totals[blockIdx.x] = block;
  if (!last_block_done(blocks_done)) return false;
  double s = 0.0;
  for (unsigned b = threadIdx.x; b < gridDim.x; b += kThreads) s += block_totals[b];
  total = block_sum(partial, s);
  return true;
}

// Blocks for a Σ x² over n elements: at least one, at most kMaxReductionBlocks
// (whose threads then loop).
inline unsigned sum_of_squares_blocks(int64_t n) {
  const unsigned blocks = n == 0 ? 1u : blocks_for(n);
  return blocks > unsigned(kMaxReductionBlocks) ? unsigned(kMaxReductionBlocks) : blocks;
}

}  // namespace lina::cuda
