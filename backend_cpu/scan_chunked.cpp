// The delta rules in chunkwise-parallel form (docs/recurrence.md §3): per chunk of
// C tokens a handful of C×d, C×C and d×d matrix products and one unit lower
// triangular solve replace C sequential steps. One (batch, head) pair per
// OpenMP iteration (threads only once B·H·T·d² reaches kParallelMin), Eigen
// single-threaded inside; the per-chunk matrices live in one scratch buffer
// per thread. The rules without the delta correction take the simpler path
// of scan_chunked_gated.cpp (docs/recurrence-gated.md).
//
// When C does not divide T the last chunk is simply shorter: that is exactly
// padding it with q = k = v = 0, β = 0, g = 0 (padded tokens neither write
// nor decay) and dropping the padded rows.
//
// Layouts as in scan_sequential.cpp; a chunk's rows of q, k, v are read in
// place through maps with row stride H·d. chunk_states [B, H, N, d, d] hold
// the state entering each chunk (N = ⌈T/C⌉). Outputs are written (=).
#include <Eigen/Core>
#include <algorithm>
#include <cassert>
#include <cmath>
#include <vector>

#include "backend_cpu/cpu_kernels.h"
#include "backend_cpu/eigen_maps.h"
#include "backend_cpu/parallel.h"
#include "backend_cpu/scan_chunk_parts.h"

namespace lina::cpu {

namespace {

using namespace scan_chunk;

// The backward's matrices at the largest chunk: chunk_terms takes 4 C×C,
// 4 C×d (YW counts twice) and 2 C-vectors, the backward 5 C×C and 6 C×d more.
size_t scratch_size(int64_t C, int64_t d) { return size_t(9 * C * C + 10 * C * d + 2 * C); }

// Everything one chunk's forward computes before its read-out; the backward
// recomputes it from the saved chunk-start state H instead of storing it.
template <class T> struct ChunkTerms {
  MatrixMap<T> Gamma;   // c×c  Γ_ri = exp(λ_r − λ_i) for i ≤ r, 0 above the diagonal
  VectorMap<T> gamma;   // c    γ_r = exp(λ_r), decay from the chunk start to r
  VectorMap<T> delta;   // c    δ_i = Γ_ci, decay from i to the chunk end
  MatrixMap<T> KK;      // c×c  K Kᵀ
  MatrixMap<T> QK;      // c×c  Q Kᵀ
  MatrixMap<T> A;       // c×c  strictly_lower(diag(β)(K Kᵀ ⊙ Γ)); I + A is the system of F2
  MatrixMap<T> YW;      // c×2d [Y | W], (I + A)[Y | W] = [diag(β) V | diag(β ⊙ γ) K]
  MatrixMap<T> U;       // c×d  the write vectors u_r as rows: Y − W Hᵀ (linear: V)
  MatrixMap<T> DK;      // c×d  diag(δ) K
};

// F1–F3 of §3.3 for one chunk entering with state H (and Γ, γ, δ of §3.1).
template <class T, class StateMatrix>
ChunkTerms<T> chunk_terms(const ScanShape& s, const ScanInputs<T>& in, const ChunkPlace& at,
                          const StateMatrix& H, Scratch<T>& scratch) {
  const int64_t c = at.c, d = at.d;
  ChunkTerms<T> m{scratch.matrix(c, c), scratch.vector(c),    scratch.vector(c),
                  scratch.matrix(c, c), scratch.matrix(c, c), scratch.matrix(c, c),
                  scratch.matrix(c, 2 * d), scratch.matrix(c, d), scratch.matrix(c, d)};
  ConstRowsMap<T> Q = rows(in.q, at), K = rows(in.k, at), V = rows(in.v, at);

  // Gates in log space: Γ_ri from the segment sum g_{i+1} + … + g_r (accurate
  // in float32 even when λ is large), formed only on and below the diagonal
  // so exp never sees a positive exponent.
  if (uses_gate(s.rule)) {
    ConstGateMap<T> g = gates(in.g, at);
    segment_decays(c, [&](int64_t i) { return g[i]; }, m.Gamma);
    T lambda = 0;
    for (int64_t r = 0; r < c; ++r) {
      lambda += g[r];
      m.gamma[r] = std::exp(lambda);
    }
    m.delta = m.Gamma.row(c - 1).transpose();
  } else {
    m.Gamma.setZero();
    m.Gamma.template triangularView<Eigen::Lower>().setOnes();
    m.gamma.setOnes();
    m.delta.setOnes();
  }
  m.DK = m.delta.asDiagonal() * K;
  m.QK.noalias() = Q * K.transpose();

  ConstGateMap<T> beta = gates(in.beta, at);
  m.KK.noalias() = K * K.transpose();
  // F1  A = strictly_lower(diag(β) (K Kᵀ ⊙ Γ))
  m.A.setZero();
  m.A.template triangularView<Eigen::StrictlyLower>() =
      beta.asDiagonal() * m.KK.cwiseProduct(m.Gamma);
  // F2  (I + A) [Y | W] = [diag(β) V | diag(β ⊙ γ) K], by forward substitution
  m.YW.leftCols(d) = beta.asDiagonal() * V;
  m.YW.rightCols(d) = beta.cwiseProduct(m.gamma).asDiagonal() * K;
  m.A.template triangularView<Eigen::UnitLower>().solveInPlace(m.YW);
  // F3  U = Y − W Hᵀ
  m.U = m.YW.leftCols(d);
  m.U.noalias() -= m.YW.rightCols(d) * H.transpose();
  return m;
}

}  // namespace

// The chunked scan entry points: the fixed-size kernel of
// scan_chunked_fixed.cpp where it is compiled for the rule, d and C; else
// the rules without the delta correction go to scan_chunked_gated.cpp, and
// the delta rules to the Eigen version below. The Eigen versions are the
// fixed-size kernel's references.
template <class T>
void scan_chunked_forward(const ScanShape& s, int64_t C, const ScanInputs<T>& in, const T* s0,
                          T* o, T* s_final, T* chunk_states) {
  if (scan_chunk::fixed_forward(s, C, in, s0, o, s_final, chunk_states)) return;
  if (!uses_beta(s.rule)) return scan_chunk::gated_forward(s, C, in, s0, o, s_final, chunk_states);
  scan_chunk::delta_forward_eigen(s, C, in, s0, o, s_final, chunk_states);
}

template <class T>
void scan_chunked_backward(const ScanShape& s, int64_t C, const ScanInputs<T>& in,
                           const T* chunk_states, const T* dout, const T* ds_final,
                           const ScanInputGrads<T>& grads) {
  if (scan_chunk::fixed_backward(s, C, in, chunk_states, dout, ds_final, grads)) return;
  if (!uses_beta(s.rule))
    return scan_chunk::gated_backward(s, C, in, chunk_states, dout, ds_final, grads);
  scan_chunk::delta_backward_eigen(s, C, in, chunk_states, dout, ds_final, grads);
}

namespace scan_chunk {

template <class T>
void delta_forward_eigen(const ScanShape& s, int64_t C, const ScanInputs<T>& in, const T* s0,
                         T* o, T* s_final, T* chunk_states) {
  const int64_t d = s.d, dd = d * d, pairs = s.B * s.H, chunks = (s.T + C - 1) / C;
  const int64_t Cmax = std::min(C, s.T);
#pragma omp parallel if (pairs > 1 && pairs * s.T * dd >= kParallelMin)
  {
    Scratch<T> scratch(scratch_size(Cmax, d));
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < pairs; ++bh) {
      const int64_t b = bh / s.H, h = bh % s.H;
      MatrixMap<T> H(s_final + bh * dd, d, d);  // the carried state lives in the output S_T
      if (s0) H = ConstMatrixMap<T>(s0 + bh * dd, d, d);
      else H.setZero();
      for (int64_t n = 0; n < chunks; ++n) {
        const int64_t t0 = n * C;
        const ChunkPlace at{std::min(C, s.T - t0), (b * s.T + t0) * s.H + h, s.H, d};
        if (chunk_states) MatrixMap<T>(chunk_states + (bh * chunks + n) * dd, d, d) = H;
        scratch.reset();
        ChunkTerms<T> m = chunk_terms(s, in, at, H, scratch);
        ConstRowsMap<T> Q = rows(in.q, at);
        RowsMap<T> O = rows(o, at);
        // F4  O = diag(γ) Q Hᵀ + ((Q Kᵀ) ⊙ Γ) U
        O.noalias() = Q * H.transpose();
        O.array().colwise() *= m.gamma.array();
        MatrixMap<T> P = scratch.matrix(at.c, at.c);
        P = m.QK.cwiseProduct(m.Gamma);
        O.noalias() += P * m.U;
        // F5  H' = γ_c H + Uᵀ diag(δ) K
        H *= m.gamma[at.c - 1];
        H.noalias() += m.U.transpose() * m.DK;
      }
    }
  }
}

// §3.4, one pass over the chunks in reverse: each chunk's terms are
// recomputed from its saved entering state, then phase 1 (B1–B2, the state
// gradient) and phase 2 (B3–B10, the chunk's input gradients) run together.
// G holds dH' (the gradient of the state leaving the chunk).
template <class T>
void delta_backward_eigen(const ScanShape& s, int64_t C, const ScanInputs<T>& in,
                          const T* chunk_states, const T* dout, const T* ds_final,
                          const ScanInputGrads<T>& grads) {
  const int64_t d = s.d, dd = d * d, pairs = s.B * s.H, chunks = (s.T + C - 1) / C;
  const int64_t Cmax = std::min(C, s.T);
#pragma omp parallel if (pairs > 1 && pairs * s.T * dd >= kParallelMin)
  {
    Scratch<T> scratch(scratch_size(Cmax, d));
    RowMatrix<T> G(d, d), dH(d, d);
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < pairs; ++bh) {
      const int64_t b = bh / s.H, h = bh % s.H;
      if (ds_final) G = ConstMatrixMap<T>(ds_final + bh * dd, d, d);
      else G.setZero();
      for (int64_t n = chunks - 1; n >= 0; --n) {
        const int64_t t0 = n * C, c = std::min(C, s.T - t0);
        const ChunkPlace at{c, (b * s.T + t0) * s.H + h, s.H, d};
        ConstMatrixMap<T> H(chunk_states + (bh * chunks + n) * dd, d, d);
        scratch.reset();
        const ChunkTerms<T> m = chunk_terms(s, in, at, H, scratch);
        ConstRowsMap<T> Q = rows(in.q, at), K = rows(in.k, at), V = rows(in.v, at);
        ConstRowsMap<T> dO = rows(dout, at);
        RowsMap<T> dQ = rows(grads.dq, at), dK = rows(grads.dk, at), dV = rows(grads.dv, at);
        MatrixMap<T> dU = scratch.matrix(c, d), GQ = scratch.matrix(c, d),
                     dOH = scratch.matrix(c, d), UG = scratch.matrix(c, d),
                     dPG = scratch.matrix(c, c);

        // B1  dU = diag(δ) K dH'ᵀ + Pᵀ dO,   P = (Q Kᵀ) ⊙ Γ
        dU.noalias() = m.DK * G.transpose();
        dPG = m.QK.cwiseProduct(m.Gamma);
        dU.noalias() += dPG.transpose() * dO;
        // B2  dH = γ_c dH' + dOᵀ diag(γ) Q − dUᵀ W
        GQ = m.gamma.asDiagonal() * Q;
        dH.noalias() = dO.transpose() * GQ;
        dH += m.gamma[c - 1] * G;
        dH.noalias() -= dU.transpose() * m.YW.rightCols(d);
        // B3  dP = lower_incl(dO Uᵀ) (the mask comes with Γ)
        //     dQ = diag(γ) dO H + (dP ⊙ Γ) K,   dK = diag(δ) U dH' + (dP ⊙ Γ)ᵀ Q
        MatrixMap<T> dP = scratch.matrix(c, c);
        dP.noalias() = dO * m.U.transpose();
        dPG = dP.cwiseProduct(m.Gamma);
        dOH.noalias() = dO * H;
        dQ = m.gamma.asDiagonal() * dOH;
        dQ.noalias() += dPG * K;
        UG.noalias() = m.U * G;
        dK = m.delta.asDiagonal() * UG;
        dK.noalias() += dPG.transpose() * Q;

        // dΓ ⊙ Γ, gathered for the gates: dΓ = dP ⊙ (Q Kᵀ) + dE ⊙ (K Kᵀ)
        MatrixMap<T> dGammaGamma = scratch.matrix(c, c);
        if (uses_gate(s.rule)) dGammaGamma = dPG.cwiseProduct(m.QK);

        {  // B4–B10 through the system of F2
          ConstGateMap<T> beta = gates(in.beta, at);
          GateMap<T> dbeta = gates(grads.dbeta, at);
          // B5–B6  (I + A)ᵀ [dBV | dBK] = [dU | dW],  dW = −dU H   (back substitution)
          MatrixMap<T> dB = scratch.matrix(c, 2 * d);
          dB.leftCols(d) = dU;
          dB.rightCols(d).noalias() = -dU * H;
          m.A.transpose().template triangularView<Eigen::UnitUpper>().solveInPlace(dB);
          // B7  dV = diag(β) dBV;  dA = −strictly_lower(dBV Yᵀ + dBK Wᵀ);  dE = diag(β) dA
          dV = beta.asDiagonal() * dB.leftCols(d);
          MatrixMap<T> dA = scratch.matrix(c, c);
          dA.noalias() = -dB * m.YW.transpose();
          dA.template triangularView<Eigen::Upper>().setZero();
          MatrixMap<T> dEG = scratch.matrix(c, c);  // dE ⊙ Γ
          dEG = beta.asDiagonal() * dA.cwiseProduct(m.Gamma);
          //     dK += diag(β ⊙ γ) dBK + (dE ⊙ Γ + (dE ⊙ Γ)ᵀ) K
          dK += beta.cwiseProduct(m.gamma).asDiagonal() * dB.rightCols(d);
          dK.noalias() += dEG * K;
          dK.noalias() += dEG.transpose() * K;
          // B8  dβ_r = dBV_r·v_r + γ_r dBK_r·k_r + Σ_i dA_ri E_ri,   E = K Kᵀ ⊙ Γ
          for (int64_t r = 0; r < c; ++r)
            dbeta[r] = dB.row(r).head(d).dot(V.row(r)) +
                       m.gamma[r] * dB.row(r).tail(d).dot(K.row(r)) +
                       dA.row(r).dot(m.KK.row(r).cwiseProduct(m.Gamma.row(r)));
          if (uses_gate(s.rule)) {
            dGammaGamma += dEG.cwiseProduct(m.KK);
            // B9  dγ_r = dO_r·(H q_r) + β_r dBK_r·k_r   (dO_r·(H q_r) = (dO H)_r·q_r)
            //     dδ_i = u_iᵀ dH' k_i = (U dH')_i·k_i
            //     dλ_r = γ_r dγ_r + Σ_i (dΓ⊙Γ)_ri − Σ_i (dΓ⊙Γ)_ir − δ_r dδ_r
            //     dλ_c += γ_c ⟨dH', H⟩ + Σ_i δ_i dδ_i
            // B10 dg_j = Σ_{r ≥ j} dλ_r
            GateMap<T> dg = gates(grads.dg, at);
            T decay_to_end = 0;  // Σ_i δ_i dδ_i
            for (int64_t r = 0; r < c; ++r) {
              const T dgamma = dOH.row(r).dot(Q.row(r)) + beta[r] * dB.row(r).tail(d).dot(K.row(r));
              const T ddelta_delta = m.delta[r] * UG.row(r).dot(K.row(r));
              decay_to_end += ddelta_delta;
              dg[r] = m.gamma[r] * dgamma + dGammaGamma.row(r).sum() -
                      dGammaGamma.col(r).sum() - ddelta_delta;  // dλ_r for now
            }
            dg[c - 1] += m.gamma[c - 1] * G.cwiseProduct(H).sum() + decay_to_end;
            for (int64_t r = c - 2; r >= 0; --r) dg[r] += dg[r + 1];
          }
        }
        G.swap(dH);  // dH of this chunk is dH' of the one before
      }
      MatrixMap<T>(grads.ds0 + bh * dd, d, d) = G;
    }
  }
}

template void delta_forward_eigen<float>(const ScanShape&, int64_t, const ScanInputs<float>&,
                                         const float*, float*, float*, float*);
template void delta_forward_eigen<double>(const ScanShape&, int64_t, const ScanInputs<double>&,
                                          const double*, double*, double*, double*);
template void delta_backward_eigen<float>(const ScanShape&, int64_t, const ScanInputs<float>&,
                                          const float*, const float*, const float*,
                                          const ScanInputGrads<float>&);
template void delta_backward_eigen<double>(const ScanShape&, int64_t, const ScanInputs<double>&,
                                           const double*, const double*, const double*,
                                           const ScanInputGrads<double>&);

}  // namespace scan_chunk

template void scan_chunked_forward<float>(const ScanShape&, int64_t, const ScanInputs<float>&,
                                          const float*, float*, float*, float*);
template void scan_chunked_forward<double>(const ScanShape&, int64_t, const ScanInputs<double>&,
                                           const double*, double*, double*, double*);
template void scan_chunked_backward<float>(const ScanShape&, int64_t, const ScanInputs<float>&,
                                           const float*, const float*, const float*,
                                           const ScanInputGrads<float>&);
template void scan_chunked_backward<double>(const ScanShape&, int64_t, const ScanInputs<double>&,
                                            const double*, const double*, const double*,
                                            const ScanInputGrads<double>&);

}  // namespace lina::cpu
