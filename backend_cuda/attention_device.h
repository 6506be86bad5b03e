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
// floats at a time from global memory, and every score is recomputed where
// it is needed (the probabilities are never stored: P_ij = e^{S_ij − lse_i},
// lse_i the row's log-sum-exp the forward keeps).
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
// S_ij = scale · q_i · k_j: query row r's score of key j.
LINA_HD float attention_score(const AttentionShape& s, const QueryRow& r, const float* qi, const float* k,
                              int64_t j) {
  return float(s.scale) * dot_d(qi, k + kv_offset(s, r.b, j, r.kvh), s.d);
}
// P_ij = e^{S_ij − lse_i}: the probability, rebuilt from the row's log-sum-exp.
LINA_HD float attention_prob(const AttentionShape& s, const QueryRow& r, const float* qi, const float* k,
                             float row_lse, int64_t j) {
  return expf(attention_score(s, r, qi, k, j) - row_lse);
}

// lse_i = log Σ_j e^{S_ij} over the visible keys (m + log Σ_j e^{S_ij − m},
// m the largest score), then out_i = Σ_j P_ij M_ij v_j in key order (M the
// dropout factors, core/philox.h: all 1 without dropout). Three passes over
// the keys, each recomputing the scores.
LINA_HD void attention_forward_thread(int64_t row, const AttentionShape& s, const float* q,
                                      const float* k, const float* v, float* lse, float* out) {
  const QueryRow r = query_row(s, row);
  const float* qi = q + q_offset(s, r.b, r.i, r.h);
  float m = -INFINITY;
  for (int64_t j = 0; j < r.visible; ++j) {
    const float score = attention_score(s, r, qi, k, j);
    m = score > m ? score : m;
  }
  float sum = 0.0f;
  for (int64_t j = 0; j < r.visible; ++j) sum += expf(attention_score(s, r, qi, k, j) - m);
  const float row_lse = m + logf(sum);
  lse[row] = row_lse;
  float* oi = out + q_offset(s, r.b, r.i, r.h);
  for (int64_t c = 0; c < s.d; ++c) oi[c] = 0.0f;
  for (int64_t j = 0; j < r.visible; ++j) {
    const float pm = attention_prob(s, r, qi, k, row_lse, j) * dropout_factor<float>(s.dropout, row * s.Tk + j);
    const float* vj = v + kv_offset(s, r.b, j, r.kvh);
    for (int64_t c = 0; c < s.d; ++c) oi[c] += pm * vj[c];
  }
}

// dscores row: dP_ij = M_ij (dout_i · v_j), then scale · P_ij (dP_ij − D_i),
// D_i = Σ_j P_ij dP_ij; dq_i = Σ_j dscores_ij k_j (each sum in key order).
LINA_HD void attention_backward_query_thread(int64_t row, const AttentionShape& s, const float* q,
                                             const float* k, const float* v, const float* lse,
                                             const float* dout, float* dscores, float* dq) {
  const QueryRow r = query_row(s, row);
  const float* qi = q + q_offset(s, r.b, r.i, r.h);
  const float* doi = dout + q_offset(s, r.b, r.i, r.h);
  float* ds = dscores + row * s.Tk;
  float D = 0.0f;
  for (int64_t j = 0; j < r.visible; ++j) {
    ds[j] = dropout_factor<float>(s.dropout, row * s.Tk + j) * dot_d(doi, v + kv_offset(s, r.b, j, r.kvh), s.d);
    D += attention_prob(s, r, qi, k, lse[row], j) * ds[j];
  }
  for (int64_t j = 0; j < r.visible; ++j)
    ds[j] = float(s.scale) * attention_prob(s, r, qi, k, lse[row], j) * (ds[j] - D);
  for (int64_t j = r.visible; j < s.Tk; ++j) ds[j] = 0.0f;
  float* dqi = dq + q_offset(s, r.b, r.i, r.h);
  for (int64_t c = 0; c < s.d; ++c) {
    float acc = 0.0f;
    for (int64_t j = 0; j < r.visible; ++j) acc += ds[j] * k[kv_offset(s, r.b, j, r.kvh) + c];
    dqi[c] = acc;
  }
}

// Key row `row` = (b·Hkv + kvh)·Tk + j: dk_j = Σ_heads Σ_i dscores_ij q_i and
// dv_j = Σ_heads Σ_i P_ij M_ij dout_i over the queries i that see key j.
LINA_HD void attention_backward_key_thread(int64_t row, const AttentionShape& s, const float* q,
                                           const float* k, const float* lse, const float* dout,
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
        const int64_t at = (bh * s.Tq + i) * s.Tk + j, query = bh * s.Tq + i;
        const QueryRow r = query_row(s, query);
        const float p = attention_prob(s, r, q + q_offset(s, b, i, h), k, lse[query], j);
        acc_k += dscores[at] * q[q_offset(s, b, i, h) + c];
        acc_v += p * dropout_factor<float>(s.dropout, at) * dout[q_offset(s, b, i, h) + c];
      }
    }
    dkj[c] = acc_k;
    dvj[c] = acc_v;
  }
}

}  // namespace lina::cuda
