// Layout and reduction CUDA kernels: the strided copy behind permute, expand,
// slice, concat and sum_to (deterministic: one thread owns each destination
// element, see kernels_device.h); the middle-axis sum; the sum of squares. The
// per-thread work is in backend_cuda/kernels_device.h.
#include <string>

#include "backend_cuda/cuda_context.h"
#include "backend_cuda/cuda_kernels.h"
#include "backend_cuda/grid_sum_of_squares.cuh"
#include "backend_cuda/kernels_device.h"
#include "core/error.h"

namespace lina::cuda {

// ---- kernels ----------------------------------------------------------------------

// One thread per destination element (kept index k): it alone writes it.
__global__ void copy_strided_kernel(CopyStridedArgs args) {
  for (int64_t k = first_index(); k < args.kept_n; k += index_stride())
    copy_strided_thread(k, args);
}

// The chunked accumulate, pass 1: one thread per (chunk, destination
// element) writes that chunk's sum to partial [chunks, kept_n].
__global__ void copy_strided_chunk_kernel(CopyStridedArgs args, float* partial, int64_t count) {
  for (int64_t i = first_index(); i < count; i += index_stride())
    copy_strided_chunk_thread(i, args, partial);
}

// Pass 2: one thread per destination element adds its chunks in order.
__global__ void copy_strided_finish_kernel(CopyStridedArgs args, const float* partial,
                                           int64_t chunks) {
  for (int64_t k = first_index(); k < args.kept_n; k += index_stride())
    copy_strided_finish_thread(k, args, partial, chunks);
}

// One thread per column of out [outer, inner]: neighbouring threads read
// neighbouring elements along inner.
__global__ void sum_middle_column_kernel(const float* x, float* out, int64_t columns, int64_t n,
                                         int64_t inner, bool accumulate) {
  for (int64_t c = first_index(); c < columns; c += index_stride())
    sum_middle_column_thread(c, x, out, n, inner, accumulate);
}

// One block per column: the block's threads split the n summands (for a
// small inner, e.g. a sum over the last axis, one thread per column would
// run long serial loops).
__global__ void sum_middle_block_kernel(const float* x, float* out, int64_t columns, int64_t n,
                                        int64_t inner, bool accumulate) {
  __shared__ float partial[kThreads];
  for (int64_t c = blockIdx.x; c < columns; c += gridDim.x) {
    float total = block_sum(partial, sum_middle_partial(c, threadIdx.x, kThreads, x, n, inner));
    if (threadIdx.x == 0) out[c] = accumulate ? out[c] + total : total;
  }
}

// *out = Σ x², the last block's (grid_sum_of_squares.cuh).
__global__ void sum_squares_kernel(const float* x, int64_t n, double* block_totals, double* out,
                                   unsigned* blocks_done) {
  double total = 0.0;
  if (grid_sum_of_squares(x, n, block_totals, blocks_done, total) && threadIdx.x == 0) *out = total;
}

// ---- launchers ----------------------------------------------------------------------

void copy_strided(const float* src, const int64_t* src_strides, float* dst,
                  const int64_t* dst_strides, const int64_t* shape, int ndim, bool accumulate) {
  check(ndim <= kMaxDims, "cuda::copy_strided: " + std::to_string(ndim) +
                              " dimensions, at most " + std::to_string(kMaxDims) + " supported");
  CopyStridedArgs args =
      make_copy_strided_args(src, src_strides, dst, dst_strides, shape, ndim, accumulate);
  if (args.n == 0) return;
  cudaStream_t stream = context().stream;
  const int64_t chunks = copy_strided_chunks(args);
  if (chunks == 1) {
    LINA_LAUNCH(copy_strided_kernel, blocks_for(args.kept_n), kThreads, 0, stream)(args);
    LINA_CHECK_LAUNCH("cuda::copy_strided");
    return;
  }
  // Few destination elements, long sums: two passes through a scratch buffer.
  const int64_t count = chunks * args.kept_n;
  float* partial = static_cast<float*>(alloc(size_t(count) * sizeof(float)));  // [chunks, kept_n]
  LINA_LAUNCH(copy_strided_chunk_kernel, blocks_for(count), kThreads, 0, stream)(args, partial, count);
  LINA_LAUNCH(copy_strided_finish_kernel, blocks_for(args.kept_n), kThreads, 0, stream)(args, partial,
                                                                               chunks);
  lina::cuda::free(partial);  // stream-ordered: released after the two kernels ran
  LINA_CHECK_LAUNCH("cuda::copy_strided (chunked accumulate)");
}

void sum_middle(const float* x, float* out, int64_t outer, int64_t n, int64_t inner, bool accumulate) {
  int64_t columns = outer * inner;
  if (columns == 0) return;
  cudaStream_t stream = context().stream;
  if (inner >= 32 || n < 64) {
    LINA_LAUNCH(sum_middle_column_kernel, blocks_for(columns), kThreads, 0, stream)(x, out, columns, n,
                                                                           inner, accumulate);
  } else {
    const int64_t max_blocks = int64_t(1) << 20;
    unsigned blocks = unsigned(columns < max_blocks ? columns : max_blocks);
    LINA_LAUNCH(sum_middle_block_kernel, blocks, kThreads, 0, stream)(x, out, columns, n, inner, accumulate);
  }
  LINA_CHECK_LAUNCH("cuda::sum_middle");
}

// *out (device memory) = Σ x², in double; nothing is read back here.
void sum_squares(const float* x, int64_t n, double* out) {
  Context& ctx = context();
  if (n == 0) {
    LINA_CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(double), ctx.stream), "cuda::sum_squares");
    return;
  }
  LINA_LAUNCH(sum_squares_kernel, sum_of_squares_blocks(n), kThreads, 0, ctx.stream)(
      x, n, ctx.reduction_scratch, out, ctx.blocks_done);
  LINA_CHECK_LAUNCH("cuda::sum_squares");
}

}  // namespace lina::cuda
