// The chunked scan with the chunk length C and head size D fixed at compile
// time (the model's D = 32, C = 16 or 64), for every rule whose decay is one
// number per head and token (linear, delta, gated delta, retention, gated
// linear; not the per-channel gate). The formulas are those of the Eigen
// versions, which stay the references this one is tested against
// (tests/test_scan_fixed.cpp): F1–F5 and B1–B10 of docs/recurrence.md §3
// (scan_chunked.cpp) for the delta rules; for the others the same formulas
// with the write vectors u_r = v_r and no β (docs/recurrence-gated.md,
// scan_chunked_gated.cpp): F4 O = diag(γ) Q Sᵀ + P V, F5 S' = γ_C S +
// Vᵀ diag(δ) K, and B1–B3 with U = V.
//
// What changes is only how the small products are done. Each chunk's rows of
// q, k, v (stride H·d in [B, T, H, d]) are first copied into contiguous C×D
// blocks, a last chunk shorter than C padded with zero rows (q = k = v = 0,
// β = 0, log a = 0 neither writes nor decays: the same maths, see
// scan_chunked.cpp), so every product has constant sizes and runs through
// small::matmul without packing. The state is carried transposed, Sᵀ [key ×
// value], which turns each product with Sᵀ into a plain row-times-matrix
// product; the saved chunk states keep the kernel list's layout S [value × key].
#include <algorithm>
#include <cmath>
#include <memory>

#include "backend_cpu/cpu_kernels.h"
#include "backend_cpu/parallel.h"
#include "backend_cpu/scan_chunk_parts.h"
#include "backend_cpu/small_matmul.h"

namespace lina::cpu::scan_chunk {

namespace {

using small::matmul;
using small::Store;
using small::transpose;
using small::Vec;

// x = exp(x) over N numbers, a SIMD register at a time (Eigen's vectorised exp).
template <int N, class T> void exp_in_place(T* x) {
  Eigen::Map<Eigen::Array<T, N, 1>> a(x);
  a = a.exp();
}

// One chunk: its inputs as contiguous blocks, and everything computed before
// the read-out (the backward recomputes these from the saved state).
template <class T, int C, int D> struct FixedChunk {
  int c = C;                      // real rows; rows c..C−1 are zero padding
  alignas(64) T Q[C][D], K[C][D], V[C][D];
  alignas(64) T Kt[D][C];         // Kᵀ
  T beta[C], g[C];
  T gamma[C];                     // γ_r = exp(λ_r), decay from the chunk start to r
  T delta[C];                     // δ_i = Γ_{C−1,i}, decay from i to the chunk end
  alignas(64) T Gamma[C][C];      // Γ_ri = exp(λ_r − λ_i) for i ≤ r, 0 above the diagonal
  alignas(64) T KK[C][C];         // K Kᵀ
  alignas(64) T P[C][C];          // (Q Kᵀ) ⊙ Γ, the intra-chunk read-out weights
  alignas(64) T QK[C][C];         // Q Kᵀ
  alignas(64) T E[C][C];          // K Kᵀ ⊙ Γ
  alignas(64) T A[C][C];          // strictly_lower(diag(β) E)
  alignas(64) T YW[C][2 * D];     // [Y | W], (I + A)[Y | W] = [diag(β) V | diag(β ⊙ γ) K]
  alignas(64) T U[C][D];          // the delta rules' write vectors u_r as rows: Y − W Sᵀ
  alignas(64) T DK[C][D];         // diag(δ) K

  // Copies rows of a [B, T, H, D] tensor (stride H·D) into a zero-padded block.
  void load_rows(const T* x, const ChunkPlace& at, T (*block)[D]) const {
    for (int r = 0; r < c; ++r) small::copy<D>(x + (at.token0 + r * at.stride) * D, block[r]);
    for (int r = c; r < C; ++r) std::fill_n(block[r], D, T(0));
  }

  void load(const ScanShape& s, const ScanInputs<T>& in, const ChunkPlace& at) {
    c = int(at.c);
    load_rows(in.q, at, Q);
    load_rows(in.k, at, K);
    load_rows(in.v, at, V);
    for (int r = 0; r < C; ++r) {
      const int64_t token = at.token0 + r * at.stride;
      beta[r] = r < c && uses_beta(s.rule) ? in.beta[token] : T(0);
      g[r] = r < c ? scan_log_decay(s, in.g, token, 0) : T(0);  // log a, 0 without decay
    }
  }

  // Γ, γ, δ from the log-decays (all ones without decay), as products of
  // the per-token decays a_r = exp(g_r): Γ_ri = a_{i+1} ⋯ a_r, so row r of Γ
  // is row r − 1 times a_r (then 1 on the diagonal), and γ_r = a_0 ⋯ a_r.
  // C exps instead of one per entry; a product of at most C factors is as
  // accurate as the exp of a segment sum (scan_chunked.cpp), whose rounding
  // the exp magnifies where the decay over the segment is large.
  void decays() {
    alignas(64) T a[C];
    for (int r = 0; r < C; ++r) a[r] = g[r];
    exp_in_place<C>(a);
    for (int i = 0; i < C; ++i) Gamma[0][i] = i == 0 ? T(1) : T(0);
    for (int r = 1; r < C; ++r)
      for (int i = 0; i < C; ++i)
        Gamma[r][i] = i < r ? Gamma[r - 1][i] * a[r] : i == r ? T(1) : T(0);
    gamma[0] = a[0];
    for (int r = 1; r < C; ++r) gamma[r] = gamma[r - 1] * a[r];
    for (int i = 0; i < C; ++i) delta[i] = Gamma[C - 1][i];
  }

  // Γ, γ, δ, Kᵀ, Q Kᵀ, P and diag(δ) K: what every rule reads out with.
  void read_out_terms() {
    decays();
    transpose<C, D>(&K[0][0], D, &Kt[0][0]);
    matmul<C, C, D>(&Q[0][0], D, &Kt[0][0], C, &QK[0][0], C);
    for (int r = 0; r < C; ++r)
      for (int i = 0; i < C; ++i) P[r][i] = QK[r][i] * Gamma[r][i];
    for (int r = 0; r < C; ++r)
      for (int j = 0; j < D; ++j) DK[r][j] = delta[r] * K[r][j];
  }

  // F1–F3 of the delta rules, for a chunk entering with state St = Sᵀ [D × D].
  void delta_terms(const T* St) {
    matmul<C, C, D>(&K[0][0], D, &Kt[0][0], C, &KK[0][0], C);
    for (int r = 0; r < C; ++r)
      for (int i = 0; i < C; ++i) {
        E[r][i] = KK[r][i] * Gamma[r][i];
        // F1  A = strictly_lower(diag(β) (K Kᵀ ⊙ Γ))
        A[r][i] = i < r ? beta[r] * E[r][i] : T(0);
      }
    // F2  (I + A) [Y | W] = [diag(β) V | diag(β ⊙ γ) K], by forward substitution
    for (int r = 0; r < C; ++r)
      for (int j = 0; j < D; ++j) {
        YW[r][j] = beta[r] * V[r][j];
        YW[r][D + j] = beta[r] * gamma[r] * K[r][j];
      }
    small::solve_unit_lower<C, 2 * D>(&A[0][0], C, &YW[0][0], 2 * D);
    // F3  U = Y − W Sᵀ
    for (int r = 0; r < C; ++r)
      for (int j = 0; j < D; ++j) U[r][j] = YW[r][j];
    matmul<C, D, D, false, Store::Sub>(&YW[0][D], 2 * D, St, D, &U[0][0], D);
  }

  // Everything before the read-out; returns the write vectors as rows (U for
  // the delta rules, V for the others).
  const T (*terms(ScanRule rule, const T* St))[D] {
    read_out_terms();
    if (!uses_beta(rule)) return V;
    delta_terms(St);
    return U;
  }
};

// The backward's per-chunk matrices beyond FixedChunk's.
template <class T, int C, int D> struct Backward {
  alignas(64) T St[D][D], G[D][D], Gt_a[D][D], Gt_b[D][D];
  alignas(64) T dO[C][D], dU[C][D], GQ[C][D], dOS[C][D], UG[C][D], Ut[D][C];
  alignas(64) T dQ[C][D], dK[C][D], dB[C][2 * D], YWt[2 * D][C];
  alignas(64) T dP[C][C], dPG[C][C], dA[C][C], dEG[C][C], dEsym[C][C], dGG[C][C];
  T dbeta[C], dlambda[C];
};

// B5–B8 of the delta rules, through the system of F2 (S: the state entering
// the chunk): dB = [dBV | dBK], dA, dE ⊙ Γ, dβ, and their part of dK.
template <class T, int C, int D>
void delta_gradients(const FixedChunk<T, C, D>& m, const T* S, Backward<T, C, D>& w) {
  // B5–B6  (I + A)ᵀ [dBV | dBK] = [dU | dW],  dW = −dU S   (back substitution)
  for (int r = 0; r < C; ++r)
    for (int j = 0; j < D; ++j) w.dB[r][j] = w.dU[r][j];
  matmul<C, D, D>(&w.dU[0][0], D, S, D, &w.dB[0][D], 2 * D);
  for (int r = 0; r < C; ++r)
    for (int j = D; j < 2 * D; ++j) w.dB[r][j] = -w.dB[r][j];
  small::solve_unit_lower_transposed<C, 2 * D>(&m.A[0][0], C, &w.dB[0][0], 2 * D);
  // B7  dV = diag(β) dBV;  dA = −strictly_lower(dB [Y | W]ᵀ);  dE ⊙ Γ = diag(β) dA ⊙ Γ
  transpose<C, 2 * D>(&m.YW[0][0], 2 * D, &w.YWt[0][0]);
  matmul<C, C, 2 * D>(&w.dB[0][0], 2 * D, &w.YWt[0][0], C, &w.dA[0][0], C);
  for (int r = 0; r < C; ++r)
    for (int i = 0; i < C; ++i) {
      w.dA[r][i] = i < r ? -w.dA[r][i] : T(0);
      w.dEG[r][i] = m.beta[r] * w.dA[r][i] * m.Gamma[r][i];
    }
  //     dK += diag(β ⊙ γ) dBK + (dE ⊙ Γ + (dE ⊙ Γ)ᵀ) K
  for (int r = 0; r < C; ++r)
    for (int j = 0; j < D; ++j) w.dK[r][j] += m.beta[r] * m.gamma[r] * w.dB[r][D + j];
  for (int r = 0; r < C; ++r)
    for (int i = 0; i < C; ++i) w.dEsym[r][i] = w.dEG[r][i] + w.dEG[i][r];
  matmul<C, D, C, false, Store::Add>(&w.dEsym[0][0], C, &m.K[0][0], D, &w.dK[0][0], D);
  // B8  dβ_r = dBV_r·v_r + γ_r dBK_r·k_r + Σ_i dA_ri E_ri,   E = K Kᵀ ⊙ Γ
  //     (each row's three dot products added lane by lane, then C rows summed at once)
  Vec<T> terms[C];
  for (int r = 0; r < C; ++r)
    terms[r] = small::lanes_of_dot<D>(w.dB[r], m.V[r]) +
               m.gamma[r] * small::lanes_of_dot<D>(w.dB[r] + D, m.K[r]) +
               small::lanes_of_dot<C>(w.dA[r], m.E[r]);
  small::sum_of_lanes_each<C>(terms, w.dbeta);
}

}  // namespace

template <class T, int C, int D>
void forward_fixed(const ScanShape& s, const ScanInputs<T>& in, const T* s0, T* o,
                   T* s_final, T* chunk_states) {
  const int64_t dd = D * D, pairs = s.B * s.H, chunks = (s.T + C - 1) / C;
#pragma omp parallel if (pairs > 1 && pairs * s.T * dd >= kParallelMin)
  {
    // ~300 KB at C = 64 in double: on the heap, not a thread's stack
    const auto m = std::make_unique<FixedChunk<T, C, D>>();
    alignas(64) T St[D][D], QS[C][D];
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < pairs; ++bh) {
      const int64_t b = bh / s.H, h = bh % s.H;
      if (s0) transpose<D, D>(s0 + bh * dd, D, &St[0][0]);
      else std::fill(&St[0][0], &St[0][0] + dd, T(0));
      for (int64_t n = 0; n < chunks; ++n) {
        const int64_t t0 = n * C;
        const ChunkPlace at{std::min<int64_t>(C, s.T - t0), (b * s.T + t0) * s.H + h, s.H, D};
        if (chunk_states) transpose<D, D>(&St[0][0], D, chunk_states + (bh * chunks + n) * dd);
        m->load(s, in, at);
        const T(*U)[D] = m->terms(s.rule, &St[0][0]);  // the write vectors
        // F4  O = diag(γ) Q Sᵀ + ((Q Kᵀ) ⊙ Γ) U
        matmul<C, D, D>(&m->Q[0][0], D, &St[0][0], D, &QS[0][0], D);
        for (int r = 0; r < C; ++r)
          for (int j = 0; j < D; ++j) QS[r][j] *= m->gamma[r];
        matmul<C, D, C, false, Store::Add>(&m->P[0][0], C, &U[0][0], D, &QS[0][0], D);
        for (int r = 0; r < at.c; ++r)
          small::copy<D>(QS[r], o + (at.token0 + r * at.stride) * D);
        // F5  S'ᵀ = γ_C Sᵀ + (diag(δ) K)ᵀ U
        for (int i = 0; i < D; ++i)
          for (int j = 0; j < D; ++j) St[i][j] *= m->gamma[C - 1];
        matmul<D, D, C, true, Store::Add>(&m->DK[0][0], D, &U[0][0], D, &St[0][0], D);
      }
      transpose<D, D>(&St[0][0], D, s_final + bh * dd);  // S_T = (Sᵀ)ᵀ
    }
  }
}

// §3.4 in reverse chunk order, as scan_chunked_backward; G = dS' (the
// gradient of the state leaving the chunk) is carried both ways round, G and
// Gᵀ, since products need each.
template <class T, int C, int D>
void backward_fixed(const ScanShape& s, const ScanInputs<T>& in, const T* chunk_states,
                    const T* dout, const T* ds_final, const ScanInputGrads<T>& grads) {
  const int64_t dd = D * D, pairs = s.B * s.H, chunks = (s.T + C - 1) / C;
  const bool delta_rule = uses_beta(s.rule), gated = uses_gate(s.rule);
#pragma omp parallel if (pairs > 1 && pairs * s.T * dd >= kParallelMin)
  {
    const auto m = std::make_unique<FixedChunk<T, C, D>>();
    const auto w = std::make_unique<Backward<T, C, D>>();
    T(*Gt)[D] = w->Gt_a;   // dS'ᵀ
    T(*dSt)[D] = w->Gt_b;  // dSᵀ, computed by B2
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < pairs; ++bh) {
      const int64_t b = bh / s.H, h = bh % s.H;
      if (ds_final) std::copy(ds_final + bh * dd, ds_final + (bh + 1) * dd, &w->G[0][0]);
      else std::fill(&w->G[0][0], &w->G[0][0] + dd, T(0));
      transpose<D, D>(&w->G[0][0], D, &Gt[0][0]);
      for (int64_t n = chunks - 1; n >= 0; --n) {
        const int64_t t0 = n * C;
        const ChunkPlace at{std::min<int64_t>(C, s.T - t0), (b * s.T + t0) * s.H + h, s.H, D};
        const int c = int(at.c);
        const T* S = chunk_states + (bh * chunks + n) * dd;  // the state entering the chunk
        transpose<D, D>(S, D, &w->St[0][0]);
        m->load(s, in, at);
        const T(*U)[D] = m->terms(s.rule, &w->St[0][0]);  // the write vectors (V without delta)
        m->load_rows(dout, at, w->dO);

        // B1  dU = diag(δ) K dS'ᵀ + Pᵀ dO   (without delta: dV = dU)
        matmul<C, D, D>(&m->DK[0][0], D, &Gt[0][0], D, &w->dU[0][0], D);
        matmul<C, D, C, true, Store::Add>(&m->P[0][0], C, &w->dO[0][0], D, &w->dU[0][0], D);
        // B2  dSᵀ = γ_C dS'ᵀ + (diag(γ) Q)ᵀ dO − Wᵀ dU   (the W term with delta only)
        for (int r = 0; r < C; ++r)
          for (int j = 0; j < D; ++j) w->GQ[r][j] = m->gamma[r] * m->Q[r][j];
        for (int i = 0; i < D; ++i)
          for (int j = 0; j < D; ++j) dSt[i][j] = m->gamma[C - 1] * Gt[i][j];
        matmul<D, D, C, true, Store::Add>(&w->GQ[0][0], D, &w->dO[0][0], D, &dSt[0][0], D);
        if (delta_rule)  // W is the right half of [Y | W], row stride 2D
          matmul<D, D, C, true, Store::Sub>(&m->YW[0][D], 2 * D, &w->dU[0][0], D, &dSt[0][0], D);
        // B3  dP = lower_incl(dO Uᵀ) (the mask comes with Γ)
        //     dQ = diag(γ) dO S + (dP ⊙ Γ) K,   dK = diag(δ) U dS' + (dP ⊙ Γ)ᵀ Q
        transpose<C, D>(&U[0][0], D, &w->Ut[0][0]);
        matmul<C, C, D>(&w->dO[0][0], D, &w->Ut[0][0], C, &w->dP[0][0], C);
        for (int r = 0; r < C; ++r)
          for (int i = 0; i < C; ++i) w->dPG[r][i] = w->dP[r][i] * m->Gamma[r][i];
        matmul<C, D, D>(&w->dO[0][0], D, S, D, &w->dOS[0][0], D);
        for (int r = 0; r < C; ++r)
          for (int j = 0; j < D; ++j) w->dQ[r][j] = m->gamma[r] * w->dOS[r][j];
        matmul<C, D, C, false, Store::Add>(&w->dPG[0][0], C, &m->K[0][0], D, &w->dQ[0][0], D);
        matmul<C, D, D>(&U[0][0], D, &w->G[0][0], D, &w->UG[0][0], D);
        for (int r = 0; r < C; ++r)
          for (int j = 0; j < D; ++j) w->dK[r][j] = m->delta[r] * w->UG[r][j];
        matmul<C, D, C, true, Store::Add>(&w->dPG[0][0], C, &m->Q[0][0], D, &w->dK[0][0], D);
        if (delta_rule) delta_gradients(*m, S, *w);
        // This chunk's gradients go out before the gated terms are formed, so
        // that their stores drain while those are computed.
        for (int r = 0; r < c; ++r) {
          const int64_t row = (at.token0 + r * at.stride) * D;
          small::copy<D>(w->dQ[r], grads.dq + row);
          small::copy<D>(w->dK[r], grads.dk + row);
          if (!delta_rule) {
            small::copy<D>(w->dU[r], grads.dv + row);
            continue;
          }
          for (int j = 0; j < D; ++j) grads.dv[row + j] = m->beta[r] * w->dB[r][j];
          grads.dbeta[at.token0 + r * at.stride] = w->dbeta[r];
        }
        if (gated) {
          // dΓ ⊙ Γ = dP ⊙ Γ ⊙ (Q Kᵀ) + dE ⊙ Γ ⊙ (K Kᵀ)   (dE with delta only)
          for (int r = 0; r < C; ++r)
            for (int i = 0; i < C; ++i)
              w->dGG[r][i] = w->dPG[r][i] * m->QK[r][i] +
                             (delta_rule ? w->dEG[r][i] * m->KK[r][i] : T(0));
          // B9  dγ_r = dO_r·(S q_r) + β_r dBK_r·k_r (β with delta only),  dδ_i = (U dS')_i·k_i
          //     dλ_r = γ_r dγ_r + Σ_i (dΓ⊙Γ)_ri − Σ_i (dΓ⊙Γ)_ir − δ_r dδ_r
          //     dλ_C += γ_C ⟨dS', S⟩ + Σ_i δ_i dδ_i
          // B10 dg_j = Σ_{r ≥ j} dλ_r
          // (each row's terms added lane by lane, then the C rows summed at once)
          T col_sums[C] = {};  // Σ_r (dΓ⊙Γ)_ri
          for (int r = 0; r < C; ++r)
            for (int i = 0; i < C; ++i) col_sums[i] += w->dGG[r][i];
          Vec<T> row_terms[C], decay_to_end = {};
          for (int r = 0; r < C; ++r) {
            Vec<T> dgamma = small::lanes_of_dot<D>(w->dOS[r], m->Q[r]);
            if (delta_rule) dgamma += m->beta[r] * small::lanes_of_dot<D>(w->dB[r] + D, m->K[r]);
            const Vec<T> ddelta_delta = m->delta[r] * small::lanes_of_dot<D>(w->UG[r], m->K[r]);
            decay_to_end += ddelta_delta;
            row_terms[r] = m->gamma[r] * dgamma + small::lanes_of_sum<C>(w->dGG[r]) - ddelta_delta;
          }
          small::sum_of_lanes_each<C>(row_terms, w->dlambda);
          for (int r = 0; r < C; ++r) w->dlambda[r] -= col_sums[r];
          w->dlambda[C - 1] += m->gamma[C - 1] * small::dot<D * D>(&w->G[0][0], S) +
                               small::sum_of_lanes<T>(decay_to_end);
          for (int r = C - 2; r >= 0; --r) w->dlambda[r] += w->dlambda[r + 1];
          for (int r = 0; r < c; ++r) grads.dg[at.token0 + r * at.stride] = w->dlambda[r];
        }
        // dS of this chunk is dS' of the one before
        std::swap(Gt, dSt);
        transpose<D, D>(&Gt[0][0], D, &w->G[0][0]);
      }
      std::copy(&w->G[0][0], &w->G[0][0] + dd, grads.ds0 + bh * dd);
    }
  }
}

// The sizes and rules compiled here; fixed_forward / fixed_backward return
// false for any other, and the caller takes the Eigen path.
bool fixed_size_compiled(const ScanShape& s, int64_t C) {
  return s.d == 32 && (C == 16 || C == 64) && !gate_per_channel(s.rule);
}

template <class T>
bool fixed_forward(const ScanShape& s, int64_t C, const ScanInputs<T>& in, const T* s0, T* o,
                   T* s_final, T* chunk_states) {
  if (!fixed_size_compiled(s, C)) return false;
  if (C == 16) forward_fixed<T, 16, 32>(s, in, s0, o, s_final, chunk_states);
  else forward_fixed<T, 64, 32>(s, in, s0, o, s_final, chunk_states);
  return true;
}
template <class T>
bool fixed_backward(const ScanShape& s, int64_t C, const ScanInputs<T>& in,
                    const T* chunk_states, const T* dout, const T* ds_final,
                    const ScanInputGrads<T>& grads) {
  if (!fixed_size_compiled(s, C)) return false;
  if (C == 16) backward_fixed<T, 16, 32>(s, in, chunk_states, dout, ds_final, grads);
  else backward_fixed<T, 64, 32>(s, in, chunk_states, dout, ds_final, grads);
  return true;
}

template bool fixed_forward<float>(const ScanShape&, int64_t, const ScanInputs<float>&,
                                         const float*, float*, float*, float*);
template bool fixed_forward<double>(const ScanShape&, int64_t, const ScanInputs<double>&,
                                          const double*, double*, double*, double*);
template bool fixed_backward<float>(const ScanShape&, int64_t, const ScanInputs<float>&,
                                          const float*, const float*, const float*,
                                          const ScanInputGrads<float>&);
template bool fixed_backward<double>(const ScanShape&, int64_t, const ScanInputs<double>&,
                                           const double*, const double*, const double*,
                                           const ScanInputGrads<double>&);

}  // namespace lina::cpu::scan_chunk
