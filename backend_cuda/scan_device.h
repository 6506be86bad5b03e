// The scan on the GPU, token by token (docs/recurrence.md §1–2), as block programs
// (backend_cuda/block_program.h): one block of 32 threads per (batch, head),
// thread i owning row i of the d×d state (value channel i). The twin of
// backend_cpu/scan_sequential.cpp, which the tests compare it with. The
// chunked form is in scan_chunked_device.h; both share ScanArgs.
//
// The programs are written with a decay per key channel, a_j = exp(g_j)
// (scan_log_decay in core/kernel_args.h): a rule whose gate is one number per
// head gives every channel the same a, so rules that decay per channel need
// no second kernel. With that,
//   S_t = S_{t−1} diag(a) + u_t k_tᵀ,   u_t = β (v_t − S_{t−1} diag(a) k_t)   (delta rules)
//                                       u_t = v_t                              (linear)
//   o_t = S_t q_t
// Layouts: q, k, v, o [B, T, H, d]; beta [B, T, H]; g [B, T, H], or
// [B, T, H, d] for a per-channel gate; states [B, H, d, d]
// value × key; saved states [B, H, T, d, d]. Outputs are written (=).
#pragma once
#include <array>
#include <cmath>
#include <cstdint>

#include "backend_cuda/block_program.h"
#include "core/kernel_args.h"

namespace lina::cuda {

// Everything a scan launch needs, both forms, forward and backward (the
// unused pointers stay null).
struct ScanArgs {
  ScanShape s;
  int64_t chunk = 0;                      // C: chunk length of the chunked form
  ScanInputs<float> in{};                 // q, k, v, beta, g
  const float* s0 = nullptr;              // [B, H, d, d] initial state, or null (zero)
  float* o = nullptr;                     // forward: [B, T, H, d]
  float* s_final = nullptr;               // forward: [B, H, d, d]
  float* saved_out = nullptr;             // forward: states or chunk_states to save, or null
  const float* saved = nullptr;           // backward: what the forward saved
  const float* dout = nullptr;            // backward: [B, T, H, d]
  const float* ds_final = nullptr;        // backward: [B, H, d, d], or null (zero)
  ScanInputGrads<float> grads{};          // backward: dq, dk, dv, dbeta, dg, ds0
  // for lina's CUDA runtime on the CPU, which checks each is device memory (or null)
  std::array<const void*, 18> device_pointers() const {
    return {in.q, in.k, in.v, in.beta, in.g, s0, o, s_final, saved_out, saved, dout, ds_final,
            grads.dq, grads.dk, grads.dv, grads.dbeta, grads.dg, grads.ds0};
  }
};

// Index of token t of (batch, head) pair bh in a [B, T, H] tensor.
LINA_HD int64_t scan_token(const ScanShape& s, int64_t bh, int64_t t) {
  return ((bh / s.H) * s.T + t) * s.H + bh % s.H;
}

// a_j = exp(log a_j): the decay of key channel j at `token` (1 without decay).
LINA_HD float scan_decay(const ScanArgs& args, int64_t token, int64_t j) {
  return decays(args.s.rule) ? expf(scan_log_decay(args.s, args.in.g, token, j)) : 1.0f;
}

struct ScanSequentialForward {
  using Args = ScanArgs;
  static constexpr int kThreads = 32;
  static LINA_HD int64_t blocks(const Args& a) { return a.s.B * a.s.H; }
  static LINA_HD int64_t shared_floats(const Args&) { return 0; }
  static LINA_HD int64_t workspace_floats(const Args&) { return 0; }

  static LINA_HD void run(const Args& a, const Block& block) {
    const ScanShape& s = a.s;
    const int64_t d = s.d, dd = d * d, bh = block.index;
    block.each(d, [&](int64_t i) {
      float* S = a.s_final + bh * dd + i * d;  // row i of the running state, kept in the output
      for (int64_t j = 0; j < d; ++j) S[j] = a.s0 ? a.s0[bh * dd + i * d + j] : 0.0f;
      for (int64_t t = 0; t < s.T; ++t) {
        const int64_t token = scan_token(s, bh, t);
        const float *q = a.in.q + token * d, *k = a.in.k + token * d, *v = a.in.v + token * d;
        if (a.saved_out)  // S_{t−1}, row i
          for (int64_t j = 0; j < d; ++j) a.saved_out[(bh * s.T + t) * dd + i * d + j] = S[j];
        float u = v[i];
        if (uses_beta(s.rule)) {
          float p = 0.0f;  // p_i = (S_{t−1} diag(a) k)_i
          for (int64_t j = 0; j < d; ++j) p += S[j] * scan_decay(a, token, j) * k[j];
          u = a.in.beta[token] * (v[i] - p);
        }
        float o = 0.0f;
        for (int64_t j = 0; j < d; ++j) {
          S[j] = scan_decay(a, token, j) * S[j] + u * k[j];
          o += S[j] * q[j];
        }
        a.o[token * d + i] = o;
      }
    });
  }
};

// The reverse-time recurrence of docs/recurrence.md §2.1. G = dL/dS_t lives in
// shared memory; per token, three steps:
//   rows i      G += do qᵀ (now G = dL/dS_t);  e = G k (= dL/du);  u, r, dv
//   columns j   dq = diag(a) S_{t−1}ᵀ do + (uᵀdo) k;
//               dk = Gᵀ u − β diag(a) S_{t−1}ᵀ e;
//               dg_j = a_j (Σ_i G_ij S_ij − β k_j Σ_i e_i S_ij)   (per channel)
//   one item    dβ = eᵀ r,  dg = Σ_j dg_j   (per-head gate; a per-channel gate keeps dg_j)
//   rows i      G ← (G − β e kᵀ) diag(a)   (= dL/dS_{t−1})
// with r = v − S_{t−1} diag(a) k and u = β r (delta rules), u = v (linear).
struct ScanSequentialBackward {
  using Args = ScanArgs;
  static constexpr int kThreads = 32;
  static LINA_HD int64_t blocks(const Args& a) { return a.s.B * a.s.H; }
  // G [d, d], then the vectors e, u, r, dg_j [d] and one float for u·do
  static LINA_HD int64_t shared_floats(const Args& a) { return a.s.d * a.s.d + 4 * a.s.d + 1; }
  static LINA_HD int64_t workspace_floats(const Args&) { return 0; }

  static LINA_HD void run(const Args& a, const Block& block) {
    const ScanShape& s = a.s;
    const int64_t d = s.d, dd = d * d, bh = block.index;
    const bool delta = uses_beta(s.rule);
    float* G = block.shared;  // [d, d]
    float *e = G + dd, *u = e + d, *r = u + d, *dg_channel = r + d;
    float* u_dot_do = dg_channel + d;

    block.each(dd, [&](int64_t ij) { G[ij] = a.ds_final ? a.ds_final[bh * dd + ij] : 0.0f; });
    for (int64_t t = s.T - 1; t >= 0; --t) {
      const int64_t token = scan_token(s, bh, t);
      const float *q = a.in.q + token * d, *k = a.in.k + token * d, *v = a.in.v + token * d;
      const float* dO = a.dout + token * d;
      const float* S = a.saved + (bh * s.T + t) * dd;  // S_{t−1}
      const float beta = delta ? a.in.beta[token] : 1.0f;

      block.each(d, [&](int64_t i) {
        float e_i = 0.0f, p_i = 0.0f;
        for (int64_t j = 0; j < d; ++j) {
          G[i * d + j] += dO[i] * q[j];
          e_i += G[i * d + j] * k[j];
          p_i += S[i * d + j] * scan_decay(a, token, j) * k[j];
        }
        e[i] = e_i;
        r[i] = v[i] - p_i;
        u[i] = delta ? beta * r[i] : v[i];
        a.grads.dv[token * d + i] = delta ? beta * e_i : e_i;
      });
      block.each(1, [&](int64_t) {
        float sum = 0.0f;
        for (int64_t i = 0; i < d; ++i) sum += u[i] * dO[i];
        *u_dot_do = sum;
      });
      block.each(d, [&](int64_t j) {
        const float a_j = scan_decay(a, token, j);
        float S_do = 0.0f, S_e = 0.0f, G_u = 0.0f, G_S = 0.0f;
        for (int64_t i = 0; i < d; ++i) {
          S_do += S[i * d + j] * dO[i];
          S_e += S[i * d + j] * e[i];
          G_u += G[i * d + j] * u[i];
          G_S += G[i * d + j] * S[i * d + j];
        }
        a.grads.dq[token * d + j] = a_j * S_do + *u_dot_do * k[j];
        a.grads.dk[token * d + j] = delta ? G_u - beta * a_j * S_e : G_u;
        dg_channel[j] = a_j * (G_S - (delta ? beta * k[j] * S_e : 0.0f));
      });
      block.each(1, [&](int64_t) {
        if (delta) {
          float dbeta = 0.0f;
          for (int64_t i = 0; i < d; ++i) dbeta += e[i] * r[i];
          a.grads.dbeta[token] = dbeta;
        }
        if (uses_gate(s.rule) && gate_per_channel(s.rule)) {
          for (int64_t j = 0; j < d; ++j) a.grads.dg[token * d + j] = dg_channel[j];
        } else if (uses_gate(s.rule)) {
          float dg = 0.0f;
          for (int64_t j = 0; j < d; ++j) dg += dg_channel[j];
          a.grads.dg[token] = dg;
        }
      });
      block.each(d, [&](int64_t i) {
        for (int64_t j = 0; j < d; ++j)
          G[i * d + j] = scan_decay(a, token, j) * (G[i * d + j] - (delta ? beta * e[i] * k[j] : 0.0f));
      });
    }
    block.each(dd, [&](int64_t ij) { a.grads.ds0[bh * dd + ij] = G[ij]; });
  }
};

}  // namespace lina::cuda
