// The chunked scan of the rules without the delta correction — linear,
// retention (a fixed decay per head), gated linear (a learned decay per
// head) and channel-gated linear (a learned decay per key channel) — derived
// in docs/recurrence-gated.md. Per (batch, head) and chunk of c tokens that
// enters with the state H (d×d, value × key), with λ_r = log a_0 + … + log a_r
// the decay from the chunk start to row r (per channel: a row of d numbers;
// per head: one number, w = 1 column):
//   Qg = Q ⊙ e^λ                 row r: q_r ⊙ e^{λ_r}, how row r sees H
//   Kd = K ⊙ e^{λ_end − λ}       row i: k_i ⊙ e^{λ_end − λ_i}, how the chunk end sees token i
//   P_ri = Σ_j q_rj k_ij e^{λ_rj − λ_ij} for i ≤ r, 0 above
//   F1  O  = Qg Hᵀ + P V
//   F2  H' = H diag(e^{λ_end}) + Vᵀ Kd
// Every exponent above is a sum of log a ≤ 0 over a stretch of tokens, so
// nothing overflows however strong the decay (the naive Q ⊙ e^λ times
// K ⊙ e^{−λ} would). With one decay per head P = (Q Kᵀ) ⊙ Γ, Γ_ri =
// e^{λ_r − λ_i}, two matrix products; per channel every (r, i) pair has its
// own d decays, walked as a running product e^{λ_r − λ_{i−1}} = e^{λ_r − λ_i} a_i.
//
// Layouts as in scan_sequential.cpp (g [B, T, H], or [B, T, H, d] per
// channel); chunk_states [B, H, N, d, d], the state entering each chunk.
// Outputs are written (=).
#include <Eigen/Core>
#include <algorithm>
#include <cmath>

#include "backend_cpu/parallel.h"
#include "backend_cpu/scan_chunk_parts.h"

namespace lina::cpu::scan_chunk {

namespace {

// The matrices of one chunk at the largest chunk: the terms take 3 C×C and
// 4 C×w + 2 C×d (w ≤ d), the backward 1 C×C and 5 C×d more.
size_t gated_scratch_size(int64_t C, int64_t d) { return size_t(4 * C * C + 11 * C * d); }

// out = x ⊙ decay for a c×d x and a c×w decay (w = 1: one number per row).
template <class Out, class X, class Decay>
void times_decay(Out&& out, const X& x, const Decay& decay) {
  if (decay.cols() == 1) out = decay.col(0).asDiagonal() * x;
  else out = x.cwiseProduct(decay);
}

template <class T> struct GatedTerms {
  MatrixMap<T> A;      // c×w  a_r = e^{log a_r}, the decay of each token
  MatrixMap<T> Dq;     // c×w  e^{λ_r}: from the chunk start to row r
  MatrixMap<T> Dk;     // c×w  e^{λ_end − λ_i}: from row i to the chunk end
  MatrixMap<T> Gamma;  // c×c  Γ_ri = e^{λ_r − λ_i} for i ≤ r, 0 above (w = 1 only)
  MatrixMap<T> P;      // c×c  the weights of the chunk's own writes (w = 1, or when asked)
  MatrixMap<T> Qg;     // c×d  Q ⊙ Dq
  MatrixMap<T> Kd;     // c×d  K ⊙ Dk
};

// The decays of one chunk and the terms of F1–F2. P is formed for the
// per-channel decay only when with_P (the backward forms it in its own loop).
template <class T>
GatedTerms<T> gated_terms(const ScanShape& s, const ScanInputs<T>& in, const ChunkPlace& at,
                          Scratch<T>& scratch, bool with_P) {
  const int64_t c = at.c, d = at.d, w = gate_per_channel(s.rule) ? d : 1;
  GatedTerms<T> m{scratch.matrix(c, w), scratch.matrix(c, w), scratch.matrix(c, w),
                  scratch.matrix(c, c), scratch.matrix(c, c), scratch.matrix(c, d),
                  scratch.matrix(c, d)};
  ConstRowsMap<T> Q = rows(in.q, at), K = rows(in.k, at);
  m.Gamma.setZero();
  if (!decays(s.rule)) {
    m.A.setOnes();
    m.Dq.setOnes();
    m.Dk.setOnes();
    m.Gamma.template triangularView<Eigen::Lower>().setOnes();
  } else {
    MatrixMap<T> log_a = m.A;  // log a first, exponentiated at the end
    for (int64_t r = 0; r < c; ++r)
      for (int64_t j = 0; j < w; ++j)
        log_a(r, j) = scan_log_decay(s, in.g, at.token0 + r * at.stride, j);
    // e^{λ_r} from the running sum from the chunk start, e^{λ_end − λ_i} from
    // the running sum back from the chunk end (a sum over the tokens after
    // i, never a difference of two large λ).
    m.Dq.row(0) = log_a.row(0);
    for (int64_t r = 1; r < c; ++r) m.Dq.row(r) = m.Dq.row(r - 1) + log_a.row(r);
    m.Dk.row(c - 1).setZero();
    for (int64_t i = c - 2; i >= 0; --i) m.Dk.row(i) = m.Dk.row(i + 1) + log_a.row(i + 1);
    m.Dq = m.Dq.array().exp();
    m.Dk = m.Dk.array().exp();
    if (w == 1)  // Γ_ri from the segment sum log a_{i+1} + … + log a_r
      segment_decays(c, [&](int64_t i) { return log_a(i, 0); }, m.Gamma);
    m.A = log_a.array().exp();
  }
  times_decay(m.Qg, Q, m.Dq);
  times_decay(m.Kd, K, m.Dk);
  if (w == 1) {
    m.P.noalias() = Q * K.transpose();
    m.P = m.P.cwiseProduct(m.Gamma);
  } else if (with_P) {
    // P_ri = q_r · (k_i ⊙ E), E = e^{λ_r − λ_i} kept as a running product.
    m.P.setZero();
    Vector<T> E(d);
    for (int64_t r = 0; r < c; ++r) {
      E.setOnes();
      for (int64_t i = r; i >= 0; --i) {
        m.P(r, i) = Q.row(r).cwiseProduct(K.row(i)).dot(E.transpose());
        E = E.cwiseProduct(m.A.row(i).transpose());
      }
    }
  }
  return m;
}

}  // namespace

template <class T>
void gated_forward(const ScanShape& s, int64_t C, const ScanInputs<T>& in, const T* s0, T* o,
                   T* s_final, T* chunk_states) {
  const int64_t d = s.d, dd = d * d, pairs = s.B * s.H, chunks = (s.T + C - 1) / C;
  const int64_t Cmax = std::min(C, s.T);
#pragma omp parallel if (pairs > 1 && pairs * s.T * dd >= kParallelMin)
  {
    Scratch<T> scratch(gated_scratch_size(Cmax, d));
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
        const GatedTerms<T> m = gated_terms(s, in, at, scratch, true);
        ConstRowsMap<T> V = rows(in.v, at);
        RowsMap<T> O = rows(o, at);
        O.noalias() = m.Qg * H.transpose();  // F1  O = Qg Hᵀ + P V
        O.noalias() += m.P * V;
        // F2  H' = H diag(e^{λ_end}) + Vᵀ Kd
        if (m.Dq.cols() == 1) H *= m.Dq(at.c - 1, 0);
        else H = H * m.Dq.row(at.c - 1).asDiagonal();
        H.noalias() += V.transpose() * m.Kd;
      }
    }
  }
}

// One pass over the chunks in reverse, each chunk's terms recomputed from its
// saved entering state H; G holds dH' (the gradient of the state leaving the
// chunk). docs/recurrence-gated.md §3:
//   B1  dV = Pᵀ dO + Kd dH'ᵀ
//   B2  dH = dOᵀ Qg + dH' diag(e^{λ_end})
//   B3  dP = dO Vᵀ (rows r, columns i ≤ r)
//       dQ = (dO H) ⊙ e^λ + Σ_{i ≤ r} dP_ri k_i ⊙ e^{λ_r − λ_i}
//       dK = (V dH') ⊙ e^{λ_end − λ} + Σ_{r ≥ i} dP_ri q_r ⊙ e^{λ_r − λ_i}
//   B4  dλ_r = q_r ⊙ dq_r − k_r ⊙ dk_r, and for the last row also
//       + e^{λ_end} ⊙ Σ_v (dH' ⊙ H)_v + Σ_i k_i ⊙ (V dH')_i ⊙ e^{λ_end − λ_i}
//   B5  dlog a_s = Σ_{r ≥ s} dλ_r   (summed over the channels for a per-head gate)
template <class T>
void gated_backward(const ScanShape& s, int64_t C, const ScanInputs<T>& in,
                    const T* chunk_states, const T* dout, const T* ds_final,
                    const ScanInputGrads<T>& grads) {
  const int64_t d = s.d, dd = d * d, pairs = s.B * s.H, chunks = (s.T + C - 1) / C;
  const int64_t Cmax = std::min(C, s.T);
  const bool per_channel = gate_per_channel(s.rule);
#pragma omp parallel if (pairs > 1 && pairs * s.T * dd >= kParallelMin)
  {
    Scratch<T> scratch(gated_scratch_size(Cmax, d));
    RowMatrix<T> G(d, d), dH(d, d);
    Vector<T> E(d), end_term(d);
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
        GatedTerms<T> m = gated_terms(s, in, at, scratch, false);
        ConstRowsMap<T> Q = rows(in.q, at), K = rows(in.k, at), V = rows(in.v, at);
        ConstRowsMap<T> dO = rows(dout, at);
        RowsMap<T> dQ = rows(grads.dq, at), dK = rows(grads.dk, at), dV = rows(grads.dv, at);
        MatrixMap<T> dP = scratch.matrix(c, c), dOH = scratch.matrix(c, d),
                     VG = scratch.matrix(c, d), dlam = scratch.matrix(c, d);

        // B3's products first: per channel, P itself comes out of the same loop.
        dP.noalias() = dO * V.transpose();
        dOH.noalias() = dO * H;
        times_decay(dQ, dOH, m.Dq);      // (dO H) ⊙ e^λ
        VG.noalias() = V * G;
        times_decay(dK, VG, m.Dk);       // (V dH') ⊙ e^{λ_end − λ}
        if (uses_gate(s.rule))           // Σ_i k_i ⊙ (the part of dk_i just formed)
          end_term = K.cwiseProduct(dK).colwise().sum().transpose();
        if (!per_channel) {
          MatrixMap<T> dPG = scratch.matrix(c, c);
          dPG = dP.cwiseProduct(m.Gamma);
          dQ.noalias() += dPG * K;
          dK.noalias() += dPG.transpose() * Q;
        } else {
          m.P.setZero();
          for (int64_t r = 0; r < c; ++r) {
            E.setOnes();  // e^{λ_r − λ_i}, walking i down from r
            for (int64_t i = r; i >= 0; --i) {
              m.P(r, i) = Q.row(r).cwiseProduct(K.row(i)).dot(E.transpose());
              dQ.row(r) += dP(r, i) * K.row(i).cwiseProduct(E.transpose());
              dK.row(i) += dP(r, i) * Q.row(r).cwiseProduct(E.transpose());
              E = E.cwiseProduct(m.A.row(i).transpose());
            }
          }
        }
        // B1  dV = Pᵀ dO + Kd dH'ᵀ
        dV.noalias() = m.P.transpose() * dO;
        dV.noalias() += m.Kd * G.transpose();
        // B2  dH = dOᵀ Qg + dH' diag(e^{λ_end})
        if (m.Dq.cols() == 1) dH = m.Dq(c - 1, 0) * G;
        else dH = G * m.Dq.row(c - 1).asDiagonal();
        dH.noalias() += dO.transpose() * m.Qg;

        if (uses_gate(s.rule)) {
          // B4  dλ_r = q_r ⊙ dq_r − k_r ⊙ dk_r, the state's terms on the last row
          dlam = Q.cwiseProduct(dQ) - K.cwiseProduct(dK);
          end_term += (G.cwiseProduct(H).colwise().sum().transpose())
                          .cwiseProduct(per_channel ? Vector<T>(m.Dq.row(c - 1).transpose())
                                                    : Vector<T>::Constant(d, m.Dq(c - 1, 0)));
          dlam.row(c - 1) += end_term.transpose();
          // B5  dlog a_s = Σ_{r ≥ s} dλ_r
          for (int64_t r = c - 2; r >= 0; --r) dlam.row(r) += dlam.row(r + 1);
          if (per_channel) rows(grads.dg, at) = dlam;
          else gates(grads.dg, at) = dlam.rowwise().sum();
        }
        G.swap(dH);  // dH of this chunk is dH' of the one before
      }
      MatrixMap<T>(grads.ds0 + bh * dd, d, d) = G;
    }
  }
}

template void gated_forward<float>(const ScanShape&, int64_t, const ScanInputs<float>&,
                                   const float*, float*, float*, float*);
template void gated_forward<double>(const ScanShape&, int64_t, const ScanInputs<double>&,
                                    const double*, double*, double*, double*);
template void gated_backward<float>(const ScanShape&, int64_t, const ScanInputs<float>&,
                                    const float*, const float*, const float*,
                                    const ScanInputGrads<float>&);
template void gated_backward<double>(const ScanShape&, int64_t, const ScanInputs<double>&,
                                     const double*, const double*, const double*,
                                     const ScanInputGrads<double>&);

}  // namespace lina::cpu::scan_chunk
