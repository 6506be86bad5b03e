// CUDA optimiser kernels (float32): the AdamW step and the in-place scale,
// the GPU twins of backend_cpu/optim.cpp. One element per thread in a
// grid-stride loop; the per-element maths is in backend_cuda/optim_device.h.
#include "backend_cuda/cuda_context.h"
#include "backend_cuda/cuda_kernels.h"
#include "backend_cuda/optim_device.h"

namespace lina::cuda {

__global__ void adamw_kernel(AdamWArgs args) {
  for (int64_t i = first_index(); i < args.n; i += index_stride()) adamw_thread(i, args);
}

__global__ void clip_to_norm_kernel(float* x, int64_t n, const double* sum_of_squares, double max_norm) {
  for (int64_t i = first_index(); i < n; i += index_stride())
    clip_to_norm_thread(i, x, sum_of_squares, max_norm);
}

__global__ void scale_inplace_kernel(float* x, int64_t n, float factor) {
  for (int64_t i = first_index(); i < n; i += index_stride()) scale_thread(i, x, factor);
}

void adamw_step(float* p, const float* g, float* m, float* v, const float* decay_mask, int64_t n,
                float lr, float beta1, float beta2, float eps, float weight_decay,
                float bias_correction1, float bias_correction2) {
  if (n == 0) return;
  AdamWArgs args = make_adamw_args(p, g, m, v, decay_mask, n, lr, beta1, beta2, eps, weight_decay,
                                   bias_correction1, bias_correction2);
  LINA_LAUNCH(adamw_kernel, blocks_for(n), kThreads, 0, context().stream)(args);
  LINA_CHECK_LAUNCH("cuda::adamw_step");
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
