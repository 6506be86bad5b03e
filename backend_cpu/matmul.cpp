// Matrix products on Eigen's GEMM, or for float on OpenBLAS's when the
// machine has it (backend_cpu/openblas.h). Raw row-major buffers are mapped
// (no copies); a transposed operand is a transposed map, which Eigen's GEMM
// reads directly (OpenBLAS takes the same buffers with a transpose flag).
// One large product is cut into one block of C per thread (or, for a long
// inner dimension, one range of K per thread), each block one
// single-threaded GEMM; a batch of small ones is spread over threads, one
// product per thread, when the batch is large enough to pay for them.
#include <Eigen/Core>
#include <algorithm>
#include <type_traits>
#include <utility>
#include <vector>

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

// One block of a product: rows [m0, m0 + m) and columns [n0, n0 + n) of C,
// summed over [k0, k0 + k) of the inner dimension.
struct Block {
  int64_t m0, m, n0, n, k0, k;
};

// The block of C' = alpha A'B' + beta C', where C' is `c` with row stride ldc
// (C itself, or a thread's scratch for a part of the sum over K).
template <class T>
static void gemm_block(const Eigen::Map<const RowMatrix<T>>& A, bool ta,
                       const Eigen::Map<const RowMatrix<T>>& B, bool tb, T* c, int64_t ldc,
                       const Block& at, T alpha, T beta) {
  const auto [m0, m, n0, n, k0, k] = at;
  if constexpr (std::is_same_v<T, float>) {
    if (cpu_gemm() == CpuGemm::OpenBlas) {  // the same block through cblas_sgemm
      const int64_t lda = A.cols(), ldb = B.cols();
      // the block's first element of A' (rows m0.., columns k0..) and of B' (rows k0.., columns n0..)
      const float* Ab = ta ? A.data() + k0 * lda + m0 : A.data() + m0 * lda + k0;
      const float* Bb = tb ? B.data() + n0 * ldb + k0 : B.data() + k0 * ldb + n0;
      openblas()->sgemm(kCblasRowMajor, ta ? kCblasTrans : kCblasNoTrans,
                        tb ? kCblasTrans : kCblasNoTrans, int(m), int(n), int(k), alpha, Ab,
                        int(lda), Bb, int(ldb), beta, c + m0 * ldc + n0, int(ldc));
      return;
    }
  }
  Eigen::Map<RowMatrix<T>, 0, Eigen::OuterStride<>> C(c, m0 + m, ldc, Eigen::OuterStride<>(ldc));
  auto Cb = C.block(m0, n0, m, n);
  if (beta == T(0)) Cb.setZero();
  else if (beta != T(1)) Cb *= beta;
  // rows m0.. of A' are rows of A, or columns of A when it is stored transposed
  auto Ab = ta ? A.block(k0, m0, k, m) : A.block(m0, k0, m, k);
  auto Bb = tb ? B.block(n0, k0, n, k) : B.block(k0, n0, k, n);
  add_product(Cb, Ab, ta, Bb, tb, alpha);
}

// Products of at least this many multiply-adds are cut into one block per
// thread: on the model's shapes (4096×128 by 128×128, the MLP's, the weight
// gradients) two single-threaded GEMMs on halves of C ran 8–34 % faster
// than Eigen's own two threads on the whole of it, all but the MLP-up
// weight gradient (5 % slower; results/bench/gemm-split/ at e88f518, docs/results-history.md).
constexpr int64_t kSplitMin = 32 * kParallelMin;

// A product whose inner dimension is this many times C's longer side (a
// weight gradient, summed over every token of the batch) is cut along K.
constexpr int64_t kSplitKRatio = 4;

template <class T>
static void gemm_one(int64_t M, int64_t N, int64_t K, const T* a, bool ta, const T* b, bool tb,
                     T* c, T alpha, T beta) {
  // A is stored M×K (or K×M when ta), B is K×N (or N×K when tb).
  Eigen::Map<const RowMatrix<T>> A(a, ta ? K : M, ta ? M : K);
  Eigen::Map<const RowMatrix<T>> B(b, tb ? N : K, tb ? K : N);
  int threads = 1;
#ifdef _OPENMP
  if (!omp_in_parallel() && M * N * K >= kSplitMin) threads = omp_get_max_threads();
#endif
  if (threads <= 1) {
    gemm_block(A, ta, B, tb, c, N, Block{0, M, 0, N, 0, K}, alpha, beta);
    return;
  }
  // Cut one side into `threads` ranges (columns in multiples of 16 floats,
  // so every block of C starts on a vector boundary).
  auto range = [threads](int t, int64_t side, int64_t align) {
    const int64_t step = (side / threads + align - 1) / align * align;
    const int64_t begin = std::min<int64_t>(side, t * step);
    return std::pair<int64_t, int64_t>{begin, t == threads - 1 ? side : std::min(side, begin + step)};
  };
  if (K >= kSplitKRatio * std::max(M, N)) {
    // Cut along K: thread t multiplies its range of K, A's and B's rows of it
    // (cut along M or N, each thread would read the whole of the other
    // operand). Thread 0 writes alpha A₀B₀ + beta C into C, the others their
    // alpha AₜBₜ into scratch, added to C in thread order: the bits depend on
    // the thread count (and the GEMM) only. 128×128 by 4096, the step's
    // most common weight gradient: 0.75-0.78 → 0.65-0.67 ms (docs/performance.md,
    // "Weight gradients cut along K").
    //
    // The partial products [threads − 1, M, N]: the calling thread's buffer,
    // kept for the next call, read through `partials` (inside the parallel
    // region `scratch` would name each thread's own).
    static thread_local std::vector<T> scratch;
    scratch.resize(size_t((threads - 1) * M * N));
    T* const partials = scratch.data();
#pragma omp parallel num_threads(threads)
    {
#ifdef _OPENMP
      const int t = omp_get_thread_num();
#else
      const int t = 0;
#endif
      const auto [k0, k1] = range(t, K, 1);
      T* out = t == 0 ? c : partials + (t - 1) * M * N;
      if (k1 > k0) gemm_block(A, ta, B, tb, out, N, Block{0, M, 0, N, k0, k1 - k0}, alpha, t == 0 ? beta : T(0));
      else if (t > 0) std::fill_n(out, M * N, T(0));  // an empty range adds nothing
      else for (int64_t e = 0; e < M * N; ++e) c[e] = beta == T(0) ? T(0) : beta * c[e];
#pragma omp barrier
      const auto [e0, e1] = range(t, M * N, 16);
      for (int u = 1; u < threads; ++u) {
        const T* part = partials + (u - 1) * M * N;
        for (int64_t e = e0; e < e1; ++e) c[e] += part[e];
      }
    }
    return;
  }
  // Cut the longer side of C. Each element of C is one thread's, summed in
  // its GEMM's fixed order: the bits depend on the thread count (and the
  // GEMM, Eigen or OpenBLAS) only.
  const bool by_rows = M >= N;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int t = 0; t < threads; ++t) {
    const auto [begin, end] = range(t, by_rows ? M : N, by_rows ? 1 : 16);
    if (end <= begin) continue;
    if (by_rows) gemm_block(A, ta, B, tb, c, N, Block{begin, end - begin, 0, N, 0, K}, alpha, beta);
    else gemm_block(A, ta, B, tb, c, N, Block{0, M, begin, end - begin, 0, K}, alpha, beta);
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


LINA_INSTANTIATE_CPU_KERNELS(MATMUL)  // float and double, from core/op_list.h

}  // namespace lina::cpu
