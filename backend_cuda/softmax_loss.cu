// Softmax, log-softmax, cross-entropy, embedding and argmax CUDA kernels,
// float32. Row kernels are block kernels launched with launch_block_kernel;
// the rest are grid-stride loops. All per-thread and per-phase work is in
// backend_cuda/softmax_loss_device.h.
#include <cstddef>

#include "backend_cuda/block_kernel.cuh"
#include "backend_cuda/cuda_context.h"
#include "backend_cuda/cuda_kernels.h"
#include "backend_cuda/softmax_loss_device.h"

namespace lina::cuda {

namespace {

// Device scratch memory, freed when the scope ends. The pool is stream-ordered,
// so the free waits for the kernels already queued on the stream.
class DeviceScratch {
 public:
  explicit DeviceScratch(size_t bytes) : ptr_(alloc(bytes)) {}
  ~DeviceScratch() { free(ptr_); }
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  template <class T> T* as() const { return static_cast<T*>(ptr_); }

 private:
  void* ptr_;
};

// ---- grid-stride kernels ------------------------------------------------------------

__global__ void cross_entropy_backward_kernel(const float* probs, const int32_t* targets,
                                              const float* mask, const float* scale,
                                              float* dlogits, int64_t n, int64_t V) {
  for (int64_t i = first_index(); i < n; i += index_stride())
    cross_entropy_backward_thread(i, probs, targets, mask, scale, dlogits, V);
}

__global__ void embedding_forward_kernel(const float* weight, const int32_t* ids, float* out,
                                         int64_t n, int64_t C) {
  for (int64_t i = first_index(); i < n; i += index_stride())
    embedding_forward_thread(i, weight, ids, out, C);
}

__global__ void embedding_backward_kernel(const float* dy, const int32_t* ids, float* dweight,
                                          int64_t n, int64_t N, int64_t C) {
  for (int64_t i = first_index(); i < n; i += index_stride())
    embedding_backward_thread(i, dy, ids, dweight, N, C);
}

}  // namespace

// ---- launchers ------------------------------------------------------------------------

void softmax_forward(const float* x, float* y, int64_t R, int64_t N, int64_t Tq, bool causal) {
  launch_block_kernel<SoftmaxForwardKernel>({x, y, R, N, Tq, causal}, "cuda::softmax_forward");
}

void softmax_backward(const float* y, const float* dy, float* dx, int64_t R, int64_t N) {
  launch_block_kernel<SoftmaxBackwardKernel>({y, dy, dx, R, N}, "cuda::softmax_backward");
}

void log_softmax_forward(const float* x, float* y, int64_t R, int64_t N) {
  launch_block_kernel<LogSoftmaxForwardKernel>({x, y, R, N}, "cuda::log_softmax_forward");
}

void log_softmax_backward(const float* y, const float* dy, float* dx, int64_t R, int64_t N) {
  launch_block_kernel<LogSoftmaxBackwardKernel>({y, dy, dx, R, N}, "cuda::log_softmax_backward");
}

// Per-row nll into a scratch buffer, then one block adds it in a fixed order.
void cross_entropy_forward(const float* logits, const int32_t* targets, const float* mask,
                           float* probs, float* loss, int64_t R, int64_t V) {
  DeviceScratch row_nll(sizeof(double) * size_t(R > 0 ? R : 1));  // [R]
  launch_block_kernel<CrossEntropyRowsKernel>(
      {logits, targets, mask, probs, row_nll.as<double>(), R, V}, "cuda::cross_entropy_forward");
  launch_block_kernel<CrossEntropyTotalKernel>({row_nll.as<double>(), mask, loss, R},
                                               "cuda::cross_entropy_forward (total)");
}

// dloss / count into a one-float scratch, then one thread per element of dlogits.
void cross_entropy_backward(const float* probs, const int32_t* targets, const float* mask,
                            const float* dloss, float* dlogits, int64_t R, int64_t V) {
  int64_t n = R * V;
  if (n == 0) return;
  DeviceScratch scale(sizeof(float));  // [1]
  launch_block_kernel<CrossEntropyScaleKernel>({mask, dloss, scale.as<float>(), R},
                                               "cuda::cross_entropy_backward (scale)");
  cross_entropy_backward_kernel<<<blocks_for(n), kThreads, 0, context().stream>>>(
      probs, targets, mask, scale.as<float>(), dlogits, n, V);
  LINA_CHECK_LAUNCH("cuda::cross_entropy_backward");
}

void embedding_forward(const float* weight, const int32_t* ids, float* out, int64_t N, int64_t C) {
  int64_t n = N * C;
  if (n == 0) return;
  embedding_forward_kernel<<<blocks_for(n), kThreads, 0, context().stream>>>(weight, ids, out, n, C);
  LINA_CHECK_LAUNCH("cuda::embedding_forward");
}

void embedding_backward(const float* dy, const int32_t* ids, float* dweight, int64_t N, int64_t V,
                        int64_t C) {
  int64_t n = V * C;
  if (n == 0) return;
  embedding_backward_kernel<<<blocks_for(n), kThreads, 0, context().stream>>>(dy, ids, dweight, n,
                                                                              N, C);
  LINA_CHECK_LAUNCH("cuda::embedding_backward");
}

void argmax_rows(const float* x, int32_t* out, int64_t R, int64_t N) {
  launch_block_kernel<ArgmaxRowsKernel>({x, out, R, N}, "cuda::argmax_rows");
}

}  // namespace lina::cuda
