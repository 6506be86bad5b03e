// The scan on the GPU token by token (float32, docs/recurrence.md §1–2 and
// recurrence-gated.md §4): the simple reference beside the chunked kernels
// of scan_chunked.cu, and the twin of backend_cpu/scan_sequential.cpp. One
// block per (batch, head), one thread per value row i of the d×d state.
//
// Written with a decay per key channel, α_tj = exp(log α_tj) (scan_log_alpha
// in core/kernel_args.h); a rule with one decay per head gives every channel
// the same α, and a rule without decay α = 1:
//   S_t = S_{t−1} diag(α_t) + u_t k_tᵀ,   o_t = S_t q_t
//   u_t = β_t (v_t − S_{t−1} diag(α_t) k_t)   (delta rules),   u_t = v_t   (the others)
// Layouts: q, k, v, o [B, T, H, d]; beta [B, T, H]; log_alpha [B, T, H] (or
// [B, T, H, d] per channel); states [B, H, d, d] value × key; saved states
// [B, H, T, d, d], S_{t−1} for token t. Outputs are written (=).
#include <string>

#include "backend_cuda/cuda_context.h"
#include "backend_cuda/cuda_kernels.h"
#include "backend_cuda/scratch.h"
#include "core/error.h"

namespace lina::cuda {

namespace {

// Index of token t of (batch, head) pair bh = b·H + h in a [B, T, H] tensor.
__device__ inline int64_t head_token(const ScanShape& s, int64_t bh, int64_t t) {
  return ((bh / s.H) * s.T + t) * s.H + bh % s.H;
}

// α_tj, the decay of key channel j at `token` (1 without decay).
__device__ inline float decay_at(const ScanShape& s, const float* log_alpha, int64_t token, int64_t j) {
  return decays(s.rule) ? expf(scan_log_alpha(s, log_alpha, token, j)) : 1.0f;
}

// Row i of S_t depends on row i of S_{t−1} only, so thread i carries its row
// (in final_state, where it ends) with no barrier. grid B·H, block d.
__global__ void scan_sequential_forward_kernel(ScanShape s, const float* q, const float* k, const float* v,
                                               const float* beta, const float* log_alpha, const float* initial_state, float* o,
                                               float* final_state, float* states) {
  const int64_t bh = blockIdx.x, d = s.d, dd = d * d, i = threadIdx.x;
  float* S = final_state + bh * dd + i * d;  // row i of the running state
  for (int64_t j = 0; j < d; ++j) S[j] = initial_state ? initial_state[bh * dd + i * d + j] : 0.0f;
  for (int64_t t = 0; t < s.T; ++t) {
    const int64_t token = head_token(s, bh, t);
    const float *q_t = q + token * d, *k_t = k + token * d, *v_t = v + token * d;
    if (states)  // S_{t−1}, row i
      for (int64_t j = 0; j < d; ++j) states[(bh * s.T + t) * dd + i * d + j] = S[j];
    float u = v_t[i];
    if (uses_beta(s.rule)) {  // u_i = β (v_i − (S_{t−1} diag(α) k)_i)
      float p = 0.0f;
      for (int64_t j = 0; j < d; ++j) p += S[j] * decay_at(s, log_alpha, token, j) * k_t[j];
      u = beta[token] * (v_t[i] - p);
    }
    float o_i = 0.0f;  // S_t row i = S_{t−1} row i ⊙ α + u_i k;  o_i = S_t row i · q
    for (int64_t j = 0; j < d; ++j) {
      S[j] = decay_at(s, log_alpha, token, j) * S[j] + u * k_t[j];
      o_i += S[j] * q_t[j];
    }
    o[token * d + i] = o_i;
  }
}

// The reverse-time recurrence of recurrence.md §2.1 with G = dL/dS_t in
// shared memory; per token, thread x takes row i = x, then column j = x:
//   rows     G += dO qᵀ (now dL/dS_t);  e = G k (= dL/du);  r = v − S_{t−1} diag(α) k;  u;  dv
//   columns  dq = diag(α) S_{t−1}ᵀ dO + (u·dO) k;   dk = Gᵀ u − β diag(α) S_{t−1}ᵀ e;
//            d log α_j = α_j (Σ_i G_ij S_ij − β k_j Σ_i e_i S_ij)   (per channel; summed per head)
//   thread 0 dβ = e·r, and the per-head dlog_alpha
//   rows     G ← (G − β e kᵀ) diag(α)   (= dL/dS_{t−1})
// (u = β r and the β terms for the delta rules; u = v and none for the others.)
// grid B·H, block d; shared G [d][d], then e, u, r, d log α_j [d].
__global__ void scan_sequential_backward_kernel(ScanShape s, const float* q, const float* k, const float* v,
                                                const float* beta, const float* log_alpha, const float* states,
                                                const float* dout, const float* dfinal_state, float* dq,
                                                float* dk, float* dv, float* dbeta, float* dlog_alpha, float* dinitial_state) {
  const int64_t bh = blockIdx.x, d = s.d, dd = d * d, x = threadIdx.x;
  const bool delta = uses_beta(s.rule);
  LINA_DYNAMIC_SHARED(float, shared);
  float *G = shared, *e = G + dd, *u = e + d, *r = u + d, *dlog_alpha_channel = r + d;
  for (int64_t ij = x; ij < dd; ij += d) G[ij] = dfinal_state ? dfinal_state[bh * dd + ij] : 0.0f;
  __syncthreads();
  for (int64_t t = s.T - 1; t >= 0; --t) {
    const int64_t token = head_token(s, bh, t);
    const float *q_t = q + token * d, *k_t = k + token * d, *v_t = v + token * d, *dO = dout + token * d;
    const float* S = states + (bh * s.T + t) * dd;  // S_{t−1}
    const float b = delta ? beta[token] : 1.0f;
    {  // rows: i = x
      float e_i = 0.0f, p_i = 0.0f;
      for (int64_t j = 0; j < d; ++j) {
        G[x * d + j] += dO[x] * q_t[j];
        e_i += G[x * d + j] * k_t[j];
        p_i += S[x * d + j] * decay_at(s, log_alpha, token, j) * k_t[j];
      }
      e[x] = e_i;
      r[x] = v_t[x] - p_i;
      u[x] = delta ? b * r[x] : v_t[x];
      dv[token * d + x] = delta ? b * e_i : e_i;
    }
    __syncthreads();
    {  // columns: j = x
      const float alpha_j = decay_at(s, log_alpha, token, x);
      float S_do = 0.0f, S_e = 0.0f, G_u = 0.0f, G_S = 0.0f, u_do = 0.0f;
      for (int64_t i = 0; i < d; ++i) {
        S_do += S[i * d + x] * dO[i];
        S_e += S[i * d + x] * e[i];
        G_u += G[i * d + x] * u[i];
        G_S += G[i * d + x] * S[i * d + x];
        u_do += u[i] * dO[i];
      }
      dq[token * d + x] = alpha_j * S_do + u_do * k_t[x];
      dk[token * d + x] = delta ? G_u - b * alpha_j * S_e : G_u;
      dlog_alpha_channel[x] = alpha_j * (G_S - (delta ? b * k_t[x] * S_e : 0.0f));
    }
    __syncthreads();
    if (x == 0) {
      float dbeta_t = 0.0f, dlog_alpha_t = 0.0f;
      for (int64_t i = 0; i < d; ++i) {
        dbeta_t += e[i] * r[i];
        dlog_alpha_t += dlog_alpha_channel[i];
      }
      if (delta) dbeta[token] = dbeta_t;
      if (learns_decay(s.rule) && decays_per_channel(s.rule))
        for (int64_t j = 0; j < d; ++j) dlog_alpha[token * d + j] = dlog_alpha_channel[j];
      else if (learns_decay(s.rule))
        dlog_alpha[token] = dlog_alpha_t;
    }
    for (int64_t j = 0; j < d; ++j)  // rows: i = x
      G[x * d + j] = decay_at(s, log_alpha, token, j) * (G[x * d + j] - (delta ? b * e[x] * k_t[j] : 0.0f));
    __syncthreads();  // thread 0 is done with e, r, d log α_j; every row of G is dL/dS_{t−1}
  }
  for (int64_t ij = x; ij < dd; ij += d) dinitial_state[bh * dd + ij] = G[ij];
}

// One block of d threads per (batch, head).
void check_sequential_shape(const ScanShape& s) {
  check(s.d <= 1024, "cuda::scan_sequential: one thread per state row, at most 1024, got d = " +
                         std::to_string(s.d));
}

}  // namespace

void scan_sequential_forward(const ScanShape& s, const ScanInputs<float>& in, const float* initial_state, float* o,
                             float* final_state, float* states) {
  check_sequential_shape(s);
  LINA_LAUNCH(scan_sequential_forward_kernel, unsigned(s.B * s.H), unsigned(s.d), 0, context().stream)(
      s, in.q, in.k, in.v, in.beta, in.log_alpha, initial_state, o, final_state, states);
  LINA_CHECK_LAUNCH("cuda::scan_sequential_forward");
}

void scan_sequential_backward(const ScanShape& s, const ScanInputs<float>& in, const float* states,
                              const float* dout, const float* dfinal_state, const ScanInputGrads<float>& grads) {
  check_sequential_shape(s);
  const size_t shared_bytes = size_t(s.d * s.d + 4 * s.d) * sizeof(float);
  with_shared_memory(scan_sequential_backward_kernel, shared_bytes, "cuda::scan_sequential_backward");
  const unsigned pairs = unsigned(s.B * s.H), threads = unsigned(s.d);
  LINA_LAUNCH(scan_sequential_backward_kernel, pairs, threads, shared_bytes, context().stream)(
      s, in.q, in.k, in.v, in.beta, in.log_alpha, states, dout, dfinal_state, grads.dq, grads.dk, grads.dv, grads.dbeta,
      grads.dlog_alpha, grads.dinitial_state);
  LINA_CHECK_LAUNCH("cuda::scan_sequential_backward");
}

}  // namespace lina::cuda
