// Matrix products on Eigen's GEMM, or for float on OpenBLAS's when the
// machine has it (backend_cpu/openblas.h). Raw row-major buffers are mapped
// (no copies); a transposed operand is a transposed map, which Eigen's GEMM
// reads directly (OpenBLAS takes the same buffers with a transpose flag).
// One large product is cut into one block of C per thread, each block one
// single-threaded GEMM; a batch of small ones is spread over threads, one
// product per thread, when the batch is large enough to pay for them.
#include <Eigen/Core>
#include <algorithm>
#include <type_traits>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "backend_cpu/cpu_kernels.h"
#include "backend_cpu/eigen_maps.h"
#include "backend_cpu/openblas.h"
#include "backend_cpu/parallel.h"

namespace lina::cpu {

// C += alpha · A' B' on blocks: A is the stored block of A (transposed when
// ta), B likewise.
template <class CBlock, class ABlock, class BBlock, class T>
static void add_product(CBlock&& C, const ABlock& A, bool ta, const BBlock& B, bool tb, T alpha) {
  if (!ta && !tb) C.noalias() += alpha * A * B;
  else if (ta && !tb) C.noalias() += alpha * A.transpose() * B;
  else if (!ta && tb) C.noalias() += alpha * A * B.transpose();
  else C.noalias() += alpha * A.transpose() * B.transpose();
}

// Rows [m0, m0 + m) and columns [n0, n0 + n) of C = alpha A'B' + beta C.
template <class T>
static void gemm_block(const Eigen::Map<const RowMatrix<T>>& A, bool ta,
                       const Eigen::Map<const RowMatrix<T>>& B, bool tb, Eigen::Map<RowMatrix<T>>& C,
                       int64_t m0, int64_t m, int64_t n0, int64_t n, T alpha, T beta) {
  const int64_t K = ta ? A.rows() : A.cols();
  if constexpr (std::is_same_v<T, float>) {
    if (cpu_gemm() == CpuGemm::OpenBlas) {  // the same block through cblas_sgemm
      const int64_t lda = A.cols(), ldb = B.cols(), ldc = C.cols();
      const float* Ab = ta ? A.data() + m0 : A.data() + m0 * lda;  // first row of A' in the block
      const float* Bb = tb ? B.data() + n0 * ldb : B.data() + n0;  // first column of B'
      openblas()->sgemm(kCblasRowMajor, ta ? kCblasTrans : kCblasNoTrans,
                        tb ? kCblasTrans : kCblasNoTrans, int(m), int(n), int(K), alpha, Ab,
                        int(lda), Bb, int(ldb), beta, C.data() + m0 * ldc + n0, int(ldc));
      return;
    }
  }
  auto Cb = C.block(m0, n0, m, n);
  if (beta == T(0)) Cb.setZero();
  else if (beta != T(1)) Cb *= beta;
  // rows m0.. of A' are rows of A, or columns of A when it is stored transposed
  auto Ab = ta ? A.block(0, m0, K, m) : A.block(m0, 0, m, K);
  auto Bb = tb ? B.block(n0, 0, n, K) : B.block(0, n0, K, n);
  add_product(Cb, Ab, ta, Bb, tb, alpha);
}

// Products of at least this many multiply-adds are cut into one block per
// thread: on the model's shapes (4096×128 by 128×128, the MLP's, the weight
// gradients) two single-threaded GEMMs on halves of C ran 8–34 % faster
// than Eigen's own two threads on the whole of it, all but the MLP-up
// weight gradient (5 % slower; results/bench/gemm-split/).
constexpr int64_t kSplitMin = 32 * kParallelMin;

template <class T>
static void gemm_one(int64_t M, int64_t N, int64_t K, const T* a, bool ta, const T* b, bool tb,
                     T* c, T alpha, T beta) {
  // A is stored M×K (or K×M when ta), B is K×N (or N×K when tb).
  Eigen::Map<const RowMatrix<T>> A(a, ta ? K : M, ta ? M : K);
  Eigen::Map<const RowMatrix<T>> B(b, tb ? N : K, tb ? K : N);
  Eigen::Map<RowMatrix<T>> C(c, M, N);
  int threads = 1;
#ifdef _OPENMP
  if (!omp_in_parallel() && M * N * K >= kSplitMin) threads = omp_get_max_threads();
#endif
  if (threads <= 1) {
    gemm_block(A, ta, B, tb, C, 0, M, 0, N, alpha, beta);
    return;
  }
  // Cut the longer side of C into `threads` blocks (columns in multiples of
  // 16 floats, so every block starts on a vector boundary). Each element of
  // C is one thread's, summed in its GEMM's fixed order: the bits depend on
  // the thread count (and the GEMM, Eigen or OpenBLAS) only.
  const bool by_rows = M >= N;
  const int64_t side = by_rows ? M : N, align = by_rows ? 1 : 16;
  const int64_t step = (side / threads + align - 1) / align * align;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int t = 0; t < threads; ++t) {
    const int64_t begin = std::min<int64_t>(side, t * step);
    const int64_t end = t == threads - 1 ? side : std::min<int64_t>(side, begin + step);
    if (end <= begin) continue;
    if (by_rows) gemm_block(A, ta, B, tb, C, begin, end - begin, 0, N, alpha, beta);
    else gemm_block(A, ta, B, tb, C, 0, M, begin, end - begin, alpha, beta);
  }
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
