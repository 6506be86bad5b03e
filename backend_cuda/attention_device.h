// The per-thread work of the reference CUDA causal attention
// (attention_reference.cu), as LINA_HD functions: the .cu launches them in
// grid-stride loops; tests/cuda/test_attention.cpp checks the tiled kernels
// (attention.cu) against them.
// Shapes and maths: core/kernel_args.h
// (AttentionShape) and backend_cpu/attention.cpp.
//
// One thread per query row (b, h, i) for the forward and for dq; one thread
// per key row (b, kv head, j) for dk and dv, which loops over the query heads
// of its group and the queries that see key j in a fixed order: no atomics,
// the same bits on every run. Simple rather than fast: a row is read d
// floats at a time from global memory.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/elementwise_math.h"  // LINA_HD
#include "core/kernel_args.h"

namespace lina::cuda {

// Where query row `row` = (b·H + h)·Tq + i lives.
struct QueryRow {
  int64_t b, h, i, kvh;
  int64_t visible;  // keys 0 … visible−1
};
LINA_HD QueryRow query_row(const AttentionShape& s, int64_t row) {
  QueryRow r;
  r.i = row % s.Tq;
  const int64_t bh = row / s.Tq;
  r.b = bh / s.H;
  r.h = bh % s.H;
  r.kvh = r.h / (s.H / s.Hkv);
  r.visible = r.i + (s.Tk - s.Tq) + 1;
  return r;
}
LINA_HD int64_t q_offset(const AttentionShape& s, int64_t b, int64_t i, int64_t h) {
  return ((b * s.Tq + i) * s.H + h) * s.d;
}
LINA_HD int64_t kv_offset(const AttentionShape& s, int64_t b, int64_t j, int64_t kvh) {
  return ((b * s.Tk + j) * s.Hkv + kvh) * s.d;
}
LINA_HD float dot_d(const float* a, const float* b, int64_t d) {
  float acc = 0.0f;
  for (int64_t c = 0; c < d; ++c) acc += a[c] * b[c];
  return acc;
}
// out[c] = Σ_{j < visible} w_j · m_j · x_j[c], x_j the key row j of r's KV
// head in x [B, Tk, Hkv, d] (v for the output, k for dq); m_j the dropout
// factor of probs element first + j when `dropout` (else 1).
LINA_HD void weighted_key_rows(const AttentionShape& s, const QueryRow& r, const float* w,
                               const float* x, float* out, bool dropout = false,
                               int64_t first = 0) {
  for (int64_t c = 0; c < s.d; ++c) {
    float acc = 0.0f;
    for (int64_t j = 0; j < r.visible; ++j) {
      const float m = dropout ? dropout_factor<float>(s.dropout, first + j) : 1.0f;
      acc += w[j] * m * x[kv_offset(s, r.b, j, r.kvh) + c];
    }
    out[c] = acc;
  }
}

// probs row = softmax over the visible keys of scale · q_i · k_j (0 beyond),
// out_i = Σ_j probs_ij M_ij v_j (M the dropout factors, core/philox.h: all 1
// without dropout).
LINA_HD void attention_forward_thread(int64_t row, const AttentionShape& s, const float* q,
                                      const float* k, const float* v, float* probs, float* out) {
  const QueryRow r = query_row(s, row);
  const float* qi = q + q_offset(s, r.b, r.i, r.h);
  float* p = probs + row * s.Tk;
  float m = -INFINITY;
  for (int64_t j = 0; j < r.visible; ++j) {
    p[j] = float(s.scale) * dot_d(qi, k + kv_offset(s, r.b, j, r.kvh), s.d);
    m = p[j] > m ? p[j] : m;
  }
  float sum = 0.0f;
  for (int64_t j = 0; j < r.visible; ++j) {
    p[j] = expf(p[j] - m);
    sum += p[j];
  }
  for (int64_t j = 0; j < r.visible; ++j) p[j] /= sum;
  for (int64_t j = r.visible; j < s.Tk; ++j) p[j] = 0.0f;
  weighted_key_rows(s, r, p, v, out + q_offset(s, r.b, r.i, r.h), s.dropout.p > 0, row * s.Tk);
}

// dscores row: dP_ij = M_ij (dout_i · v_j), then scale · P_ij (dP_ij − Σ_j P_ij dP_ij);
// dq_i = Σ_j dscores_ij k_j.
LINA_HD void attention_backward_query_thread(int64_t row, const AttentionShape& s,
                                             const float* k, const float* v, const float* probs,
                                             const float* dout, float* dscores, float* dq) {
  const QueryRow r = query_row(s, row);
  const float* doi = dout + q_offset(s, r.b, r.i, r.h);
  const float* p = probs + row * s.Tk;
  float* ds = dscores + row * s.Tk;
  float D = 0.0f;
  for (int64_t j = 0; j < r.visible; ++j) {
    ds[j] = dropout_factor<float>(s.dropout, row * s.Tk + j) *
            dot_d(doi, v + kv_offset(s, r.b, j, r.kvh), s.d);
    D += p[j] * ds[j];
  }
  for (int64_t j = 0; j < r.visible; ++j) ds[j] = float(s.scale) * p[j] * (ds[j] - D);
  for (int64_t j = r.visible; j < s.Tk; ++j) ds[j] = 0.0f;
  weighted_key_rows(s, r, ds, k, dq + q_offset(s, r.b, r.i, r.h));
}

// Key row `row` = (b·Hkv + kvh)·Tk + j: dk_j = Σ_heads Σ_i dscores_ij q_i and
// dv_j = Σ_heads Σ_i probs_ij M_ij dout_i over the queries i that see key j.
LINA_HD void attention_backward_key_thread(int64_t row, const AttentionShape& s, const float* q,
                                           const float* probs, const float* dout,
                                           const float* dscores, float* dk, float* dv) {
  const int64_t j = row % s.Tk, bkv = row / s.Tk;
  const int64_t b = bkv / s.Hkv, kvh = bkv % s.Hkv, group = s.H / s.Hkv;
  int64_t i0 = j - (s.Tk - s.Tq);  // the first query that sees key j
  if (i0 < 0) i0 = 0;
  float* dkj = dk + kv_offset(s, b, j, kvh);
  float* dvj = dv + kv_offset(s, b, j, kvh);
  for (int64_t c = 0; c < s.d; ++c) {
    float acc_k = 0.0f, acc_v = 0.0f;
    for (int64_t g = 0; g < group; ++g) {
      const int64_t h = kvh * group + g, bh = b * s.H + h;
      for (int64_t i = i0; i < s.Tq; ++i) {
        const int64_t at = (bh * s.Tq + i) * s.Tk + j;
        acc_k += dscores[at] * q[q_offset(s, b, i, h) + c];
        acc_v += probs[at] * dropout_factor<float>(s.dropout, at) * dout[q_offset(s, b, i, h) + c];
      }
    }
    dkj[c] = acc_k;
    dvj[c] = acc_v;
  }
}

}  // namespace lina::cuda
