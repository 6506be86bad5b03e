// Matrix products of the small row-major blocks the chunked scan works on
// (a chunk of C tokens by a head of d = 32: C×d, C×C and d×d), with every size
// a compile-time constant. At these sizes a general GEMM spends more time
// packing its operands than multiplying; here each output row is a few
// SIMD vectors (N = 16 or 32 floats: one or two AVX-512 registers, two or
// four AVX2 ones) that stay in registers while K rows of B, each scaled by
// one entry of A, are added into them: a plain run of broadcast-and-FMA
// instructions.
//
// Leading dimensions (lda, ldb, ldc) are the distances between rows, so a
// block can be a column range of a wider matrix (e.g. the W half of [Y | W]).
#pragma once
#include <utility>
#include <vector>

namespace lina::cpu::small {

enum class Store { Set, Add, Sub };  // C = P, C += P or C −= P

// The machine's SIMD register, as the compiler targets it (-march=native in
// Release): its width in bytes and how many of them there are. A vector of
// the GCC/Clang vector extension wider than the register is split into
// several, and code written for 32 wide registers spills on a machine with
// 16 narrow ones, so the vectors here are exactly one register wide.
#if defined(__AVX512F__)
constexpr int kVectorBytes = 64, kVectorRegisters = 32;
#elif defined(__AVX__)
constexpr int kVectorBytes = 32, kVectorRegisters = 16;
#else
constexpr int kVectorBytes = 16, kVectorRegisters = 16;
#endif

// One SIMD register of T: 16 floats or 8 doubles with AVX-512, 8 or 4 with
// AVX2. Sums across lanes (sum_of_lanes, lanes_of_dot) follow the lanes, so
// their rounding depends on the width; each width gives the same bits on
// every run.
template <class T> struct VecOf;
template <> struct VecOf<float> { typedef float type __attribute__((vector_size(kVectorBytes))); };
template <> struct VecOf<double> { typedef double type __attribute__((vector_size(kVectorBytes))); };
template <class T> using Vec = typename VecOf<T>::type;
template <class T> constexpr int kLanes = int(kVectorBytes / sizeof(T));

template <class T> inline Vec<T> load(const T* p) {
  Vec<T> v;
  __builtin_memcpy(&v, p, sizeof v);  // no alignment required
  return v;
}
template <class T> inline void store(T* p, const Vec<T>& v) { __builtin_memcpy(p, &v, sizeof v); }

namespace detail {
// Makes the compiler hold v in a SIMD register from here on: an empty asm
// statement that claims to read and change it. Left to itself, GCC folds
// the load of a row of B into every FMA that reads it (a memory operand),
// so each k costs R·NB loads of B instead of NB, more than the load ports
// serve beside the FMAs (docs/performance.md, "Rows of B held in registers").
template <class V> [[gnu::always_inline]] inline void keep_in_register(V& v) {
#if defined(__x86_64__) || defined(__i386__)
  asm("" : "+v"(v));
#else
  (void)v;
#endif
}

// C[i0 … i0+R−1, j0 … j0+NB·L−1] (Store) the same rows and columns of P:
// R·NB sums held in registers while K rows of B (NB vectors each), each
// scaled by one entry of A per row, are added into them. Always inlined,
// so that a compile-time K unrolls as if written out.
template <int R, int NB, bool TransposeA, Store store_as, class T>
[[gnu::always_inline]] inline void block(int i0, int j0, int K, const T* A, int lda, const T* B,
                                         int ldb, T* C, int ldc) {
  constexpr int L = kLanes<T>;
  Vec<T> sums[R][NB] = {};  // C[i0 … i0+R−1, j0 … j0+NB·L−1]
  for (int k = 0; k < K; ++k) {
    Vec<T> b[NB];
#pragma GCC unroll 8
    for (int v = 0; v < NB; ++v) {
      b[v] = load(B + k * ldb + j0 + v * L);
      keep_in_register(b[v]);
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const T a = TransposeA ? A[k * lda + i0 + r] : A[(i0 + r) * lda + k];
#pragma GCC unroll 8
      for (int v = 0; v < NB; ++v) sums[r][v] += a * b[v];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NB; ++v) {
      T* c = C + (i0 + r) * ldc + j0 + v * L;
      if constexpr (store_as == Store::Set) store(c, sums[r][v]);
      if constexpr (store_as == Store::Add) store(c, load(c) + sums[r][v]);
      if constexpr (store_as == Store::Sub) store(c, load(c) - sums[r][v]);
    }
}
}  // namespace detail

// C (Store) P with P = A·B (A is M×K) or, with TransposeA, P = Aᵀ·B (A is K×M);
// B is K×N, C is M×N; N a multiple of kLanes<T>.
//
// R rows of P are formed together: each row of B is loaded once for all R,
// and the R·N/L sums are independent, so consecutive FMAs do not wait on
// each other (one accumulator alone would wait the FMA's latency, ~4 cycles,
// at every step of k). R·N/L = half the registers where M allows (16 sums
// with AVX-512, 8 with AVX2): with two FMA units that is 8 (4) cycles of
// work between an FMA and the next on the same sum, and the other half of
// the registers holds the row of B and the broadcast entry of A.
template <int M, int N, int K, bool TransposeA = false, Store store_as = Store::Set, class T>
inline void matmul(const T* A, int lda, const T* B, int ldb, T* C, int ldc) {
  constexpr int L = kLanes<T>, NV = N / L;
  constexpr int sums = kVectorRegisters / 2, want = sums >= 2 * NV ? sums / NV : 1;
  constexpr int R = want <= M && M % want == 0 ? want : (M % 4 == 0 ? 4 : 1);
  static_assert(N % L == 0, "small::matmul: N must be a whole number of vectors");
  static_assert(M % R == 0, "small::matmul: M must be a multiple of the rows done together");
  for (int i0 = 0; i0 < M; i0 += R)
    detail::block<R, NV, TransposeA, store_as>(i0, 0, K, A, lda, B, ldb, C, ldc);
}

// matmul with M, N and K known only at run time (attention's query rows ×
// keys × head size, where the keys grow with the context). The same
// register blocks as above, R rows × NB vectors of C (8 sums with AVX2, 16
// with AVX-512), walked over C at run time; leftover rows go one at a time,
// leftover vectors one at a time. The last N mod L columns (attention's 127
// keys: 15 of them) go through one more vector too: B's last columns copied
// once into a K × L block padded with zeros, the product's vector of each
// row into a scratch row, and its first N mod L lanes stored into C; as
// plain scalar sums, each waiting on the one before, they took several
// times as long as the whole vectors. B's rows are otherwise read in place:
// no packing, so this is for operands that fit in L1/L2, not a general GEMM.
namespace detail {
// Rows i0 … i0+R−1 of C, columns [0, N) with N a whole number of vectors.
template <int R, bool TransposeA, Store store_as, class T>
inline void rows_dynamic(int i0, int N, int K, const T* A, int lda, const T* B, int ldb, T* C,
                         int ldc) {
  constexpr int L = kLanes<T>, NB = 2;
  int j0 = 0;
  for (; j0 + NB * L <= N; j0 += NB * L)
    block<R, NB, TransposeA, store_as>(i0, j0, K, A, lda, B, ldb, C, ldc);
  for (; j0 + L <= N; j0 += L)
    block<R, 1, TransposeA, store_as>(i0, j0, K, A, lda, B, ldb, C, ldc);
}

// C's last `rest` < L columns (C and B point at the first of them), every
// row: through B's columns padded to one vector, bpad [K, L], and a scratch
// row of C.
template <bool TransposeA, Store store_as, class T>
void last_columns(int M, int rest, int K, const T* A, int lda, const T* B, int ldb, T* C, int ldc,
                  T* bpad) {
  constexpr int L = kLanes<T>;
  for (int k = 0; k < K; ++k)
    for (int j = 0; j < L; ++j) bpad[k * L + j] = j < rest ? B[k * ldb + j] : T(0);
  T row[L];  // one row of the padded product
  for (int i = 0; i < M; ++i) {
    block<1, 1, TransposeA, Store::Set>(0, 0, K, TransposeA ? A + i : A + i * lda, lda, bpad, L, row, L);
    for (int j = 0; j < rest; ++j) {
      T& c = C[i * ldc + j];
      if constexpr (store_as == Store::Set) c = row[j];
      if constexpr (store_as == Store::Add) c += row[j];
      if constexpr (store_as == Store::Sub) c -= row[j];
    }
  }
}
}  // namespace detail

template <bool TransposeA = false, Store store_as = Store::Set, class T>
inline void matmul_dynamic(int M, int N, int K, const T* A, int lda, const T* B, int ldb, T* C,
                           int ldc) {
  constexpr int R = kVectorRegisters / 4;  // × 2 vectors = half the registers
  constexpr int L = kLanes<T>;
  const int whole = N / L * L;  // the columns in whole vectors
  int i0 = 0;
  for (; i0 + R <= M; i0 += R)
    detail::rows_dynamic<R, TransposeA, store_as>(i0, whole, K, A, lda, B, ldb, C, ldc);
  for (; i0 < M; ++i0)
    detail::rows_dynamic<1, TransposeA, store_as>(i0, whole, K, A, lda, B, ldb, C, ldc);
  if (whole == N) return;
  thread_local std::vector<T> bpad;  // [K, L]
  bpad.resize(size_t(K) * L);
  detail::last_columns<TransposeA, store_as>(M, N - whole, K, A, lda, B + whole, ldb, C + whole, ldc,
                                             bpad.data());
}

// (I + A) X = B in place (X holds B on entry), A strictly lower triangular
// C×C, X C×N: forward substitution, x_r = b_r − Σ_{i<r} A_ri x_i, each row
// summed in registers.
template <int C, int N, class T> inline void solve_unit_lower(const T* A, int lda, T* X, int ldx) {
  constexpr int L = kLanes<T>, NV = N / L;
  static_assert(N % L == 0, "small::solve_unit_lower: N must be a whole number of vectors");
  for (int r = 1; r < C; ++r) {
    Vec<T> x[NV];
    for (int v = 0; v < NV; ++v) x[v] = load(X + r * ldx + v * L);
    for (int i = 0; i < r; ++i)
      for (int v = 0; v < NV; ++v) x[v] -= A[r * lda + i] * load(X + i * ldx + v * L);
    for (int v = 0; v < NV; ++v) store(X + r * ldx + v * L, x[v]);
  }
}

// (I + A)ᵀ X = B in place, A as above: back substitution,
// x_r = b_r − Σ_{i>r} A_ir x_i.
template <int C, int N, class T>
inline void solve_unit_lower_transposed(const T* A, int lda, T* X, int ldx) {
  constexpr int L = kLanes<T>, NV = N / L;
  static_assert(N % L == 0, "small::solve_unit_lower_transposed: N must be a whole number of vectors");
  for (int r = C - 2; r >= 0; --r) {
    Vec<T> x[NV];
    for (int v = 0; v < NV; ++v) x[v] = load(X + r * ldx + v * L);
    for (int i = r + 1; i < C; ++i)
      for (int v = 0; v < NV; ++v) x[v] -= A[i * lda + r] * load(X + i * ldx + v * L);
    for (int v = 0; v < NV; ++v) store(X + r * ldx + v * L, x[v]);
  }
}

// One step of the in-register transpose below, on rows a = i and b = i + w
// of an L×L block (i with bit w clear): the lanes j with bit w set of row a
// and the lanes with bit w clear of row b trade places. Done for w = L/2, …,
// 2, 1, these swaps of w×w sub-blocks across the diagonal transpose the block.
template <int w, bool second, class V, int... J>
inline V swap_lanes(const V& a, const V& b, std::integer_sequence<int, J...>) {
  constexpr int L = int(sizeof...(J));
  if constexpr (!second)  // row i: a where bit w is clear, else b shifted left by w
    return __builtin_shufflevector(a, b, ((J & w) ? L + J - w : J)...);
  else  // row i + w: a shifted right by w where bit w is clear, else b
    return __builtin_shufflevector(a, b, ((J & w) ? L + J : J + w)...);
}

template <int w, class T> inline void swap_step(Vec<T> (&rows)[kLanes<T>]) {
  constexpr auto lanes = std::make_integer_sequence<int, kLanes<T>>{};
  for (int i = 0; i < kLanes<T>; ++i)
    if (!(i & w)) {
      const Vec<T> a = rows[i], b = rows[i + w];
      rows[i] = swap_lanes<w, false>(a, b, lanes);
      rows[i + w] = swap_lanes<w, true>(a, b, lanes);
    }
  if constexpr (w > 1) swap_step<w / 2, T>(rows);
}

// At (N×M, leading dimension M) = Aᵀ of A (M×N, leading dimension lda), by
// L×L blocks (L = kLanes<T>) transposed in registers: L loads, L·log2(L)
// shuffles and L stores per block instead of L² scalar moves.
template <int M, int N, class T> inline void transpose(const T* A, int lda, T* At) {
  constexpr int L = kLanes<T>;
  static_assert(M % L == 0 && N % L == 0, "small::transpose: sizes must be whole blocks");
  for (int i0 = 0; i0 < M; i0 += L)
    for (int j0 = 0; j0 < N; j0 += L) {
      Vec<T> rows[L];
      for (int i = 0; i < L; ++i) rows[i] = load(A + (i0 + i) * lda + j0);
      swap_step<L / 2, T>(rows);
      for (int j = 0; j < L; ++j) store(At + (j0 + j) * M + i0, rows[j]);
    }
}

// The lanes of Σ_v a[v·L …] ⊙ b[v·L …] over N elements (N a multiple of
// kLanes<T>): a dot product not yet summed across its lanes, so several can
// be added together, or summed L rows at a time by sum_of_lanes_each below.
template <int N, class T> inline Vec<T> lanes_of_dot(const T* a, const T* b) {
  constexpr int L = kLanes<T>;
  static_assert(N % L == 0, "small::lanes_of_dot: N must be a whole number of vectors");
  Vec<T> sum = load(a) * load(b);
  for (int v = 1; v < N / L; ++v) sum += load(a + v * L) * load(b + v * L);
  return sum;
}
// The lanes of Σ_v a[v·L …] over N elements.
template <int N, class T> inline Vec<T> lanes_of_sum(const T* a) {
  constexpr int L = kLanes<T>;
  static_assert(N % L == 0, "small::lanes_of_sum: N must be a whole number of vectors");
  Vec<T> sum = load(a);
  for (int v = 1; v < N / L; ++v) sum += load(a + v * L);
  return sum;
}

// out[r] = the sum of the lanes of v[r], for R vectors (R a multiple of
// kLanes<T>). Each block of L vectors is transposed in registers, so that
// lane r of every vector belongs to v[r], and the L vectors are added in a
// tree: L sums for L·log2(L) shuffles and L − 1 additions, where summing
// each vector across its lanes on its own would take L − 1 dependent steps.
template <int R, class T> inline void sum_of_lanes_each(const Vec<T>* v, T* out) {
  constexpr int L = kLanes<T>;
  static_assert(R % L == 0, "small::sum_of_lanes_each: R must be a whole number of blocks");
  for (int r0 = 0; r0 < R; r0 += L) {
    Vec<T> block[L];
    for (int i = 0; i < L; ++i) block[i] = v[r0 + i];
    swap_step<L / 2, T>(block);
    for (int w = L / 2; w >= 1; w /= 2)
      for (int i = 0; i < w; ++i) block[i] += block[i + w];
    store(out + r0, block[0]);
  }
}

// dst[0, N) = src[0, N), in whole vectors (N a multiple of kLanes<T>).
template <int N, class T> inline void copy(const T* src, T* dst) {
  static_assert(N % kLanes<T> == 0, "small::copy: N must be a whole number of vectors");
  for (int v = 0; v < N / kLanes<T>; ++v) store(dst + v * kLanes<T>, load(src + v * kLanes<T>));
}

// The sum of a vector's lanes, in a tree of log2(L) steps: lane j gets lane
// j XOR w added, for w = L/2, …, 1, so lane 0 ends with the sum (the same
// order every time; a running sum would wait on L − 1 adds in turn).
template <int w, class T, int... J>
inline Vec<T> add_lanes_apart(const Vec<T>& v, std::integer_sequence<int, J...>) {
  return v + __builtin_shufflevector(v, v, (J ^ w)...);
}
template <class T, int w = kLanes<T> / 2> inline T sum_of_lanes(const Vec<T>& v) {
  const Vec<T> folded = add_lanes_apart<w, T>(v, std::make_integer_sequence<int, kLanes<T>>{});
  if constexpr (w == 1) return folded[0];
  else return sum_of_lanes<T, w / 2>(folded);
}

// Σ_j a_j b_j over N elements (N a multiple of kLanes<T>), in four
// independent vector sums: a scalar loop would wait for each add in turn.
template <int N, class T> inline T dot(const T* a, const T* b) {
  constexpr int L = kLanes<T>, NV = N / L;
  static_assert(N % L == 0, "small::dot: N must be a whole number of vectors");
  Vec<T> sums[4] = {};
  for (int v = 0; v < NV; ++v) sums[v % 4] += load(a + v * L) * load(b + v * L);
  return sum_of_lanes<T>((sums[0] + sums[1]) + (sums[2] + sums[3]));
}

}  // namespace lina::cpu::small
