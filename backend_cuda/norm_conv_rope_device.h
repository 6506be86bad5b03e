// The per-thread work of the CUDA causal conv1d (alone and fused with SiLU),
// rope and weight-gradient kernels (backend_cuda/norm_conv_rope.cu), as
// LINA_HD functions that follow the CPU backend's formulas and summation
// orders (backend_cpu/norm_conv_rope.cpp).
//
// Names as in backend_cpu/cpu_kernels.h: rows of length n; B = batch,
// T = sequence length, C = channels, K = conv taps; H = heads, D = head
// dimension.
//
// The norms' row kernels are written in norm_conv_rope.cu, a warp per row.
//
// Determinism: no floating-point atomics. A row's Σ (the norms) is a warp's
// butterfly (warp_reduce.cuh); the weight gradients summed over many rows
// (rms_norm dw, conv dw) take two passes, like the CPU: each thread sums a
// fixed chunk of kRowsPerChunk rows in row order into a partial buffer, then
// one thread per weight adds the partials in chunk order (on the launch's
// last block, last_block.cuh). The chunks are the CPU's, so the
// result is the CPU's summation, term for term.
#pragma once
#include <cmath>
#include <cstdint>

#include "backend_cuda/kernels_device.h"

namespace lina::cuda {

// ---- shared pieces ----------------------------------------------------------------

// Rows per chunk of a weight-gradient partial sum (the CPU backend's value).
constexpr int64_t kRowsPerChunk = 128;
LINA_HD int64_t row_chunks(int64_t rows) { return (rows + kRowsPerChunk - 1) / kRowsPerChunk; }

// out[e] = Σ_chunk partial[chunk, e] in chunk order; partial [chunks, width].
LINA_HD void sum_partials_thread(int64_t e, const float* partial, int64_t chunks, int64_t width,
                                 float* out, bool add) {
  float s = 0.0f;
  for (int64_t ch = 0; ch < chunks; ++ch) s += partial[ch * width + e];
  out[e] = add ? out[e] + s : s;  // out += s, or out = s
}

// ---- rms_norm's weight gradient ----------------------------------------------------
// What reaches the norm of element e: dy, or for the gated norm dy ⊙ silu(gate)
// (the SwiGLU product's backward, the same bits); e's gate at gate[g.index(e)].
LINA_HD float rms_norm_dn(int64_t e, const float* dy, const float* gate, const GateColumns& g) {
  return gate ? dy[e] * math::Silu::forward(gate[g.index(e)], 0.0f) : dy[e];
}

// dw pass 1: thread idx = chunk·n + i sums dn ⊙ x̂ over the chunk's rows, in
// row order: partial[chunk, i] = Σ_r dn[r, i] · ρ_r x[r, i]; partial [chunks, n].
LINA_HD void rms_norm_dw_partial_thread(int64_t idx, const float* x, const float* gate, const GateColumns& g,
                                        const float* rstd, const float* dy, float* partial, int64_t rows,
                                        int64_t n) {
  const int64_t chunk = idx / n, i = idx % n;
  const int64_t first = chunk * kRowsPerChunk;
  const int64_t end = first + kRowsPerChunk < rows ? first + kRowsPerChunk : rows;
  float s = 0.0f;
  for (int64_t r = first; r < end; ++r) s += rms_norm_dn(r * n + i, dy, gate, g) * (rstd[r] * x[r * n + i]);
  partial[idx] = s;
}
// dw pass 2: sum_partials_thread(i, partial, row_chunks(rows), n, dw, add_dw).

// ---- causal depthwise conv1d ------------------------------------------------------------
// x, y, dy, dx [B, T, C]; w, dw [C, K], tap K−1 = the current token; tokens
// before the sequence start are zeros. Thread idx = (b·T + t)·C + c.

// z_t[c] = Σ_j w[c, j] x_{t−K+1+j}[c] of the token bt = b·T + t; x's rows
// are ld long (C, or a wider product's row whose first C columns the conv reads)
LINA_HD float causal_conv1d_value(int64_t bt, int64_t c, const float* x, const float* w,
                                  int64_t T_len, int64_t ld, int64_t K) {
  const int64_t b = bt / T_len, t = bt % T_len;
  float s = 0.0f;
  for (int64_t j = 0; j < K; ++j) {
    const int64_t src = t - K + 1 + j;
    if (src >= 0) s += w[c * K + j] * x[(b * T_len + src) * ld + c];
  }
  return s;
}

// y_t[c] = Σ_j w[c, j] x_{t−K+1+j}[c]
LINA_HD void causal_conv1d_forward_thread(int64_t idx, const float* x, const float* w, float* y,
                                          int64_t T_len, int64_t C, int64_t K) {
  y[idx] = causal_conv1d_value(idx / C, idx % C, x, w, T_len, C, K);
}

// dx_s[c] = Σ_j w[c, j] dy_{s+K−1−j}[c] of the token bs = b·T + s, terms
// past the sequence end dropped; dy [B, T, C]
LINA_HD float causal_conv1d_dx_value(int64_t bs, int64_t c, const float* w, const float* dy,
                                     int64_t T_len, int64_t C, int64_t K) {
  const int64_t b = bs / T_len, s = bs % T_len;
  float acc = 0.0f;
  for (int64_t j = 0; j < K; ++j) {
    const int64_t t = s + K - 1 - j;
    if (t < T_len) acc += w[c * K + j] * dy[(b * T_len + t) * C + c];
  }
  return acc;
}

// Element idx = bs·ld + c of dx [B, T, ld]: the value above in the conv's C
// columns, 0 in a wider product's others; with add, the value added into
// the conv's columns (a sum another op's backward began) and the others kept.
LINA_HD void causal_conv1d_dx_thread(int64_t idx, const float* w, const float* dy, float* dx,
                                     int64_t T_len, int64_t C, int64_t ld, int64_t K, bool add) {
  const int64_t bs = idx / ld, c = idx % ld;
  if (c >= C) {
    if (!add) dx[idx] = 0.0f;
    return;
  }
  const float v = causal_conv1d_dx_value(bs, c, w, dy, T_len, C, K);
  dx[idx] = add ? dx[idx] + v : v;
}

// dw pass 1, partial [chunks, K, C]: thread idx = (chunk·K + j)·C + c sums
// dy_t[c] · x_{t−K+1+j}[c] over the chunk's rows bt = b·T + t, in row order;
// x's rows ld long, dy's C.
LINA_HD void causal_conv1d_dw_partial_thread(int64_t idx, const float* x, const float* dy,
                                             float* partial, int64_t B, int64_t T_len, int64_t C,
                                             int64_t ld, int64_t K) {
  const int64_t c = idx % C, j = (idx / C) % K, chunk = idx / (C * K);
  const int64_t rows = B * T_len;
  const int64_t first = chunk * kRowsPerChunk;
  const int64_t end = first + kRowsPerChunk < rows ? first + kRowsPerChunk : rows;
  float s = 0.0f;
  for (int64_t bt = first; bt < end; ++bt) {
    const int64_t b = bt / T_len, t = bt % T_len;
    const int64_t src = t - K + 1 + j;
    if (src >= 0) s += dy[bt * C + c] * x[(b * T_len + src) * ld + c];
  }
  partial[idx] = s;
}

// dw pass 2: thread idx = c·K + j adds the chunks' partials in chunk order
// (the partials are [chunks, K, C], dw is [C, K]); dw += the sum where `add`.
LINA_HD void causal_conv1d_dw_sum_thread(int64_t idx, const float* partial, float* dw,
                                         int64_t chunks, int64_t C, int64_t K, bool add) {
  const int64_t c = idx / K, j = idx % K;
  float s = 0.0f;
  for (int64_t ch = 0; ch < chunks; ++ch) s += partial[(ch * K + j) * C + c];
  dw[idx] = add ? dw[idx] + s : s;
}

// ---- causal depthwise conv1d + SiLU, fused -----------------------------------------------
// y = silu(z), z = the conv above, z never stored. The backward recomputes z
// per element (K taps, in the forward's order), writes dz = dy · silu'(z)
// into a scratch [B, T, C], and runs the conv's dx and dw programs above on
// dz in place of dy. Thread idx = (b·T + t)·C + c.

// y_t[c] = silu(Σ_j w[c, j] x_{t−K+1+j}[c])
LINA_HD void causal_conv1d_silu_forward_thread(int64_t idx, const float* x, const float* w,
                                               float* y, int64_t T_len, int64_t C, int64_t K) {
  causal_conv1d_forward_thread(idx, x, w, y, T_len, C, K);  // z
  y[idx] = math::Silu::forward(y[idx], 0.0f);
}

// dz_t[c] = dy_t[c] · silu'(z_t[c]), z recomputed from x and w
LINA_HD void causal_conv1d_silu_dz_thread(int64_t idx, const float* x, const float* w,
                                          const float* dy, float* dz, int64_t T_len, int64_t C,
                                          int64_t K) {
  causal_conv1d_forward_thread(idx, x, w, dz, T_len, C, K);  // z
  dz[idx] = math::Silu::backward(dz[idx], 0.0f, dy[idx], 0.0f);
}

// ---- rope ------------------------------------------------------------------------------
// x, y [B, T, H, D], D even. Thread idx = r·(D/2) + j, r = (b·T + t)·H + h,
// rotates the interleaved pair (x[r, 2j], x[r, 2j + 1]) by θ = (pos0 + t)·base^(−2j/D)
// (by −θ when inverse):
//   y[2j]     = a cos θ − b sin θ
//   y[2j + 1] = b cos θ + a sin θ        (a = x[2j], b = x[2j + 1])
// The angle, cos and sin are computed in double and rounded to float, as the
// CPU's table is.
LINA_HD void rope_thread(int64_t idx, const float* x, float* y, int64_t T_len, int64_t H,
                         int64_t D, int64_t pos0, double base, bool inverse) {
  const int64_t half = D / 2;
  const int64_t r = idx / half, j = idx % half;
  const int64_t t = (r / H) % T_len;
  const double inv_freq = ::pow(base, -2.0 * double(j) / double(D));
  const double theta = double(pos0 + t) * inv_freq;
  const float cs = float(::cos(theta));
  const float sn = float(inverse ? -::sin(theta) : ::sin(theta));
  const float a = x[r * D + 2 * j], b = x[r * D + 2 * j + 1];
  y[r * D + 2 * j] = a * cs - b * sn;
  y[r * D + 2 * j + 1] = b * cs + a * sn;
}

}  // namespace lina::cuda
