// Row kernels, one warp per row: the 32 lanes of a warp split a row (lane l
// takes entries l, l + 32, …) and combine their partial results with
// butterfly shuffles (__shfl_xor_sync), after which every lane holds the
// row's total. The butterfly adds in the same order on every run and each
// step is commutative, so all lanes get the same bits, run after run. No
// shared memory, no __syncthreads, no atomics. Included by .cu files only.
//
// A block of kThreads threads holds kRowsPerBlock warps, so kRowsPerBlock
// rows; the grid strides over rows in steps of the whole grid's warps.
#pragma once
#include <cstdint>

#include "backend_cuda/cuda_context.h"

namespace lina::cuda {

constexpr int kWarp = 32;
constexpr unsigned kFullWarp = 0xffffffffu;
constexpr int kRowsPerBlock = kThreads / kWarp;

template <class T> __device__ inline T warp_sum(T v) {
  for (int lanes = kWarp / 2; lanes > 0; lanes /= 2) v += __shfl_xor_sync(kFullWarp, v, lanes);
  return v;
}

__device__ inline float warp_max(float v) {
  for (int lanes = kWarp / 2; lanes > 0; lanes /= 2) {
    const float other = __shfl_xor_sync(kFullWarp, v, lanes);
    v = other > v ? other : v;
  }
  return v;
}

__device__ inline int lane() { return int(threadIdx.x) % kWarp; }

// This warp's first row, and the step to its next one (the grid's warps).
__device__ inline int64_t first_row() { return int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp; }
__device__ inline int64_t row_stride() { return int64_t(gridDim.x) * kRowsPerBlock; }

// Blocks for `rows` rows, a warp each (the grid strides beyond 2^20 blocks).
inline unsigned row_blocks(int64_t rows) {
  const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  const int64_t max_blocks = int64_t(1) << 20;
  return unsigned(blocks < 1 ? 1 : blocks > max_blocks ? max_blocks : blocks);
}

// Σ over a whole block (kThreads threads, launched as one block): each
// warp's butterfly, then warp 0 adds the kRowsPerBlock warp totals. Thread 0
// returns the total (the others a partial). `partial` is shared memory of
// kRowsPerBlock entries.
template <class T> __device__ inline T block_total(T value, T* partial) {
  value = warp_sum(value);
  if (lane() == 0) partial[threadIdx.x / kWarp] = value;
  __syncthreads();
  T total = T(0);
  if (threadIdx.x < unsigned(kWarp)) {
    total = lane() < kRowsPerBlock ? partial[lane()] : T(0);
    total = warp_sum(total);
  }
  return total;
}

}  // namespace lina::cuda
