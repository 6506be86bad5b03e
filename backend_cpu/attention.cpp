// Causal attention as one CPU kernel per (batch, head): the fused version of
// the model's composition permute → expand (GQA) → q kᵀ → scale → causal
// softmax → · v (models/attention.cpp, AttentionMixer::forward_composed), which
// stays the reference the tests compare this file with.
//
// What fusing saves: q, k, v are read in place through strided Eigen maps
// (a head's rows are H·d apart in [B, T, H, d]), so the permute and the
// per-query-head copies of each KV head disappear; the scale is the GEMM's
// alpha; and the masked upper triangle is skipped a tile of query rows at a
// time (rows r0 … r0+rows−1 see at most keys 0 … r0+rows−1+(Tk−Tq)).
//
// Backward, with P = probs, dP = dout vᵀ and D_i = Σ_j P_ij dP_ij:
//   dS = scale · P ⊙ (dP − D)          (the softmax Jacobian, then the scale)
//   dq = dS k,   dk = dSᵀ q,   dv = Pᵀ dout
// dk and dv of a KV head sum over the query heads that read it, so they are
// formed in a second pass over (batch, KV head): each thread owns its rows,
// the heads are added in a fixed order, and the result is deterministic.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend_cpu/cpu_kernels.h"
#include "backend_cpu/eigen_maps.h"
#include "backend_cpu/parallel.h"

namespace lina::cpu {

namespace {

constexpr int64_t kTile = 64;  // query rows (forward) or keys (dk, dv) per block

// y[0, n) = softmax(y[0, n)) in place, stable (the maximum subtracted first).
template <class T>
void softmax_in_place(T* y, int64_t n) {
  T m = *std::max_element(y, y + n);
  // Eigen's vectorised exp, called directly: this runs inside the parallel
  // loop over heads, where even an empty OpenMP region per row would cost
  // more than the row.
  Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> row(y, n);
  row = (row - m).exp();
  T s = 0;
  for (int64_t j = 0; j < n; ++j) s += y[j];
  const T inv = T(1) / s;
  for (int64_t j = 0; j < n; ++j) y[j] *= inv;
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

}  // namespace

template <class T>
void attention_forward(const AttentionShape& s, const T* q, const T* k, const T* v, T* probs,
                       T* out) {
  const int64_t offset = s.Tk - s.Tq;  // query i sees keys j <= i + offset
  const T scale = T(s.scale);
  LINA_PARALLEL_FOR_IF(s.B * s.H > 1 && s.B * s.H * s.Tq * s.Tk > kParallelMin)
  for (int64_t bh = 0; bh < s.B * s.H; ++bh) {
    HeadViews<T> hv = head_views(s, bh, q, k, v);
    ConstRowsMap<T> Q(hv.q, s.Tq, s.d, Eigen::OuterStride<>(s.H * s.d));      // [Tq, d]
    ConstRowsMap<T> K(hv.k, s.Tk, s.d, Eigen::OuterStride<>(s.Hkv * s.d));    // [Tk, d]
    ConstRowsMap<T> V(hv.v, s.Tk, s.d, Eigen::OuterStride<>(s.Hkv * s.d));    // [Tk, d]
    MatrixMap<T> P(probs + bh * s.Tq * s.Tk, s.Tq, s.Tk);                     // [Tq, Tk]
    RowsMap<T> O(out + hv.row0, s.Tq, s.d, Eigen::OuterStride<>(s.H * s.d));
    for (int64_t r0 = 0; r0 < s.Tq; r0 += kTile) {
      const int64_t rows = std::min(kTile, s.Tq - r0);
      const int64_t keys = std::min(s.Tk, r0 + rows + offset);  // the tile's last row sees these
      auto scores = P.block(r0, 0, rows, keys);
      scores.noalias() = scale * Q.middleRows(r0, rows) * K.topRows(keys).transpose();
      for (int64_t i = r0; i < r0 + rows; ++i) {
        const int64_t visible = i + offset + 1;
        T* row = &P(i, 0);
        softmax_in_place(row, visible);
        std::fill(row + visible, row + s.Tk, T(0));
      }
      O.middleRows(r0, rows).noalias() = scores * V.topRows(keys);
    }
  }
}

template <class T>
void attention_backward(const AttentionShape& s, const T* q, const T* k, const T* v,
                        const T* probs, const T* dout, T* dscores, T* dq, T* dk, T* dv) {
  const int64_t offset = s.Tk - s.Tq;
  const int64_t group = s.H / s.Hkv;
  const T scale = T(s.scale);
  const auto q_stride = Eigen::OuterStride<>(s.H * s.d), kv_stride = Eigen::OuterStride<>(s.Hkv * s.d);
  const bool threaded = s.B * s.H > 1 && s.B * s.H * s.Tq * s.Tk > kParallelMin;

  // Pass 1, per (batch, query head): dS, and dq = dS k.
  LINA_PARALLEL_FOR_IF(threaded)
  for (int64_t bh = 0; bh < s.B * s.H; ++bh) {
    HeadViews<T> hv = head_views(s, bh, q, k, v);
    ConstRowsMap<T> K(hv.k, s.Tk, s.d, kv_stride);
    ConstRowsMap<T> V(hv.v, s.Tk, s.d, kv_stride);
    ConstRowsMap<T> dO(dout + hv.row0, s.Tq, s.d, q_stride);
    RowsMap<T> dQ(dq + hv.row0, s.Tq, s.d, q_stride);
    ConstMatrixMap<T> P(probs + bh * s.Tq * s.Tk, s.Tq, s.Tk);
    MatrixMap<T> dS(dscores + bh * s.Tq * s.Tk, s.Tq, s.Tk);
    for (int64_t r0 = 0; r0 < s.Tq; r0 += kTile) {
      const int64_t rows = std::min(kTile, s.Tq - r0);
      const int64_t keys = std::min(s.Tk, r0 + rows + offset);
      auto block = dS.block(r0, 0, rows, keys);
      block.noalias() = dO.middleRows(r0, rows) * V.topRows(keys).transpose();  // dP
      for (int64_t i = r0; i < r0 + rows; ++i) {
        const int64_t visible = i + offset + 1;
        const T* p = P.data() + i * s.Tk;
        T* d = &dS(i, 0);
        T D = 0;  // Σ_j P_ij dP_ij
        for (int64_t j = 0; j < visible; ++j) D += p[j] * d[j];
        for (int64_t j = 0; j < visible; ++j) d[j] = scale * p[j] * (d[j] - D);
        std::fill(d + visible, d + s.Tk, T(0));
      }
      dQ.middleRows(r0, rows).noalias() = block * K.topRows(keys);
    }
  }

  // Pass 2, per (batch, KV head): dk = Σ_heads dSᵀ q, dv = Σ_heads Pᵀ dout, a
  // tile of keys at a time: keys c0 … are seen only by queries i >= c0 − offset.
  LINA_PARALLEL_FOR_IF(threaded)
  for (int64_t bkv = 0; bkv < s.B * s.Hkv; ++bkv) {
    const int64_t b = bkv / s.Hkv, kvh = bkv % s.Hkv;
    const int64_t kv0 = (b * s.Tk * s.Hkv + kvh) * s.d;
    RowsMap<T> dK(dk + kv0, s.Tk, s.d, kv_stride);
    RowsMap<T> dV(dv + kv0, s.Tk, s.d, kv_stride);
    dK.setZero();
    dV.setZero();
    for (int64_t g = 0; g < group; ++g) {
      const int64_t bh = b * s.H + kvh * group + g;
      const HeadViews<T> hv = head_views(s, bh, q, k, v);
      ConstRowsMap<T> Q(hv.q, s.Tq, s.d, q_stride);
      ConstRowsMap<T> dO(dout + hv.row0, s.Tq, s.d, q_stride);
      ConstMatrixMap<T> P(probs + bh * s.Tq * s.Tk, s.Tq, s.Tk);
      ConstMatrixMap<T> dS(dscores + bh * s.Tq * s.Tk, s.Tq, s.Tk);
      for (int64_t c0 = 0; c0 < s.Tk; c0 += kTile) {
        const int64_t cols = std::min(kTile, s.Tk - c0);
        const int64_t i0 = std::max<int64_t>(0, c0 - offset);  // first query that sees key c0
        if (i0 >= s.Tq) break;
        const int64_t n = s.Tq - i0;
        dK.middleRows(c0, cols).noalias() +=
            dS.block(i0, c0, n, cols).transpose() * Q.middleRows(i0, n);
        dV.middleRows(c0, cols).noalias() +=
            P.block(i0, c0, n, cols).transpose() * dO.middleRows(i0, n);
      }
    }
  }
}

#define LINA_INSTANTIATE(T)                                                                       \
  template void attention_forward<T>(const AttentionShape&, const T*, const T*, const T*, T*, T*); \
  template void attention_backward<T>(const AttentionShape&, const T*, const T*, const T*,        \
                                      const T*, const T*, T*, T*, T*, T*);
LINA_INSTANTIATE(float)
LINA_INSTANTIATE(double)
#undef LINA_INSTANTIATE

}  // namespace lina::cpu
