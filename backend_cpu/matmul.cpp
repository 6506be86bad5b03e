// Matrix products on Eigen's GEMM. Raw row-major buffers are mapped (no
// copies); a transposed operand is a transposed map, which Eigen's GEMM reads
// directly. One large product uses Eigen's own OpenMP threads; a batch of
// small ones is spread over threads, one product per thread, when the
// batch is large enough to pay for them.
#include <Eigen/Core>

#include "backend_cpu/cpu_kernels.h"
#include "backend_cpu/eigen_maps.h"
#include "backend_cpu/parallel.h"

namespace lina::cpu {


template <class T>
static void gemm_one(int64_t M, int64_t N, int64_t K, const T* a, bool ta, const T* b, bool tb,
                     T* c, T alpha, T beta) {
  // A is stored M×K (or K×M when ta), B is K×N (or N×K when tb).
  Eigen::Map<const RowMatrix<T>> A(a, ta ? K : M, ta ? M : K);
  Eigen::Map<const RowMatrix<T>> B(b, tb ? N : K, tb ? K : N);
  Eigen::Map<RowMatrix<T>> C(c, M, N);
  if (beta == T(0)) C.setZero();
  else if (beta != T(1)) C *= beta;
  if (!ta && !tb) C.noalias() += alpha * A * B;
  else if (ta && !tb) C.noalias() += alpha * A.transpose() * B;
  else if (!ta && tb) C.noalias() += alpha * A * B.transpose();
  else C.noalias() += alpha * A.transpose() * B.transpose();
}

template <class T>
void gemm(int64_t batch, int64_t M, int64_t N, int64_t K, const T* a, bool ta, int64_t stride_a,
          const T* b, bool tb, int64_t stride_b, T* c, int64_t stride_c, T alpha, T beta) {
  if (batch == 1) {
    gemm_one(M, N, K, a, ta, b, tb, c, alpha, beta);
    return;
  }
  // Threads only for a batch with enough work: below about a million
  // multiply-adds (a generation step's attention, say) waking the second
  // thread costs more than it saves.
  [[maybe_unused]] const bool threaded = batch * M * N * K >= 32 * kParallelMin;  // read by the pragma
#pragma omp parallel for schedule(static) if (threaded)
  for (int64_t i = 0; i < batch; ++i)
    gemm_one(M, N, K, a + i * stride_a, ta, b + i * stride_b, tb, c + i * stride_c, alpha, beta);
}

template void gemm<float>(int64_t, int64_t, int64_t, int64_t, const float*, bool, int64_t,
                          const float*, bool, int64_t, float*, int64_t, float, float);
template void gemm<double>(int64_t, int64_t, int64_t, int64_t, const double*, bool, int64_t,
                           const double*, bool, int64_t, double*, int64_t, double, double);

}  // namespace lina::cpu
