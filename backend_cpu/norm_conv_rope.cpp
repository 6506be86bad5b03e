// RMSNorm, L2 normalisation, causal depthwise conv1d (alone and fused with
// the SiLU after it) and rotary position embedding (docs/recurrence.md §4.1,
// 4.2, 4.5, 4.6).
//
// Names: rows = number of vectors normalised, n = their length;
// B = batch, T = sequence length, C = channels, K = conv taps;
// H = heads, D = head dimension.
//
// Weight gradients summed over many rows (rms_norm dw, conv1d dw) are
// computed race-free and deterministically: the rows are cut into chunks of
// a fixed size (independent of the thread count), each chunk sums into its
// own partial buffer, and the partials are added in chunk order
// (backend_cpu/row_chunks.h).
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "backend_cpu/cpu_kernels.h"
#include "backend_cpu/dropout_mask.h"
#include "backend_cpu/parallel.h"
#include "backend_cpu/row_chunks.h"
#include "backend_cpu/small_matmul.h"
#include "backend_cpu/unary_fast.h"

namespace lina::cpu {

namespace {

// y = silu(z) and dz = dy · silu'(z) over n elements (y, dz may be z itself),
// on the calling thread: float through the vectorised SiLU of unary_fast.h
// (what the silu op runs), double through the scalar maths of
// core/elementwise_math.h.
template <class T>
void silu_in_row(const T* z, T* y, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    silu_forward_serial(z, y, n);
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = math::Silu::forward(z[i], T(0));
  }
}
template <class T>
void silu_grad_in_row(const T* z, const T* dy, T* dz, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    silu_backward_serial(z, dy, dz, n);
  } else {
    for (int64_t i = 0; i < n; ++i) dz[i] = math::Silu::backward(z[i], T(0), dy[i], T(0));
  }
}
// The two above for a row whose y is needed before its dy: float keeps σ(z)
// in s [n] between them instead of forming it twice (the same bits).
template <class T>
void silu_in_row_keeping_logistic(const T* z, T* y, T* s, int64_t n) {
  if constexpr (std::is_same_v<T, float>) silu_forward_keep_logistic_serial(z, y, s, n);
  else silu_in_row(z, y, n);
}
template <class T>
void silu_grad_in_row_from_logistic(const T* z, const T* s, const T* dy, T* dz, int64_t n) {
  if constexpr (std::is_same_v<T, float>) silu_backward_from_logistic_serial(z, s, dy, dz, n);
  else silu_grad_in_row(z, dy, dz, n);
}

}  // namespace

// Σ_i f(i) over i < n, accumulated in double in kLanes independent partial
// sums (element i goes to lane i mod kLanes) that are added in a fixed
// order at the end: the compiler can keep the lanes in one SIMD register
// instead of waiting on one long chain of additions, and the result does
// not depend on the thread count.
template <class F>
static double sum_in_double_lanes(int64_t n, F f) {
  constexpr int kLanes = 8;
  double lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lane[l] += f(i + l);
  for (int l = 0; i < n; ++i, ++l) lane[l] += f(i);
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

// Σ_i (s a[i]) · (b[i] c[i]) over one row of n (c optional, s = 1 by
// default). Float rows whose length is a whole number of SIMD vectors (a
// head of 32: two; n_embd 128: eight) sum in float lanes, added in a fixed
// tree at the end (small::sum_of_lanes): over 32 or 128 terms float's
// rounding stays far below what a float32 model resolves, and converting
// every element to double cost more than the rest of the row. Other rows,
// and double, sum in double lanes (sum_in_double_lanes).
template <class T>
static double row_dot(int64_t n, const T* a, const T* b, T s = T(1), const T* c = nullptr) {
  constexpr int64_t L = small::kLanes<float>;
  if constexpr (std::is_same_v<T, float>) {
    if (n % L == 0) {
      small::Vec<float> sum = {};
      for (int64_t i = 0; i < n; i += L) {
        const small::Vec<float> bc = c ? small::load(b + i) * small::load(c + i) : small::load(b + i);
        sum += (s * small::load(a + i)) * bc;
      }
      return small::sum_of_lanes<float>(sum);
    }
  }
  return sum_in_double_lanes(n, [&](int64_t i) { return double(s * a[i]) * double(c ? b[i] * c[i] : b[i]); });
}

// ---- rms_norm, and gated: y = w ⊙ ρx (⊙ silu(gate)) --------------------------------------
// gate (optional): the output gate of the recurrent mixers, silu(gate) ⊙
// the norm, with the SwiGLU product's own lines (silu(gate) first, then the
// product), so it gives the bits of rms_norm, then swiglu. Row r of x finds
// its n gates at gate + columns.row_start(r, n) (GateColumns: x's shape, or
// columns of the mixer's wider product z).

// One row xr [n] of rms_norm: its ρ, into *rho; yr = w ⊙ ρx, times silu(gr) where a gate row gr is given.
template <class T>
static void rms_norm_row(const T* xr, const T* w, const T* gr, T* yr, T* rho_out, int64_t n, T eps) {
  const double ss = row_dot(n, xr, xr);
  const T rho = T(1.0 / std::sqrt(ss / double(n) + double(eps)));  // ρ = (mean(x²) + ε)^(−1/2)
  *rho_out = rho;
  if (!gr) {
    for (int64_t i = 0; i < n; ++i) yr[i] = w[i] * (rho * xr[i]);
    return;
  }
  silu_in_row(gr, yr, n);                                                  // y = silu(gate)
  for (int64_t i = 0; i < n; ++i) yr[i] = yr[i] * (w[i] * (rho * xr[i]));  // ⊙ the norm
}

template <class T>
void rms_norm_forward(const T* x, const T* w, const T* gate, const GateColumns& columns, T* y, T* rstd,
                      int64_t rows, int64_t n, T eps) {
  LINA_PARALLEL_FOR_IF(rows * n > kParallelMin)
  for (int64_t r = 0; r < rows; ++r)
    rms_norm_row(x + r * n, w, gate ? gate + columns.row_start(r, n) : nullptr, y + r * n, rstd + r, n, eps);
}

namespace {

// Row r of a gated norm's backward: dgate (= or += with add) = dy ⊙ m ⊙
// silu'(gate) with m = w ⊙ ρx the norm, and dn = dy ⊙ silu(gate), what
// reaches the norm; `work` holds 3n scratch values. gate and dgate lie as
// `columns` says (GateColumns).
template <class T>
void gate_backward_row(int64_t r, const T* x, const T* w, T rho, const T* gate, const GateColumns& columns,
                       const T* dy, T* dgate, bool add_dgate, int64_t n, T* dn, T* work) {
  const T* g = gate + columns.row_start(r, n);
  T* dgr = dgate + columns.row_start(r, n);
  const T* dyr = dy + r * n;
  T* logistic = work;      // [n] σ(gate)
  T* dy_m = work + n;      // [n] dy ⊙ m
  T* dg = work + 2 * n;    // [n]
  silu_in_row_keeping_logistic(g, dn, logistic, n);  // dn = silu(gate) for now
  for (int64_t i = 0; i < n; ++i) {
    dy_m[i] = dyr[i] * (w[i] * (rho * x[r * n + i]));
    dn[i] = dn[i] * dyr[i];  // dn = silu(gate) ⊙ dy
  }
  silu_grad_in_row_from_logistic(g, logistic, dy_m, dg, n);
  for (int64_t i = 0; i < n; ++i) dgr[i] = add_dgate ? dgr[i] + dg[i] : dg[i];
}

// A fresh dgate of a wider product holds 0 outside the gate's columns: the
// first row of x in each of its rows writes them.
template <class T>
void zero_outside_gate(T* dgate, const GateColumns& columns, int64_t r, int64_t n) {
  if ((r * n) % columns.cols != 0) return;
  T* row = dgate + (r * n / columns.cols) * columns.ld;
  for (int64_t j = 0; j < columns.ld - columns.cols; ++j) row[columns.outside(j)] = T(0);
}

}  // namespace

template <class T>
void rms_norm_backward(const T* x, const T* w, const T* gate, const GateColumns& columns, const T* rstd,
                       const T* dy, T* dx, T* dw, T* dgate, int64_t rows, int64_t n, bool add_dx, bool add_dw,
                       bool add_dgate) {
  const int64_t chunks = chunk_count(rows);
  std::vector<T> partial_dw(size_t(chunks * n), T(0));  // [chunks, n]
  LINA_PARALLEL_FOR_IF(rows * n > kParallelMin)
  for (int64_t ch = 0; ch < chunks; ++ch) {
    T* pdw = partial_dw.data() + ch * n;
    std::vector<T> scratch(gate ? size_t(4 * n) : 0);  // dn [n], then the gate's 3n
    const int64_t end = std::min(rows, (ch + 1) * kRowsPerChunk);
    for (int64_t r = ch * kRowsPerChunk; r < end; ++r) {
      const T* xr = x + r * n;
      const T* dyr = dy + r * n;  // what reaches the norm: dy, or dn when gated
      T* dxr = dx + r * n;
      const T rho = rstd[r];
      if (gate) {
        gate_backward_row(r, x, w, rho, gate, columns, dy, dgate, add_dgate, n, scratch.data(),
                          scratch.data() + n);
        if (!add_dgate) zero_outside_gate(dgate, columns, r, n);
        dyr = scratch.data();
      }
      // c = x̂ᵀh / n with x̂ = ρx, h = dy ⊙ w
      const T c = T(row_dot(n, xr, dyr, rho, w) / double(n));
      for (int64_t i = 0; i < n; ++i) {
        const T xhat = rho * xr[i];
        const T g = rho * (dyr[i] * w[i] - xhat * c);  // dx = ρ (h − x̂ c)
        dxr[i] = add_dx ? dxr[i] + g : g;
        pdw[i] += dyr[i] * xhat;                    // dw += dy ⊙ x̂
      }
    }
  }
  reduce_partials(partial_dw, chunks, n, dw, add_dw);
}

// ---- residual_rms_norm: sum = x + h ⊙ M, y = w ⊙ ρ·sum ------------------------------------
// The forward in one pass over the rows: each row's sum, then its norm
// while the row is in cache; the bits are those of residual_dropout then
// rms_norm. The backward is rms_norm's, then dropout's pass for dh.

template <class T>
void residual_rms_norm_forward(const T* x, const T* h, const T* w, T* sum, T* y, T* rstd, int64_t rows,
                               int64_t n, T eps, const DropoutKey& key) {
  LINA_PARALLEL_FOR_IF(rows * n > kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * n;
    const T* hr = h + r * n;
    T* sr = sum + r * n;
    if (key.p > 0) {
      thread_local std::vector<T> factor;  // [n] M of this row
      factor.resize(size_t(n));
      dropout_factors(key, r * n, n, factor.data());
      for (int64_t i = 0; i < n; ++i) sr[i] = xr[i] + hr[i] * factor[size_t(i)];
    } else {
      for (int64_t i = 0; i < n; ++i) sr[i] = xr[i] + hr[i];
    }
    rms_norm_row(sr, w, static_cast<const T*>(nullptr), y + r * n, rstd + r, n, eps);
  }
}

// dsum (+)= the norm's dx, the gradient of x; dh = dsum ⊙ M where dh is wanted
template <class T>
void residual_rms_norm_backward(const T* sum, const T* w, const T* rstd, const T* dy, T* dsum, T* dh, T* dw,
                                int64_t rows, int64_t n, bool add_dsum, bool add_dw, const DropoutKey& key) {
  rms_norm_backward(sum, w, static_cast<const T*>(nullptr), GateColumns{}, rstd, dy, dsum, dw,
                    static_cast<T*>(nullptr), rows, n, add_dsum, add_dw, false);
  if (dh) dropout_apply(static_cast<const T*>(dsum), static_cast<const T*>(nullptr), dh, rows * n, key);
}

// ---- l2_norm ----------------------------------------------------------------------------

// y = s · x / max(‖x‖, ε) with s = scale (1: the plain unit vector; the
// recurrent mixers fold q's 1/√d into it).
// One row of n, for the kernels below and the fused conv + SiLU + L2 norm.
template <class T>
static void l2_norm_forward_row(const T* xr, T* yr, T* norm, int64_t n, T eps, T scale) {
  const T nrm = T(std::sqrt(row_dot(n, xr, xr)));
  *norm = nrm;
  const T inv = scale / (nrm > eps ? nrm : eps);  // s / max(‖x‖, ε)
  for (int64_t i = 0; i < n; ++i) yr[i] = xr[i] * inv;
}

template <class T>
static void l2_norm_backward_row(const T* xr, T nrm, const T* dyr, T* dxr, int64_t n, T eps,
                                 T scale) {
  if (!(nrm > eps)) {  // y = s x / ε is linear in x
    for (int64_t i = 0; i < n; ++i) dxr[i] = scale * dyr[i] / eps;
    return;
  }
  // dx = s (dy − ŷ (ŷᵀdy)) / ‖x‖ with ŷ = x / ‖x‖
  const T inv = T(1) / nrm;
  const T ydy = T(row_dot(n, xr, dyr, inv));  // ŷᵀdy
  const T scaled_inv = scale * inv;
  for (int64_t i = 0; i < n; ++i) dxr[i] = (dyr[i] - xr[i] * inv * ydy) * scaled_inv;
}

template <class T>
void l2_norm_forward(const T* x, T* y, T* norm, int64_t rows, int64_t n, T eps, T scale) {
  LINA_PARALLEL_FOR_IF(rows * n > kParallelMin)
  for (int64_t r = 0; r < rows; ++r) l2_norm_forward_row(x + r * n, y + r * n, norm + r, n, eps, scale);
}

template <class T>
void l2_norm_backward(const T* x, const T* norm, const T* dy, T* dx, int64_t rows, int64_t n,
                      T eps, T scale) {
  LINA_PARALLEL_FOR_IF(rows * n > kParallelMin)
  for (int64_t r = 0; r < rows; ++r)
    l2_norm_backward_row(x + r * n, norm[r], dy + r * n, dx + r * n, n, eps, scale);
}

// ---- causal depthwise conv1d ----------------------------------------------------------------
// x, y [B, T, C]; w [C, K], tap K−1 = the current token.

// w [C, K] as [K, C]: tap j of every channel side by side, so the loops over
// channels read the weights contiguously (and vectorise) like x and y.
template <class T>
static std::vector<T> taps_by_channel(const T* w, int64_t C, int64_t K) {
  std::vector<T> w_kc(static_cast<size_t>(K * C));
  for (int64_t c = 0; c < C; ++c)
    for (int64_t j = 0; j < K; ++j) w_kc[size_t(j * C + c)] = w[c * K + j];
  return w_kc;
}

namespace {

// The row helpers below run over the channels in groups of G SIMD vectors
// (small::Vec: one SIMD register, 16 floats or 8 doubles with AVX-512) while they last, then single
// vectors, then the channels left over one by one. A group's G sums are
// independent, so their FMAs overlap instead of each waiting on the one
// before (a tap's FMA takes ~4 cycles to reach the next). Every path sums
// an element's terms in the same order (taps, or rows, ascending), so they
// give the same bits.
template <class T> constexpr int64_t kSimdLanes = small::kLanes<T>;

// sums[g] = Σ_{j ≥ first_tap} a_j[c + g·L] · b_j[c + g·L] for the G vectors from channel c,
// the taps in ascending order; a(j), b(j) give the rows tap j multiplies.
template <int G, class T, class RowA, class RowB>
void tap_sums(RowA a, RowB b, int64_t first_tap, int64_t K, int64_t c, T* out) {
  constexpr int64_t L = kSimdLanes<T>;
  small::Vec<T> sum[G] = {};
  for (int64_t j = first_tap; j < K; ++j) {
    const T* aj = a(j) + c;
    const T* bj = b(j) + c;
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) sum[g] += small::load(aj + g * L) * small::load(bj + g * L);
  }
  for (int g = 0; g < G; ++g) small::store(out + c + g * L, sum[g]);
}

// out[c] = Σ_{j ≥ first_tap} a_j[c] b_j[c] over the C channels.
template <class T, class RowA, class RowB>
void tap_sums_row(RowA a, RowB b, int64_t first_tap, int64_t K, int64_t C, T* out) {
  constexpr int64_t L = kSimdLanes<T>;
  int64_t c = 0;
  for (; c + 4 * L <= C; c += 4 * L) tap_sums<4, T>(a, b, first_tap, K, c, out);
  for (; c + L <= C; c += L) tap_sums<1, T>(a, b, first_tap, K, c, out);
  for (; c < C; ++c) {
    T sum = T(0);
    for (int64_t j = first_tap; j < K; ++j) sum += a(j)[c] * b(j)[c];
    out[c] = sum;
  }
}

// z = Σ_j w_j x_{t−K+1+j} for row bt = b·T + t, over the C channels (w_kc
// [K, C]; x's rows ldx ≥ C apart, the conv reading their first C columns);
// taps before the sequence start are zero.
template <class T>
void conv_row(const T* x, int64_t ldx, const T* w_kc, T* z, int64_t bt, int64_t T_len, int64_t C,
              int64_t K) {
  const int64_t t = bt % T_len;
  const int64_t first_tap = std::max<int64_t>(0, K - 1 - t);  // taps that reach back past t = 0 are 0
  tap_sums_row(
      [&](int64_t j) { return w_kc + j * C; },
      [&](int64_t j) { return x + (bt - (K - 1 - j)) * ldx; },  // the row tap j reads
      first_tap, K, C, z);
}

// dx_s = Σ_j w_j dz_{s+K−1−j} for row bs = b·T + s (terms past the sequence
// end dropped); dz_row(u) is the gradient row of row index u.
template <class T, class Rows>
void conv_input_grad_row(const T* w_kc, Rows dz_row, T* dx, int64_t bs, int64_t T_len, int64_t C,
                         int64_t K) {
  const int64_t s = bs % T_len;
  const int64_t first_tap = std::max<int64_t>(0, s + K - T_len);  // taps that reach past the end are 0
  tap_sums_row(
      [&](int64_t j) { return w_kc + j * C; },
      [&](int64_t j) { return dz_row(bs + K - 1 - j); },
      first_tap, K, C, dx);
}

// partial [K, C] += dz[c] · x_{bt−K+1+j}[c] for row bt = b·T + t and every
// tap j that stays inside the sequence, for the G vectors of channels from c.
template <int G, class T>
void add_weight_grad_row_vectors(const T* x, int64_t ldx, const T* dz, T* partial, int64_t bt,
                                 int64_t first_tap, int64_t K, int64_t C, int64_t c) {
  constexpr int64_t L = kSimdLanes<T>;
  small::Vec<T> d[G];
  for (int g = 0; g < G; ++g) d[g] = small::load(dz + c + g * L);
  for (int64_t j = first_tap; j < K; ++j) {
    const T* xr = x + (bt - (K - 1 - j)) * ldx + c;
    T* p = partial + j * C + c;
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) small::store(p + g * L, small::load(p + g * L) + d[g] * small::load(xr + g * L));
  }
}

// One row's terms of the conv's dw, added into partial [K, C] (x's rows ldx apart).
template <class T>
void add_weight_grad_row(const T* x, int64_t ldx, const T* dz, T* partial, int64_t bt, int64_t T_len,
                         int64_t C, int64_t K) {
  constexpr int64_t L = kSimdLanes<T>;
  const int64_t first_tap = std::max<int64_t>(0, K - 1 - bt % T_len);
  int64_t c = 0;
  for (; c + 4 * L <= C; c += 4 * L)
    add_weight_grad_row_vectors<4>(x, ldx, dz, partial, bt, first_tap, K, C, c);
  for (; c + L <= C; c += L) add_weight_grad_row_vectors<1>(x, ldx, dz, partial, bt, first_tap, K, C, c);
  for (; c < C; ++c)
    for (int64_t j = first_tap; j < K; ++j) partial[j * C + c] += dz[c] * x[(bt - (K - 1 - j)) * ldx + c];
}

// dw [C, K] (+= where `add`) from the per-chunk partials [chunks, K, C], summed in chunk order.
template <class T>
void weight_grad_from_partials(const std::vector<T>& partial, int64_t chunks, T* dw, int64_t C,
                               int64_t K, bool add) {
  std::vector<T> dw_kc(size_t(K * C));
  reduce_partials(partial, chunks, K * C, dw_kc.data());
  for (int64_t c = 0; c < C; ++c)
    for (int64_t j = 0; j < K; ++j) {
      const T g = dw_kc[size_t(j * C + c)];
      dw[c * K + j] = add ? dw[c * K + j] + g : g;
    }
}

}  // namespace

namespace {
// The conv's forward, row by row in parallel: row bt's z = conv(x) is written
// into y, and finish_row(bt, row) turns it into the op's output in place
// (nothing for the conv alone, SiLU, SiLU then the heads' L2 norms).
template <class T, class FinishRow>
void conv_forward_rows(const T* x, const T* w, T* y, int64_t B, int64_t T_len, int64_t C,
                       int64_t K, FinishRow finish_row) {
  const std::vector<T> w_kc = taps_by_channel(w, C, K);
  LINA_PARALLEL_FOR_IF(B * T_len * C * K > kParallelMin)
  for (int64_t bt = 0; bt < B * T_len; ++bt) {
    conv_row(x, C, w_kc.data(), y + bt * C, bt, T_len, C, K);
    finish_row(bt, y + bt * C);
  }
}
}  // namespace

template <class T>
void causal_conv1d_forward(const T* x, const T* w, T* y, int64_t B, int64_t T_len, int64_t C,
                           int64_t K) {
  conv_forward_rows(x, w, y, B, T_len, C, K, [](int64_t, T*) {});
}

template <class T>
void causal_conv1d_backward(const T* x, const T* w, const T* dy, T* dx, T* dw, int64_t B,
                            int64_t T_len, int64_t C, int64_t K, bool add_dw) {
  const int64_t rows = B * T_len;
  const std::vector<T> w_kc = taps_by_channel(w, C, K);
  auto dy_row = [&](int64_t u) { return dy + u * C; };
  LINA_PARALLEL_FOR_IF(rows * C * K > kParallelMin)
  for (int64_t bs = 0; bs < rows; ++bs)
    conv_input_grad_row(w_kc.data(), dy_row, dx + bs * C, bs, T_len, C, K);
  // dw[c, j] = Σ_b Σ_t dy_t[c] x_{t−K+1+j}[c]; partials laid out [chunks, K, C]
  const int64_t chunks = chunk_count(rows);
  std::vector<T> partial(size_t(chunks * K * C), T(0));
  LINA_PARALLEL_FOR_IF(rows * C * K > kParallelMin)
  for (int64_t ch = 0; ch < chunks; ++ch) {
    const int64_t first = ch * kRowsPerChunk, end = std::min(rows, first + kRowsPerChunk);
    for (int64_t bt = first; bt < end; ++bt)
      add_weight_grad_row(x, C, dy_row(bt), partial.data() + ch * K * C, bt, T_len, C, K);
  }
  weight_grad_from_partials(partial, chunks, dw, C, K, add_dw);
}

// ---- causal depthwise conv1d + SiLU, fused ------------------------------------------------------
// y = silu(z), z = causal_conv1d(x, w), without storing z. The backward
// recomputes z row by row (K taps per element, in the forward's order, so
// the same bits), forms dz = dy ⊙ silu'(z) and runs the conv's backward on
// dz: dx_s = Σ_j w_j dz_{s+K−1−j}, dw[c, j] = Σ_t dz_t[c] x_{t−K+1+j}[c].


template <class T>
void causal_conv1d_silu_forward(const T* x, const T* w, T* y, int64_t B, int64_t T_len, int64_t C,
                                int64_t K) {
  conv_forward_rows(x, w, y, B, T_len, C, K, [C](int64_t, T* z) { silu_in_row(z, z, C); });
}

// The conv's backward of a gradient dz that is formed row by row from the
// recomputed conv output z, in chunks of kRowsPerChunk rows (the rms_norm /
// conv chunks), each in one pass over its rows while they are in cache:
// row r's z is recomputed, form_dz(r, row, scratch) turns it into dz in
// place (scratch: 3·C numbers of its own), dz_r ⊙ x_{r−K+1+j} joins the
// chunk's dw partial, and row r − (K−1), whose dx reads dz of rows r − K + 1
// … r, gets its dx. dz lives in a ring of the last K rows (a power of two of
// rows, so row u sits in slot u & mask). A chunk also recomputes dz for the
// K − 1 rows after it, which its last rows' dx reads. The partials are
// summed in chunk order; each dw element still adds its rows in ascending
// order, so the bits do not depend on the pass's loop order.
// x and dx are [rows, ld ≥ C], the conv's channels their first C columns:
// dx's others are set to 0, or with add_dx kept, its first C added into.
namespace {
template <class T, class FormDz>
void conv_backward_of_recomputed(const T* x, const T* w, T* dx, T* dw, int64_t B, int64_t T_len,
                                 int64_t C, int64_t ld, int64_t K, bool add_dx, bool add_dw, FormDz form_dz) {
  const int64_t rows = B * T_len;
  const std::vector<T> w_kc = taps_by_channel(w, C, K);
  const int64_t chunks = chunk_count(rows);
  int64_t ring_rows = 1;
  while (ring_rows < K) ring_rows *= 2;
  const int64_t mask = ring_rows - 1;
  std::vector<T> partial(size_t(chunks * K * C), T(0));  // [chunks, K, C]
  LINA_PARALLEL_FOR_IF(rows * C * K > kParallelMin)
  for (int64_t ch = 0; ch < chunks; ++ch) {
    const int64_t first = ch * kRowsPerChunk, end = std::min(rows, first + kRowsPerChunk);
    const int64_t stop = std::min(rows, end + K - 1);
    thread_local std::vector<T> ring;  // [ring_rows, C] dz, then the scratch [3, C], then a dx row [C]
    ring.resize(size_t((ring_rows + 4) * C));
    T* scratch = ring.data() + ring_rows * C;
    T* dx_sum = scratch + 3 * C;
    auto dz_row = [&](int64_t u) { return ring.data() + (u & mask) * C; };
    auto input_grad = [&](int64_t s) {
      T* dxr = dx + s * ld;
      conv_input_grad_row(w_kc.data(), dz_row, add_dx ? dx_sum : dxr, s, T_len, C, K);
      if (add_dx) {
        for (int64_t c = 0; c < C; ++c) dxr[c] += dx_sum[c];
      } else {
        std::fill(dxr + C, dxr + ld, T(0));  // a wider product's other columns
      }
    };
    for (int64_t r = first; r < stop; ++r) {
      T* dzr = dz_row(r);
      conv_row(x, ld, w_kc.data(), dzr, r, T_len, C, K);  // z
      form_dz(r, dzr, scratch);
      if (r < end) add_weight_grad_row(x, ld, dzr, partial.data() + ch * K * C, r, T_len, C, K);
      if (r - (K - 1) >= first) input_grad(r - (K - 1));
    }
    // at the last sequence's end (stop = rows), its last rows' dx reads no later row
    for (int64_t s = std::max(first, stop - (K - 1)); s < end; ++s) input_grad(s);
  }
  weight_grad_from_partials(partial, chunks, dw, C, K, add_dw);
}
}  // namespace

template <class T>
void causal_conv1d_silu_backward(const T* x, const T* w, const T* dy, T* dx, T* dw, int64_t B,
                                 int64_t T_len, int64_t C, int64_t K, bool add_dw) {
  conv_backward_of_recomputed(x, w, dx, dw, B, T_len, C, C, K, false, add_dw, [&](int64_t bt, T* z, T*) {
    silu_grad_in_row(z, dy + bt * C, z, C);  // dz = dy ⊙ silu'(z)
  });
}

// ---- causal depthwise conv1d + SiLU + per-head L2 norm, fused ------------------------------------
// q = s · y / max(‖y‖, ε) for each group of `head` channels of y =
// silu(causal_conv1d(x, w)) (a head of q or k) in the first `normed` of the
// `planes` planes of channels (q's, k's; v's pass as they are), storing
// the output plane by plane, [planes, B, T, C/planes], and the norms ‖y‖
// only. Row by row the same code as the three kernels above, so the same
// bits as their composition. The backward recomputes z and y for each row,
// takes the L2 norm's backward to dy, then dz = dy ⊙ silu'(z), and the
// conv's backward of dz as causal_conv1d_silu_backward.

namespace {
// Where the row bt of plane p starts in a [planes, B·T, C/planes] tensor.
inline int64_t plane_row(int64_t p, int64_t bt, int64_t rows, int64_t plane_width) {
  return (p * rows + bt) * plane_width;
}
}  // namespace

template <class T>
void causal_conv1d_silu_l2_norm_forward(const T* x, const T* w, T* y, T* norm, int64_t B,
                                   int64_t T_len, int64_t C, int64_t ld, int64_t K, int64_t head,
                                   int64_t planes, int64_t normed, T eps, T scale) {
  const int64_t rows = B * T_len, width = C / planes, heads = normed * width / head;
  const std::vector<T> w_kc = taps_by_channel(w, C, K);
  LINA_PARALLEL_FOR_IF(rows * C * K > kParallelMin)
  for (int64_t bt = 0; bt < rows; ++bt) {
    thread_local std::vector<T> row_buffer;
    row_buffer.resize(size_t(C));
    T* z = row_buffer.data();  // [C] this token's conv, then its silu, then q / k normalised
    conv_row(x, ld, w_kc.data(), z, bt, T_len, C, K);
    silu_in_row(z, z, C);
    for (int64_t h = 0; h < heads; ++h)
      l2_norm_forward_row(z + h * head, z + h * head, norm + bt * heads + h, head, eps, scale);
    for (int64_t p = 0; p < planes; ++p)
      std::copy(z + p * width, z + (p + 1) * width, y + plane_row(p, bt, rows, width));
  }
}

template <class T>
void causal_conv1d_silu_l2_norm_backward(const T* x, const T* w, const T* norm, const T* dq, T* dx,
                                    T* dw, int64_t B, int64_t T_len, int64_t C, int64_t ld, int64_t K,
                                    int64_t head, int64_t planes, int64_t normed, T eps, T scale,
                                    bool add_dx, bool add_dw) {
  const int64_t rows = B * T_len, width = C / planes, heads = normed * width / head;
  conv_backward_of_recomputed(x, w, dx, dw, B, T_len, C, ld, K, add_dx, add_dw, [&](int64_t bt, T* z, T* scratch) {
    T* y = scratch;           // [C] silu(z)
    T* dy = scratch + C;      // [C] its gradient
    T* sig = scratch + 2 * C;  // [C] σ(z)
    silu_in_row_keeping_logistic(z, y, sig, C);
    for (int64_t p = 0; p < planes; ++p) {  // this row of dq, plane by plane, into dy [C]
      const T* dq_row = dq + plane_row(p, bt, rows, width);
      std::copy(dq_row, dq_row + width, dy + p * width);
    }
    for (int64_t h = 0; h < heads; ++h)  // dy, through each normalised head's L2 norm
      l2_norm_backward_row(y + h * head, norm[bt * heads + h], dy + h * head, dy + h * head, head,
                           eps, scale);
    silu_grad_in_row_from_logistic(z, sig, dy, z, C);  // dz = dy ⊙ silu'(z)
  });
}

// ---- rope -------------------------------------------------------------------------------------
// x, y [B, T, H, D]; dimension 2j is paired with 2j + 1 (interleaved) and rotated by
// θ = (pos0 + t) · base^(−2j/D); `inverse` rotates by −θ (the backward).

template <class T>
void rope_apply(const T* x, T* y, int64_t B, int64_t T_len, int64_t H, int64_t D, int64_t pos0,
                double base, bool inverse) {
  const int64_t half = D / 2;
  // cos/sin table [T, D/2], angles in double
  std::vector<T> cos_t(size_t(T_len * half)), sin_t(size_t(T_len * half));
  for (int64_t j = 0; j < half; ++j) {
    const double inv_freq = std::pow(base, -2.0 * double(j) / double(D));
    for (int64_t t = 0; t < T_len; ++t) {
      const double theta = double(pos0 + t) * inv_freq;
      cos_t[size_t(t * half + j)] = T(std::cos(theta));
      sin_t[size_t(t * half + j)] = T(inverse ? -std::sin(theta) : std::sin(theta));
    }
  }
  const int64_t rows = B * T_len * H;
  LINA_PARALLEL_FOR_IF(rows * D > kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = (r / H) % T_len;
    const T* cs = cos_t.data() + t * half;
    const T* sn = sin_t.data() + t * half;
    const T* xr = x + r * D;
    T* yr = y + r * D;
    for (int64_t j = 0; j < half; ++j) {
      const T a = xr[2 * j], b = xr[2 * j + 1];  // the interleaved pair (2j, 2j + 1)
      yr[2 * j] = a * cs[j] - b * sn[j];
      yr[2 * j + 1] = b * cs[j] + a * sn[j];
    }
  }
}

LINA_INSTANTIATE_CPU_KERNELS(NORM_CONV_ROPE)  // float and double, from core/op_list.h

}  // namespace lina::cpu
