// The reference CUDA causal attention (float32), the GPU twin of
// backend_cpu/attention.cpp: one thread per query row for the forward and for
// dscores / dq, one thread per key row for dk / dv, everything read from
// global memory. The per-thread work is in backend_cuda/attention_device.h.
// Simple rather than fast: the tiled kernels (attention.cu) are the ones
// lina runs, and tests/cuda/test_attention.cpp compares them against these;
// attention.cu also falls back to them for head sizes its tiles do not hold.
#include "backend_cuda/attention_device.h"
#include "backend_cuda/cuda_context.h"
#include "backend_cuda/cuda_kernels.h"

namespace lina::cuda {

namespace {

__global__ void attention_forward_reference_kernel(AttentionShape s, const float* q, const float* k,
                                                   const float* v, float* lse, float* out, int64_t rows) {
  for (int64_t r = first_index(); r < rows; r += index_stride())
    attention_forward_thread(r, s, q, k, v, lse, out);
}

__global__ void attention_backward_reference_query_kernel(AttentionShape s, const float* q, const float* k,
                                                          const float* v, const float* lse, const float* dout,
                                                          float* dscores, float* dq, int64_t rows) {
  for (int64_t r = first_index(); r < rows; r += index_stride())
    attention_backward_query_thread(r, s, q, k, v, lse, dout, dscores, dq);
}

__global__ void attention_backward_reference_key_kernel(AttentionShape s, const float* q, const float* k,
                                                        const float* lse, const float* dout,
                                                        const float* dscores, float* dk, float* dv, int64_t rows) {
  for (int64_t r = first_index(); r < rows; r += index_stride())
    attention_backward_key_thread(r, s, q, k, lse, dout, dscores, dk, dv);
}

}  // namespace

void attention_forward_reference(const AttentionShape& s, const float* q, const float* k, const float* v,
                                 float* lse, float* out) {
  const int64_t rows = s.B * s.H * s.Tq;
  if (rows == 0) return;
  LINA_LAUNCH(attention_forward_reference_kernel, blocks_for(rows), kThreads, 0, context().stream)(s, q, k, v, lse,
                                                                                                  out, rows);
  LINA_CHECK_LAUNCH("cuda::attention_forward_reference");
}

void attention_backward_reference(const AttentionShape& s, const float* q, const float* k, const float* v,
                                  const float* lse, const float* dout, float* dscores, float* dq,
                                  float* dk, float* dv) {
  const int64_t query_rows = s.B * s.H * s.Tq, key_rows = s.B * s.Hkv * s.Tk;
  cudaStream_t stream = context().stream;
  if (query_rows > 0) {
    LINA_LAUNCH(attention_backward_reference_query_kernel, blocks_for(query_rows), kThreads, 0, stream)(
        s, q, k, v, lse, dout, dscores, dq, query_rows);
    LINA_CHECK_LAUNCH("cuda::attention_backward_reference (dscores, dq)");
  }
  if (key_rows > 0) {  // after the first kernel on the same stream: reads its dscores
    LINA_LAUNCH(attention_backward_reference_key_kernel, blocks_for(key_rows), kThreads, 0, stream)(
        s, q, k, lse, dout, dscores, dk, dv, key_rows);
    LINA_CHECK_LAUNCH("cuda::attention_backward_reference (dk, dv)");
  }
}

}  // namespace lina::cuda
