// Matrix products on cuBLAS (cublasSgemmStridedBatched).
//
// lina stores matrices row-major, cuBLAS reads them column-major. A
// row-major R×C buffer read column-major is the C×R transpose, so the
// row-major product C = op(A)·op(B) is computed as the column-major product
//   Cᵀ = op(B)ᵀ · op(A)ᵀ      (N×M = (N×K)·(K×M))
// with B passed first. The transpose flags carry over unchanged: a row-major
// B (K×N, not transposed) read column-major already is op(B)ᵀ (N×K, OP_N,
// leading dimension N); a transposed one (stored N×K) needs OP_T with
// leading dimension K. Likewise for A with M and K. A batch stride of 0
// reuses one matrix for every batch entry.
#include <climits>
#include <string>

#include "backend_cuda/cuda_context.h"
#include "backend_cuda/cuda_kernels.h"
#include "backend_cuda/kernels_device.h"
#include "core/error.h"

namespace lina::cuda {

__global__ void scale_batched_kernel(float* c, int64_t total, int64_t mn, int64_t stride_c,
                                     float beta) {
  for (int64_t i = first_index(); i < total; i += index_stride())
    scale_batched_thread(i, c, mn, stride_c, beta);
}

void gemm(int64_t batch, int64_t M, int64_t N, int64_t K, const float* a, bool ta, int64_t stride_a,
          const float* b, bool tb, int64_t stride_b, float* c, int64_t stride_c, float alpha,
          float beta) {
  if (batch == 0 || M == 0 || N == 0) return;
  Context& ctx = context();
  if (K == 0) {  // empty sum: C = beta·C
    int64_t total = batch * M * N;
    LINA_LAUNCH(scale_batched_kernel, blocks_for(total), kThreads, 0, ctx.stream)(c, total, M * N,
                                                                          stride_c, beta);
    LINA_CHECK_LAUNCH("cuda::gemm (K = 0)");
    return;
  }
  check(batch <= INT_MAX && M <= INT_MAX && N <= INT_MAX && K <= INT_MAX,
        "cuda::gemm: dimensions [" + std::to_string(batch) + ", " + std::to_string(M) + ", " +
            std::to_string(N) + ", " + std::to_string(K) + "] exceed cuBLAS's int range");
  cublasOperation_t op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  int ld_b = int(tb ? K : N);
  int ld_a = int(ta ? M : K);
  cublasStatus_t status = cublasSgemmStridedBatched(
      ctx.cublas, op_b, op_a, int(N), int(M), int(K), &alpha,  //
      b, ld_b, stride_b,                                       // first operand: op(B)ᵀ, N×K
      a, ld_a, stride_a,                                       // second operand: op(A)ᵀ, K×M
      &beta, c, int(N), stride_c, int(batch));                 // Cᵀ, N×M
  if (status != CUBLAS_STATUS_SUCCESS)
    LINA_CUBLAS_CHECK(status, "cuda::gemm [" + std::to_string(batch) + " × " + std::to_string(M) + "×" +
                             std::to_string(K) + " · " + std::to_string(K) + "×" +
                             std::to_string(N) + "]");
  LINA_CHECK_LAUNCH("cuda::gemm");
}

}  // namespace lina::cuda
