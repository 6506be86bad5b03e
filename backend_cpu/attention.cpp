// Causal attention as one CPU kernel per (batch, head): the fused version of
// the model's composition permute → expand (GQA) → q kᵀ → scale → causal
// softmax → · v (models/attention.cpp, AttentionMixer::forward_composed), which
// stays the reference the tests compare this file with.
//
// What fusing saves: q, k, v are read in place (a head's rows are H·d apart
// in [B, T, H, d]), so the permute and the per-query-head copies of each KV
// head disappear; one head's blocks (T×32) fit in L1, so the products are
// register-blocked loops with no packing (small::matmul_dynamic), where a
// general GEMM would spend as long packing as multiplying; and the masked
// upper triangle is skipped a tile of query rows at a time (rows r0 …
// r0+rows−1 see at most keys 0 … r0+rows−1+(Tk−Tq)).
//
// Backward, with P the probabilities (recomputed: the forward keeps only
// each row's log-sum-exp), dP = dout vᵀ and D_i = Σ_j P_ij dP_ij:
//   dS = scale · P ⊙ (dP − D)          (the softmax Jacobian, then the scale)
//   dq = dS k,   dk = dSᵀ q,   dv = Pᵀ dout
// dk and dv of a KV head sum over the query heads that read it, so the
// backward runs over (batch, KV head): each thread owns its rows, the heads
// are added in a fixed order, and the result is deterministic.
//
// Dropout on the probabilities (AttentionShape::dropout, p > 0): the
// forward multiplies P v with P̃ = P ⊙ M instead of P, M regenerated from the
// counter (core/philox.h); the backward then has dv = P̃ᵀ dout, and dP = M ⊙
// (dout vᵀ) goes into the softmax Jacobian as above.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend_cpu/cpu_kernels.h"
#include "backend_cpu/dropout_mask.h"
#include "backend_cpu/eigen_maps.h"
#include "backend_cpu/parallel.h"
#include "backend_cpu/small_matmul.h"

namespace lina::cpu {

namespace {

// Query rows (forward, dq) or keys (dk, dv) per block: row r0 … r0+15 sees
// keys up to r0+15+offset, so the masked triangle is skipped 16 rows at a
// time.
constexpr int64_t kTile = 16;

// y[0, n) = softmax(scale · y[0, n)) in place, stable (the maximum subtracted
// first); returns the row's log-sum-exp, log Σ_j e^{scale · y_j} = m + log Σ_j
// e^{scale · y_j − m}. In whole SIMD packets: the row's whole packets in place, and its
// last n mod L elements in a packet of their own on the stack, padded with
// −∞ (exp gives 0 there and the sum is unchanged). Eigen's own array exp
// over a short unaligned row would take the ends one scalar expf at a time,
// which at rows of ~32 keys costs more than the packets; so did a scalar
// fallback for the rows whose last packet would run past the row's end.
template <class T>
T scaled_softmax_in_place(T* y, int64_t n, T scale) {
  namespace ei = Eigen::internal;
  using Packet = typename ei::packet_traits<T>::type;
  constexpr int64_t L = ei::packet_traits<T>::size;
  if (!ei::packet_traits<T>::HasExp) {  // no packet exp: scalar
    T m = -std::numeric_limits<T>::infinity(), sum = 0;
    for (int64_t j = 0; j < n; ++j) m = std::max(m, y[j] *= scale);
    for (int64_t j = 0; j < n; ++j) sum += y[j] = std::exp(y[j] - m);
    for (int64_t j = 0; j < n; ++j) y[j] /= sum;
    return m + std::log(sum);
  }
  const int64_t whole = n / L * L, rest = n - whole;
  alignas(64) T last[L];  // y[whole, n), then −∞
  for (int64_t j = 0; j < L; ++j) last[j] = j < rest ? y[whole + j] : -std::numeric_limits<T>::infinity();
  // the packet at j: y's own, or the last one
  auto at = [&](int64_t j) { return j < whole ? y + j : last; };
  const int64_t packets = whole + (rest ? L : 0);
  const Packet scale_p = ei::pset1<Packet>(scale);
  Packet m = ei::pset1<Packet>(-std::numeric_limits<T>::infinity());
  for (int64_t j = 0; j < packets; j += L) {
    const Packet x = ei::pmul(ei::ploadu<Packet>(at(j)), scale_p);
    ei::pstoreu(at(j), x);
    m = ei::pmax(m, x);
  }
  const Packet max_p = ei::pset1<Packet>(ei::predux_max(m));
  Packet sum = ei::pset1<Packet>(T(0));
  for (int64_t j = 0; j < packets; j += L) {
    const Packet e = ei::pexp(ei::psub(ei::ploadu<Packet>(at(j)), max_p));
    ei::pstoreu(at(j), e);
    sum = ei::padd(sum, e);
  }
  const T total = ei::predux(sum);
  const Packet inv = ei::pset1<Packet>(T(1) / total);
  for (int64_t j = 0; j < packets; j += L) ei::pstoreu(at(j), ei::pmul(ei::ploadu<Packet>(at(j)), inv));
  std::copy(last, last + rest, y + whole);
  return ei::predux_max(m) + std::log(total);
}

// Σ_j a_j b_j over n: whole SIMD vectors summed lane by lane, the lanes
// added in a tree, then the last n mod L terms. One running sum would wait
// an addition's latency at every term (the rows here are up to T long).
template <class T>
T dot_in_lanes(const T* a, const T* b, int64_t n) {
  constexpr int64_t L = small::kLanes<T>;
  small::Vec<T> lanes = {};
  int64_t j = 0;
  for (; j + L <= n; j += L) lanes += small::load(a + j) * small::load(b + j);
  T sum = small::sum_of_lanes<T>(lanes);
  for (; j < n; ++j) sum += a[j] * b[j];
  return sum;
}

// At [d, T] = Aᵀ of A's rows (T rows of d, `stride` apart): one head's keys or
// values laid out so that a row of q kᵀ (or dout vᵀ) is a sum of rows of At.
template <class T>
void transpose_rows(const T* A, int64_t rows, int64_t d, int64_t stride, std::vector<T>& At) {
  At.resize(size_t(rows * d));
  for (int64_t c = 0; c < d; ++c)  // At's rows written in order, A read down its columns
    for (int64_t j = 0; j < rows; ++j) At[size_t(c * rows + j)] = A[j * stride + c];
}

// The views of one (batch, head) of the [B, T, heads, d] tensors.
template <class T>
struct HeadViews {
  int64_t b, h, kvh;
  int64_t row0;  // this head's first row in the query-side tensors (q, out, dout, dq)
  const T* q;    // row i of this head: q + i·H·d
  const T* k;    // row j: k + j·Hkv·d
  const T* v;
};

template <class T>
HeadViews<T> head_views(const AttentionShape& s, int64_t bh, const T* q, const T* k, const T* v) {
  const int64_t b = bh / s.H, h = bh % s.H, kvh = h / (s.H / s.Hkv);
  const int64_t row0 = (b * s.Tq * s.H + h) * s.d;
  return {b, h, kvh, row0, q + row0, k + (b * s.Tk * s.Hkv + kvh) * s.d,
          v + (b * s.Tk * s.Hkv + kvh) * s.d};
}

// dst [rows, cols] (leading dimension cols) = src [rows, cols] (leading
// dimension ld) ⊙ M, M the dropout factors of the probs elements
// first + r·Tk + c: the dropped probabilities P̃ of a tile.
template <class T>
void dropped_tile(const AttentionShape& s, const T* src, int64_t ld, int rows, int cols,
                  int64_t first, std::vector<T>& dst) {
  dst.resize(size_t(rows) * size_t(cols));
  for (int r = 0; r < rows; ++r) {
    T* row = dst.data() + size_t(r) * size_t(cols);
    dropout_factors(s.dropout, first + r * s.Tk, cols, row);  // M, then P̃ = P ⊙ M in place
    for (int c = 0; c < cols; ++c) row[c] *= src[r * ld + c];
  }
}

// P [rows, Tk] (leading dimension Tk) = the probabilities of query rows
// r0 … r0 + rows − 1 of one head, kt its keys transposed; 0 past the keys a
// row sees. Each row's log-sum-exp into lse [rows] when not null. The
// forward and the backward both call it: the backward's P has the forward's
// bits.
template <class T>
void head_probs(const AttentionShape& s, const HeadViews<T>& hv, const std::vector<T>& kt, int64_t r0, int rows,
                T* P, T* lse) {
  const int64_t offset = s.Tk - s.Tq;  // query i sees keys j <= i + offset
  const int qs = int(s.H * s.d), Tk = int(s.Tk), d = int(s.d);
  const int keys = int(std::min(s.Tk, r0 + rows + offset));  // the tile's last row sees these
  small::matmul_dynamic(rows, keys, d, hv.q + r0 * qs, qs, kt.data(), Tk, P, Tk);  // q kᵀ
  for (int r = 0; r < rows; ++r) {
    const int64_t visible = r0 + r + offset + 1;
    T* row = P + r * Tk;
    const T row_lse = scaled_softmax_in_place(row, visible, T(s.scale));
    if (lse) lse[r] = row_lse;
    std::fill(row + visible, row + s.Tk, T(0));
  }
}

}  // namespace

// Every product below is small::matmul_dynamic: C (M×N) = A (M×K) · B (K×N),
// with (M, N, K, A, lda, B, ldb, C, ldc) as its arguments.
template <class T>
void attention_forward(const AttentionShape& s, const T* q, const T* k, const T* v, T* lse,
                       T* out) {
  const int64_t offset = s.Tk - s.Tq;  // query i sees keys j <= i + offset
  const int qs = int(s.H * s.d), kvs = int(s.Hkv * s.d), Tk = int(s.Tk), d = int(s.d);
  LINA_PARALLEL_FOR_IF(s.B * s.H > 1 && s.B * s.H * s.Tq * s.Tk > kParallelMin)
  for (int64_t bh = 0; bh < s.B * s.H; ++bh) {
    const HeadViews<T> hv = head_views(s, bh, q, k, v);
    thread_local std::vector<T> kt;  // [d, Tk]: this head's keys, transposed
    transpose_rows(hv.k, s.Tk, s.d, kvs, kt);
    thread_local std::vector<T> P;   // [kTile, Tk]: one tile of rows' probabilities
    P.resize(size_t(kTile * s.Tk));
    T* O = out + hv.row0;  // row i at O + i·qs
    for (int64_t r0 = 0; r0 < s.Tq; r0 += kTile) {
      const int rows = int(std::min(kTile, s.Tq - r0));
      const int keys = int(std::min(s.Tk, r0 + rows + offset));  // the tile's last row sees these
      T* scores = P.data();                                       // [rows, keys] of [rows, Tk]
      head_probs(s, hv, kt, r0, rows, scores, lse + bh * s.Tq + r0);
      if (s.dropout.p > 0) {  // P̃ v, P̃ = P ⊙ M
        thread_local std::vector<T> dropped;  // [rows, keys]
        dropped_tile(s, scores, Tk, rows, keys, (bh * s.Tq + r0) * s.Tk, dropped);
        small::matmul_dynamic(rows, d, keys, dropped.data(), keys, hv.v, kvs, O + r0 * qs, qs);
      } else {
        small::matmul_dynamic(rows, d, keys, scores, Tk, hv.v, kvs, O + r0 * qs, qs);  // P v
      }
    }
  }
}

namespace {

// Pass 1 of the backward for query head bh (views hv): its dS [Tq, Tk] into
// dscores and dq = dS k. vt [d, Tk]: the head's values, transposed; P [Tq,
// Tk]: its probabilities.
template <class T>
void scores_grad_and_dq(const AttentionShape& s, int64_t bh, const HeadViews<T>& hv, const std::vector<T>& vt,
                        const T* P, const T* dout, T* dscores, T* dq) {
  const int64_t offset = s.Tk - s.Tq;
  const int qs = int(s.H * s.d), kvs = int(s.Hkv * s.d), Tk = int(s.Tk), d = int(s.d);
  T* dS = dscores + bh * s.Tq * s.Tk;  // [Tq, Tk]
  for (int64_t r0 = 0; r0 < s.Tq; r0 += kTile) {
    const int rows = int(std::min(kTile, s.Tq - r0));
    const int keys = int(std::min(s.Tk, r0 + rows + offset));
    T* block = dS + r0 * Tk;  // [rows, keys] of [rows, Tk]
    small::matmul_dynamic(rows, keys, d, dout + hv.row0 + r0 * qs, qs, vt.data(), Tk, block,
                          Tk);  // dP̃ = dout vᵀ (= dP without dropout)
    for (int64_t i = r0; i < r0 + rows; ++i) {
      const int64_t visible = i + offset + 1;
      const T* p = P + i * s.Tk;
      T* ds = dS + i * s.Tk;
      if (s.dropout.p > 0) {  // dP = M ⊙ dP̃
        thread_local std::vector<T> mask;  // [visible] M of this row
        mask.resize(size_t(visible));
        dropout_factors(s.dropout, (bh * s.Tq + i) * s.Tk, visible, mask.data());
        for (int64_t j = 0; j < visible; ++j) ds[j] *= mask[size_t(j)];
      }
      const T D = dot_in_lanes(p, ds, visible);  // Σ_j P_ij dP_ij
      for (int64_t j = 0; j < visible; ++j) ds[j] = T(s.scale) * p[j] * (ds[j] - D);
      std::fill(ds + visible, ds + s.Tk, T(0));
    }
    small::matmul_dynamic(rows, d, keys, block, Tk, hv.k, kvs, dq + hv.row0 + r0 * qs, qs);  // dS k
  }
}

// Pass 2 for query head bh: its terms of dk (dK += dSᵀ q) and dv (dV +=
// P̃ᵀ dout), a tile of keys at a time: keys c0 … are seen only by queries
// i >= c0 − offset. dK, dV: the KV head's rows, kvs apart.
template <class T>
void add_key_value_grads(const AttentionShape& s, int64_t bh, const HeadViews<T>& hv, const T* P,
                         const T* dscores, const T* dout, T* dK, T* dV) {
  const int64_t offset = s.Tk - s.Tq;
  const int qs = int(s.H * s.d), kvs = int(s.Hkv * s.d), Tk = int(s.Tk), d = int(s.d);
  const T* dS = dscores + bh * s.Tq * s.Tk;
  for (int64_t c0 = 0; c0 < s.Tk; c0 += kTile) {
    const int cols = int(std::min(kTile, s.Tk - c0));
    const int64_t i0 = std::max<int64_t>(0, c0 - offset);  // first query that sees key c0
    if (i0 >= s.Tq) break;
    const int n = int(s.Tq - i0);
    small::matmul_dynamic<true, small::Store::Add>(cols, d, n, dS + i0 * Tk + c0, Tk, hv.q + i0 * qs, qs,
                                                   dK + c0 * kvs, kvs);
    const T* Pv = P + i0 * Tk + c0;  // the probabilities v was multiplied by: P, or P̃
    int64_t ld = Tk;
    if (s.dropout.p > 0) {
      thread_local std::vector<T> dropped;  // [n, cols]
      dropped_tile(s, Pv, Tk, n, cols, (bh * s.Tq + i0) * s.Tk + c0, dropped);
      Pv = dropped.data();
      ld = cols;
    }
    small::matmul_dynamic<true, small::Store::Add>(cols, d, n, Pv, int(ld), dout + hv.row0 + i0 * qs, qs,
                                                   dV + c0 * kvs, kvs);
  }
}

}  // namespace

// Per (batch, KV head), its query heads in order: each head's dS and dq
// (pass 1), then at once its terms of dk and dv (pass 2), while the head's
// dS and P are still in cache rather than read back from memory in a
// second sweep. dk and dv of a KV head add its heads in a fixed order, so
// the result does not depend on the threads. Each head's P is recomputed
// first with the forward's own code (head_probs): the bits the forward
// multiplied v with; the CPU leaves lse to the CUDA backend, whose kernels
// rebuild P from it.
template <class T>
void attention_backward(const AttentionShape& s, const T* q, const T* k, const T* v,
                        const T* /*lse*/, const T* dout, T* dscores, T* dq, T* dk, T* dv) {
  const int64_t group = s.H / s.Hkv;
  const int kvs = int(s.Hkv * s.d), d = int(s.d);
  const bool threaded = s.B * s.Hkv > 1 && s.B * s.H * s.Tq * s.Tk > kParallelMin;
  LINA_PARALLEL_FOR_IF(threaded)
  for (int64_t bkv = 0; bkv < s.B * s.Hkv; ++bkv) {
    const int64_t b = bkv / s.Hkv, kvh = bkv % s.Hkv;
    T* dK = dk + (b * s.Tk * s.Hkv + kvh) * s.d;  // row j at dK + j·kvs
    T* dV = dv + (b * s.Tk * s.Hkv + kvh) * s.d;
    for (int64_t j = 0; j < s.Tk; ++j) {
      std::fill(dK + j * kvs, dK + j * kvs + d, T(0));
      std::fill(dV + j * kvs, dV + j * kvs + d, T(0));
    }
    thread_local std::vector<T> kt, vt;  // [d, Tk]: the KV head's keys and values, transposed
    const HeadViews<T> first = head_views(s, b * s.H + kvh * group, q, k, v);
    transpose_rows(first.k, s.Tk, s.d, kvs, kt);
    transpose_rows(first.v, s.Tk, s.d, kvs, vt);
    thread_local std::vector<T> P;  // [Tq, Tk]: one query head's probabilities
    P.resize(size_t(s.Tq * s.Tk));
    for (int64_t g = 0; g < group; ++g) {
      const int64_t bh = b * s.H + kvh * group + g;
      const HeadViews<T> hv = head_views(s, bh, q, k, v);
      for (int64_t r0 = 0; r0 < s.Tq; r0 += kTile)
        head_probs(s, hv, kt, r0, int(std::min(kTile, s.Tq - r0)), P.data() + r0 * s.Tk, static_cast<T*>(nullptr));
      scores_grad_and_dq(s, bh, hv, vt, P.data(), dout, dscores, dq);
      add_key_value_grads(s, bh, hv, P.data(), dscores, dout, dK, dV);
    }
  }
}

LINA_INSTANTIATE_CPU_KERNELS(ATTENTION)  // float and double, from core/op_list.h

}  // namespace lina::cpu
