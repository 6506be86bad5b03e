// CUDA optimiser kernels (float32): the AdamW update (clipping on the way),
// the in-place scale and the update plan's bookkeeping (with Σ g²), the
// GPU twins of backend_cpu/optim.cpp. One element per thread in a
// grid-stride loop; the per-element maths is in backend_cuda/optim_device.h.
#include "backend_cuda/cuda_context.h"
#include "backend_cuda/cuda_kernels.h"
#include "backend_cuda/grid_sum_of_squares.cuh"
#include "backend_cuda/optim_device.h"

namespace lina::cuda {

__global__ void adamw_kernel(AdamWArgs args) {
  if (args.control != nullptr && args.control[2] != 0) return;  // a refused update (end_update)
  const float clip = args.clip();
  for (int64_t i = first_index(); i < args.n; i += index_stride()) adamw_thread(i, args, clip);
}

__global__ void clip_to_norm_kernel(float* x, int64_t n, const double* sum_of_squares, double max_norm) {
  for (int64_t i = first_index(); i < n; i += index_stride())
    clip_to_norm_thread(i, x, sum_of_squares, max_norm);
}

__global__ void scale_inplace_kernel(float* x, int64_t n, float factor) {
  for (int64_t i = first_index(); i < n; i += index_stride()) scale_thread(i, x, factor);
}

void adamw_step(float* p, const float* g, float* m, float* v, const float* weight_decay_mask, int64_t n,
                float beta1, float beta2, float eps, const float* scalars, const int32_t* control,
                const double* sum_of_squares, double max_norm) {
  if (n == 0) return;
  AdamWArgs args{p, g, m, v, weight_decay_mask, n, beta1, beta2, eps, scalars, control, sum_of_squares, max_norm};
  LINA_LAUNCH(adamw_kernel, blocks_for(n), kThreads, 0, context().stream)(args);
  LINA_CHECK_LAUNCH("cuda::adamw_step");
}

// ---- the update plan (core/op_list.h) ----

// Slot s's rows of the window into the update's buffers; a grid-stride loop
// over the longest row.
__global__ void begin_update_kernel(const float* scalar_table, float* scalars, const int32_t* ids_table,
                                    int32_t* ids, int64_t ids_per_row, const float* mask_table, float* mask,
                                    int64_t mask_per_row, const int32_t* control) {
  const int64_t s = control[0];
  for (int64_t i = first_index(); i < ids_per_row; i += index_stride()) ids[i] = ids_table[s * ids_per_row + i];
  if (mask != nullptr)
    for (int64_t i = first_index(); i < mask_per_row; i += index_stride()) mask[i] = mask_table[s * mask_per_row + i];
  if (first_index() < 3) scalars[first_index()] = scalar_table[3 * s + first_index()];
}

// x − x is 0 for every finite x, NaN for NaN and ±inf (one spelling for
// nvcc and for the simulator's g++).
__device__ inline bool is_finite(double x) { return x - x == 0.0; }

// Σ g² by the whole launch (grid_sum_of_squares.cuh); then one thread of
// the last block: the log entry, the refusal, the next update.
__global__ void end_update_kernel(const float* loss, const float* grad, int64_t n, double* block_totals,
                                  unsigned* blocks_done, double* sum_of_squares, double* log, int32_t* control) {
  double total = 0.0;
  if (!grid_sum_of_squares(grad, n, block_totals, blocks_done, total) || threadIdx.x != 0) return;
  *sum_of_squares = total;
  const int64_t s = control[0];
  log[2 * s] = double(*loss);
  log[2 * s + 1] = total;
  if (control[2] == 0 && !(is_finite(log[2 * s]) && is_finite(log[2 * s + 1]))) control[2] = control[1] + 1;
  control[0] += 1;
  control[1] += 1;
}

void begin_update(const float* scalar_table, float* scalars, const int32_t* ids_table, int32_t* ids,
                  int64_t ids_per_row, const float* mask_table, float* mask, int64_t mask_per_row,
                  const int32_t* control) {
  const int64_t longest = ids_per_row > mask_per_row ? ids_per_row : mask_per_row;
  LINA_LAUNCH(begin_update_kernel, blocks_for(longest), kThreads, 0, context().stream)(
      scalar_table, scalars, ids_table, ids, ids_per_row, mask_table, mask, mask_per_row, control);
  LINA_CHECK_LAUNCH("cuda::begin_update");
}

void end_update(const float* loss, const float* grad, int64_t n, double* sum_of_squares, double* log,
                int32_t* control) {
  Context& ctx = context();
  LINA_LAUNCH(end_update_kernel, sum_of_squares_blocks(n), kThreads, 0, ctx.stream)(
      loss, grad, n, ctx.reduction_scratch, ctx.blocks_done, sum_of_squares, log, control);
  LINA_CHECK_LAUNCH("cuda::end_update");
}

void scale_inplace(float* x, int64_t n, float factor) {
  if (n == 0) return;
  LINA_LAUNCH(scale_inplace_kernel, blocks_for(n), kThreads, 0, context().stream)(x, n, factor);
  LINA_CHECK_LAUNCH("cuda::scale_inplace");
}

void clip_to_norm(float* x, int64_t n, const double* sum_of_squares, double max_norm) {
  if (n == 0) return;
  LINA_LAUNCH(clip_to_norm_kernel, blocks_for(n), kThreads, 0, context().stream)(x, n, sum_of_squares, max_norm);
  LINA_CHECK_LAUNCH("cuda::clip_to_norm");
}

}  // namespace lina::cuda
