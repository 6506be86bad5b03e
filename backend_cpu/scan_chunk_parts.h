// What the chunked scan (scan_chunked.cpp) is built from: the sizes it runs
// at, one thread's buffer carved into blocks, where a chunk's rows sit in
// the [B, T, H, d] tensors, and the handful of block operations its steps
// are written with.
//
// The chunk length C and head size D are either compile-time constants (the
// model's D = 32 with C = 16 or 64: FixedSize) or run-time values (any other
// shape: RuntimeSize). The steps of the scan are written once against
// `z.C`, `z.D`, `z.D2` (= 2D); each block operation below takes those sizes
// and, when all of them are constants, runs the fixed-size register-blocked
// code of small_matmul.h (no packing, fully unrolled), else a plain loop or
// small::matmul_dynamic. Blocks are row-major with the leading dimension
// given; the blocks of a workspace start 64-byte lines apart.
#pragma once
#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <tuple>
#include <type_traits>

#include "backend_cpu/eigen_maps.h"
#include "backend_cpu/small_matmul.h"

namespace lina::cpu::scan_chunk {

using small::Store;

// ---- sizes ----------------------------------------------------------------

template <int N> using Constant = std::integral_constant<int, N>;
template <class X> constexpr bool is_constant = false;
template <int N> constexpr bool is_constant<Constant<N>> = true;

// C tokens per chunk, head size D, and 2D (the width of [Y | W]).
template <int kC, int kD> struct FixedSize {
  static constexpr Constant<kC> C{};
  static constexpr Constant<kD> D{};
  static constexpr Constant<2 * kD> D2{};
};
struct RuntimeSize {
  int C, D, D2;
};

// a·b, a constant when both are.
template <class A, class B> constexpr auto times(A a, B b) {
  if constexpr (is_constant<A> && is_constant<B>) return Constant<A::value * B::value>{};
  else return int(a) * int(b);
}

// ---- one thread's buffer ----------------------------------------------------

// Hands out consecutive blocks of a buffer, each rounded up to 64 bytes. With
// a null base it only counts: a first, dry pass over a struct's constructor
// sizes the buffer, a second carves it (so each block is listed once).
template <class T> class Carver {
 public:
  explicit Carver(T* base) : base_(base) {}
  T* take(int64_t elements) {
    T* p = base_ ? base_ + used_ : nullptr;
    constexpr int64_t per_line = 64 / int64_t(sizeof(T));
    used_ += (elements + per_line - 1) / per_line * per_line;
    return p;
  }
  int64_t used() const { return used_; }

 private:
  T* base_;
  int64_t used_ = 0;
};

// One thread's Parts (structs whose constructors take (Carver&, Size)),
// carved from one allocation. Eigen aligns its allocation to its widest
// vector, so with 64-byte blocks every block starts aligned.
template <class T, class Size, class... Parts> class Workspace {
 public:
  explicit Workspace(const Size& z)
      : storage_(Eigen::Index(elements(z))), carver_(storage_.data()), parts{Parts(carver_, z)...} {}

 private:
  static int64_t elements(const Size& z) {
    Carver<T> dry(nullptr);
    (Parts(dry, z), ...);
    return dry.used();
  }
  Vector<T> storage_;
  Carver<T> carver_;

 public:
  std::tuple<Parts...> parts;  // constructed in order, after the buffer
};

// Where one chunk's rows sit in the [B, T, H, d] / [B, T, H] tensors.
struct ChunkPlace {
  int c;           // real rows in this chunk (C, or fewer for the last one)
  int64_t token0;  // index of its first token in [B, T, H]
  int64_t stride;  // H: from one token of the head to the next in [B, T, H]
  int64_t row(int r) const { return token0 + r * stride; }  // index of row r in [B, T, H]
};

// ---- block operations -------------------------------------------------------

// out (store_as) A·B, or Aᵀ·B with TransposeA (A then stored K×M); out is M×N.
template <bool TransposeA = false, Store store_as = Store::Set, class M, class N, class K, class T>
inline void product(M m, N n, K k, const T* A, int lda, const T* B, int ldb, T* out, int ldo) {
  if constexpr (is_constant<M> && is_constant<N> && is_constant<K>)
    small::matmul<M::value, N::value, K::value, TransposeA, store_as>(A, lda, B, ldb, out, ldo);
  else
    small::matmul_dynamic<TransposeA, store_as>(int(m), int(n), int(k), A, lda, B, ldb, out, ldo);
}

// At (N×M, leading dimension M) = Aᵀ of A (M×N, leading dimension lda).
template <class M, class N, class T> inline void transpose(M m, N n, const T* A, int lda, T* At) {
  if constexpr (is_constant<M> && is_constant<N>) {
    small::transpose<M::value, N::value>(A, lda, At);
  } else {
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) At[j * m + i] = A[i * lda + j];
  }
}

// (I + A) X = B in place (X holds B on entry; A strictly lower triangular
// C×C, X C×N): forward substitution, x_r = b_r − Σ_{i<r} A_ri x_i. With
// `transposed`, (I + A)ᵀ X = B: back substitution, x_r = b_r − Σ_{i>r} A_ir x_i.
template <bool transposed, class Cs, class N, class T>
inline void solve_unit_lower(Cs c, N n, const T* A, T* X) {
  if constexpr (is_constant<Cs> && is_constant<N>) {
    if constexpr (transposed) small::solve_unit_lower_transposed<Cs::value, N::value>(A, c, X, n);
    else small::solve_unit_lower<Cs::value, N::value>(A, c, X, n);
  } else if constexpr (!transposed) {
    for (int r = 1; r < c; ++r)
      for (int i = 0; i < r; ++i)
        for (int j = 0; j < n; ++j) X[r * n + j] -= A[r * c + i] * X[i * n + j];
  } else {
    for (int r = c - 2; r >= 0; --r)
      for (int i = r + 1; i < c; ++i)
        for (int j = 0; j < n; ++j) X[r * n + j] -= A[i * c + r] * X[i * n + j];
  }
}

// x = exp(x) over n numbers (Eigen's vectorised exp).
template <class N> constexpr int eigen_size() {
  if constexpr (is_constant<N>) return N::value;
  else return Eigen::Dynamic;
}
template <class N, class T> inline void exp_in_place(N n, T* x) {
  Eigen::Map<Eigen::Array<T, eigen_size<N>(), 1>> a(x, n);
  a = a.exp();
}

// Σ_j a_j b_j c_j over n numbers: at a fixed n in SIMD lanes, summed across
// them at the end (a plain loop cannot be reordered so, and waits on each add).
template <class N, class T> inline T dot3(N n, const T* a, const T* b, const T* c) {
  if constexpr (is_constant<N>) {
    constexpr int L = small::kLanes<T>;
    static_assert(N::value % L == 0, "dot3: n must be a whole number of vectors");
    small::Vec<T> sum = {};
    for (int v = 0; v < N::value; v += L) sum += small::load(a + v) * small::load(b + v) * small::load(c + v);
    return small::sum_of_lanes<T>(sum);
  } else {
    T sum = 0;
    for (int j = 0; j < n; ++j) sum += a[j] * b[j] * c[j];
    return sum;
  }
}

// dst = a + b, dst = a ⊙ b, and dst = s·a, over n numbers.
template <class N, class T>
inline void add_row(N n, const T* __restrict a, const T* __restrict b, T* __restrict dst) {
  for (int j = 0; j < n; ++j) dst[j] = a[j] + b[j];
}
template <class N, class T>
inline void multiply_row(N n, const T* __restrict a, const T* __restrict b, T* __restrict dst) {
  for (int j = 0; j < n; ++j) dst[j] = a[j] * b[j];
}
template <class N, class T> inline void scale_row(N n, T s, const T* __restrict a, T* __restrict dst) {
  for (int j = 0; j < n; ++j) dst[j] = s * a[j];
}

// dst[0, n) = src[0, n).
template <class N, class T> inline void copy_row(N n, const T* src, T* dst) {
  if constexpr (is_constant<N>) small::copy<N::value>(src, dst);
  else std::copy(src, src + n, dst);
}

// out[j] += Σ_{r < rows} x_rj y_rj for the n columns j (row stride n): the
// column sums of x ⊙ y, vectorised along the row.
template <class Rows, class N, class T>
inline void add_column_sums_of_products(Rows rows, N n, const T* __restrict x, const T* __restrict y,
                                        T* __restrict out) {
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < n; ++j) out[j] += x[r * n + j] * y[r * n + j];
}

// out[r] = Σ over the dot products added to row r, for rows r < R. At fixed
// sizes each row's products are added lane by lane into one SIMD vector and
// the R vectors summed across their lanes together at the end
// (small::sum_of_lanes_each); at run-time sizes, plain sums into out.
template <class T, class Rows> class RowSums;
template <class T, int R> class RowSums<T, Constant<R>> {
 public:
  RowSums(Constant<R>, T* out) : out_(out) {}
  template <class N> void add_dot(int r, N, const T* a, const T* b, T scale = T(1)) {
    lanes_[r] += scale * small::lanes_of_dot<N::value>(a, b);
  }
  void finish() { small::sum_of_lanes_each<R>(lanes_, out_); }

 private:
  small::Vec<T> lanes_[R] = {};
  T* out_;
};
template <class T> class RowSums<T, int> {
 public:
  RowSums(int rows, T* out) : out_(out) { std::fill(out, out + rows, T(0)); }
  void add_dot(int r, int n, const T* a, const T* b, T scale = T(1)) {
    T sum = 0;
    for (int j = 0; j < n; ++j) sum += a[j] * b[j];
    out_[r] += scale * sum;
  }
  void finish() {}

 private:
  T* out_;
};
template <class T, class Rows> RowSums(Rows, T*) -> RowSums<T, Rows>;

}  // namespace lina::cpu::scan_chunk
