// The scan on the GPU in chunkwise-parallel form (docs/recurrence.md §3), as block
// programs (backend_cuda/block_program.h): one block per (batch, head) walks
// its chunks in order (forward) or in reverse (backward); inside a chunk every
// matrix product and element-wise pass is one block.each() over the output
// elements, each item one element with a plain dot-product loop, and each
// unit lower triangular solve is one each() over columns, one column solved
// by substitution per item. The twin of backend_cpu/scan_chunked.cpp, which
// the tests compare it with: the same statements in the same order, with the
// same labels F1–F5 / B1–B10.
//
// When C does not divide T the last chunk is simply shorter (c < C rows):
// the same as padding it with q = k = v = 0, β = 0, g = 0 and dropping the
// padded rows.
//
// Memory per block: the carried d×d state (H forward; G = dH' and dH
// backward) in shared memory; the chunk's matrices in the block's global
// workspace, carved afresh for each chunk at its size c (the workspace is
// sized for C_max = min(C, T)). All matrices are row-major.
//
// The decay is one number per head and token (fixed or learned), read
// through scan_log_decay; all gate products are formed in log space as
// segment sums, so exp never sees a positive exponent. A decay per key
// channel has no chunked program here (scan.cu says so; such a rule takes
// the token-by-token one, scan_device.h).
//
// Layouts as in scan_device.h: q, k, v, o [B, T, H, d]; beta, g [B, T, H];
// states [B, H, d, d] value × key; chunk_states (saved_out / saved)
// [B, H, N, d, d], the state entering each chunk, N = ⌈T/C⌉. Outputs are
// written (=).
#pragma once
#include <cmath>
#include <cstdint>

#include "backend_cuda/scan_device.h"

namespace lina::cuda {

namespace chunked {

// Where one chunk's rows sit in the [B, T, H, d] / [B, T, H] tensors.
struct ChunkPlace {
  int64_t c;       // rows in this chunk (C, or fewer for the last one)
  int64_t token0;  // index of its first token in [B, T, H]
  int64_t stride;  // H: from one token of the head to the next in [B, T, H]
  int64_t d;
  LINA_HD int64_t token(int64_t r) const { return token0 + r * stride; }          // into [B, T, H]
  LINA_HD int64_t at(int64_t r, int64_t j) const { return token(r) * d + j; }     // into [B, T, H, d]
};

LINA_HD ChunkPlace chunk_place(const ScanArgs& a, int64_t bh, int64_t n) {
  const int64_t t0 = n * a.chunk, rest = a.s.T - t0;
  return ChunkPlace{rest < a.chunk ? rest : a.chunk, ((bh / a.s.H) * a.s.T + t0) * a.s.H + bh % a.s.H,
                    a.s.H, a.s.d};
}

LINA_HD int64_t chunk_count(const ScanArgs& a) { return (a.s.T + a.chunk - 1) / a.chunk; }
LINA_HD int64_t max_chunk(const ScanArgs& a) { return a.chunk < a.s.T ? a.chunk : a.s.T; }

// g_r of row r of the chunk (log α; the gate is per head).
LINA_HD float log_gate(const ScanArgs& a, const ChunkPlace& at, int64_t r) {
  return scan_log_decay(a.s, a.in.g, at.token(r), 0);
}

// The block's workspace carved into the chunk's matrices, reset for every
// chunk (the CPU's Scratch). Every thread carves the same way.
struct Carve {
  float* next;
  LINA_HD float* take(int64_t n) {
    float* p = next;
    next += n;
    return p;
  }
};

// Everything one chunk's forward computes before its read-out; the backward
// recomputes it from the saved chunk-start state H instead of storing it.
struct ChunkTerms {
  float* Gamma;  // [c, c]   Γ_ri = exp(λ_r − λ_i) for i ≤ r, 0 above the diagonal
  float* gamma;  // [c]      γ_r = exp(λ_r), decay from the chunk start to r
  float* delta;  // [c]      δ_i = Γ_{c−1,i}, decay from i to the chunk end
  float* KK;     // [c, c]   K Kᵀ (delta rules)
  float* QK;     // [c, c]   Q Kᵀ
  float* A;      // [c, c]   strictly_lower(diag(β)(K Kᵀ ⊙ Γ)); I + A is the system of F2
  float* YW;     // [c, 2d]  [Y | W], (I + A)[Y | W] = [diag(β) V | diag(β ⊙ γ) K]
  float* U;      // [c, d]   the write vectors u_r as rows: Y − W Hᵀ (linear: V)
  float* DK;     // [c, d]   diag(δ) K
};

// Floats chunk_terms carves at chunk length c.
LINA_HD int64_t chunk_terms_floats(int64_t c, int64_t d) { return 4 * c * c + 2 * c + 4 * c * d; }

// F1–F3 of §3.3 for one chunk entering with state H [d, d] (and Γ, γ, δ of
// §3.1). Every thread calls it; it runs its steps as each()s.
LINA_HD ChunkTerms chunk_terms(const ScanArgs& a, const Block& block, const ChunkPlace& at,
                               const float* H, Carve& carve) {
  const int64_t c = at.c, d = at.d;
  const bool delta_rule = uses_beta(a.s.rule), gated = decays(a.s.rule);
  ChunkTerms m;
  m.Gamma = carve.take(c * c);
  m.gamma = carve.take(c);
  m.delta = carve.take(c);
  m.KK = carve.take(c * c);
  m.QK = carve.take(c * c);
  m.A = carve.take(c * c);
  m.YW = carve.take(c * 2 * d);
  m.U = carve.take(c * d);
  m.DK = carve.take(c * d);
  const float *q = a.in.q, *k = a.in.k, *v = a.in.v;

  // Gates in log space, one row r per item: Γ_ri from the segment sum
  // g_{i+1} + … + g_r (accurate in float32 even when λ is large), formed only
  // on and below the diagonal; γ_r from λ_r = g_0 + … + g_r. The last row is
  // δ. Without a gate Γ is the lower triangular ones, γ = δ = 1.
  block.each(c, [&](int64_t r) {
    float* row = m.Gamma + r * c;
    for (int64_t i = r + 1; i < c; ++i) row[i] = 0.0f;
    row[r] = 1.0f;
    float segment = 0.0f, lambda = 0.0f;
    for (int64_t i = r - 1; i >= 0; --i) {
      if (gated) segment += log_gate(a, at, i + 1);
      row[i] = gated ? expf(segment) : 1.0f;
    }
    if (gated)
      for (int64_t i = 0; i <= r; ++i) lambda += log_gate(a, at, i);
    m.gamma[r] = gated ? expf(lambda) : 1.0f;
    if (r == c - 1)
      for (int64_t i = 0; i < c; ++i) m.delta[i] = row[i];
  });
  // DK = diag(δ) K   [c, d]
  block.each(c * d, [&](int64_t rj) {
    const int64_t r = rj / d, j = rj % d;
    m.DK[rj] = m.delta[r] * k[at.at(r, j)];
  });
  // QK = Q Kᵀ, KK = K Kᵀ   [c, c]
  block.each(c * c, [&](int64_t ri) {
    const int64_t r = ri / c, i = ri % c;
    float qk = 0.0f, kk = 0.0f;
    for (int64_t j = 0; j < d; ++j) {
      qk += q[at.at(r, j)] * k[at.at(i, j)];
      kk += k[at.at(r, j)] * k[at.at(i, j)];
    }
    m.QK[ri] = qk;
    if (delta_rule) m.KK[ri] = kk;
  });

  if (!delta_rule) {  // linear: u = v (K Kᵀ, A, Y, W are not needed)
    block.each(c * d, [&](int64_t rj) { m.U[rj] = v[at.at(rj / d, rj % d)]; });
    return m;
  }
  const float* beta = a.in.beta;
  // F1  A = strictly_lower(diag(β) (K Kᵀ ⊙ Γ))   [c, c]
  block.each(c * c, [&](int64_t ri) {
    const int64_t r = ri / c, i = ri % c;
    m.A[ri] = i < r ? beta[at.token(r)] * (m.KK[ri] * m.Gamma[ri]) : 0.0f;
  });
  // F2  (I + A) [Y | W] = [diag(β) V | diag(β ⊙ γ) K]: the right side   [c, 2d]
  block.each(c * 2 * d, [&](int64_t rj) {
    const int64_t r = rj / (2 * d), j = rj % (2 * d);
    const float b = beta[at.token(r)];
    m.YW[rj] = j < d ? b * v[at.at(r, j)] : b * m.gamma[r] * k[at.at(r, j - d)];
  });
  //     then forward substitution, one column per item
  block.each(2 * d, [&](int64_t j) {
    for (int64_t r = 1; r < c; ++r) {
      float x = m.YW[r * 2 * d + j];
      for (int64_t i = 0; i < r; ++i) x -= m.A[r * c + i] * m.YW[i * 2 * d + j];
      m.YW[r * 2 * d + j] = x;
    }
  });
  // F3  U = Y − W Hᵀ   [c, d]
  block.each(c * d, [&](int64_t rj) {
    const int64_t r = rj / d, j = rj % d;
    const float* W_r = m.YW + r * 2 * d + d;
    float WH = 0.0f;
    for (int64_t l = 0; l < d; ++l) WH += W_r[l] * H[j * d + l];
    m.U[rj] = m.YW[r * 2 * d + j] - WH;
  });
  return m;
}

// The walks both chunked forms share. Forward: H, the state entering the
// chunk, lives in shared memory, starts as S_0, is saved for the backward,
// and chunk(at, H, carve) reads it and leaves the state after the chunk in
// it; the last one is S_T.
template <class Chunk>
LINA_HD void walk_chunks_forward(const ScanArgs& a, const Block& block, Chunk&& chunk) {
  const int64_t dd = a.s.d * a.s.d, bh = block.index, chunks = chunk_count(a);
  float* H = block.shared;  // [d, d]
  block.each(dd, [&](int64_t ij) { H[ij] = a.s0 ? a.s0[bh * dd + ij] : 0.0f; });
  for (int64_t n = 0; n < chunks; ++n) {
    if (a.saved_out)
      block.each(dd, [&](int64_t ij) { a.saved_out[(bh * chunks + n) * dd + ij] = H[ij]; });
    Carve carve{block.workspace};  // the chunk's matrices, carved afresh
    chunk(chunk_place(a, bh, n), H, carve);
  }
  block.each(dd, [&](int64_t ij) { a.s_final[bh * dd + ij] = H[ij]; });
}

// Backward, chunks in reverse: G = dH' (the gradient of the state leaving the
// chunk) starts as dS_T; chunk(at, H, G, dH, carve) writes the chunk's input
// gradients and dH, the gradient of its saved entering state H; then G and
// dH swap roles, and the first chunk's dH is dS_0.
template <class Chunk>
LINA_HD void walk_chunks_backward(const ScanArgs& a, const Block& block, Chunk&& chunk) {
  const int64_t dd = a.s.d * a.s.d, bh = block.index, chunks = chunk_count(a);
  float* G = block.shared;  // [d, d]
  float* dH = G + dd;       // [d, d]
  block.each(dd, [&](int64_t ij) { G[ij] = a.ds_final ? a.ds_final[bh * dd + ij] : 0.0f; });
  for (int64_t n = chunks - 1; n >= 0; --n) {
    Carve carve{block.workspace};
    chunk(chunk_place(a, bh, n), a.saved + (bh * chunks + n) * dd, G, dH, carve);
    float* swap = G;  // dH of this chunk is dH' of the one before
    G = dH;
    dH = swap;
  }
  block.each(dd, [&](int64_t ij) { a.grads.ds0[bh * dd + ij] = G[ij]; });
}

// What every chunked program shares: one block of 128 threads per (batch,
// head), the carried d×d state (forward: H) or two (backward: dH' and dH)
// in shared memory.
struct ForwardBlocks {
  using Args = ScanArgs;
  static constexpr int kThreads = 128;
  static LINA_HD int64_t blocks(const Args& a) { return a.s.B * a.s.H; }
  static LINA_HD int64_t shared_floats(const Args& a) { return a.s.d * a.s.d; }
};
struct BackwardBlocks : ForwardBlocks {
  static LINA_HD int64_t shared_floats(const Args& a) { return 2 * a.s.d * a.s.d; }
};

}  // namespace chunked

// The forward, chunks in order (walk_chunks_forward); per chunk the chunk
// terms (F1–F3), then
//   F4  O = diag(γ) Q Hᵀ + ((Q Kᵀ) ⊙ Γ) U
//   F5  H' = γ_c H + Uᵀ diag(δ) K
struct ScanChunkedForward : chunked::ForwardBlocks {
  // the chunk terms at C_max
  static LINA_HD int64_t workspace_floats(const Args& a) {
    return chunked::chunk_terms_floats(chunked::max_chunk(a), a.s.d);
  }

  static LINA_HD void run(const Args& a, const Block& block) {
    using namespace chunked;
    const int64_t d = a.s.d, dd = d * d;
    walk_chunks_forward(a, block, [&](const ChunkPlace& at, float* H, Carve& carve) {
      const int64_t c = at.c;
      const ChunkTerms m = chunk_terms(a, block, at, H, carve);
      const float* q = a.in.q;
      // F4  O = diag(γ) Q Hᵀ + P U,  P = (Q Kᵀ) ⊙ Γ (zero above the diagonal)   [c, d]
      block.each(c * d, [&](int64_t rj) {
        const int64_t r = rj / d, j = rj % d;
        float QH = 0.0f, PU = 0.0f;
        for (int64_t l = 0; l < d; ++l) QH += q[at.at(r, l)] * H[j * d + l];
        for (int64_t i = 0; i <= r; ++i) PU += (m.QK[r * c + i] * m.Gamma[r * c + i]) * m.U[i * d + j];
        a.o[at.at(r, j)] = m.gamma[r] * QH + PU;
      });
      // F5  H' = γ_c H + Uᵀ diag(δ) K, in place (item ij reads only H_ij)   [d, d]
      block.each(dd, [&](int64_t ij) {
        const int64_t i = ij / d, j = ij % d;
        float UDK = 0.0f;
        for (int64_t r = 0; r < c; ++r) UDK += m.U[r * d + i] * m.DK[r * d + j];
        H[ij] = m.gamma[c - 1] * H[ij] + UDK;
      });
    });
  }
};

// §3.4, one pass over the chunks in reverse (walk_chunks_backward): each
// chunk's terms are recomputed from its saved entering state H, then phase 1
// (B1–B2, the state gradient) and phase 2 (B3–B10, the chunk's input
// gradients) run together.
struct ScanChunkedBackward : chunked::BackwardBlocks {
  // the chunk terms, then 5 [c, c] (P, dPG, dGammaGamma, dA, dEG), 5 [c, d]
  // (dU, dOH, UG, dB counting twice) and 2 [c] (dλ, δ ⊙ dδ), at C_max
  static LINA_HD int64_t workspace_floats(const Args& a) {
    const int64_t C = chunked::max_chunk(a), d = a.s.d;
    return chunked::chunk_terms_floats(C, d) + 5 * C * C + 5 * C * d + 2 * C;
  }

  static LINA_HD void run(const Args& a, const Block& block) {
    using namespace chunked;
    const ScanShape& s = a.s;
    const int64_t d = s.d, dd = d * d;
    const bool delta_rule = uses_beta(s.rule), gated = uses_gate(s.rule);  // gated: dg wanted
    // H [d, d] the state entering the chunk; G = dH' and dH [d, d] in shared memory
    walk_chunks_backward(a, block, [&](const ChunkPlace& at, const float* H, const float* G,
                                       float* dH, Carve& carve) {
      const int64_t c = at.c;
      const ChunkTerms m = chunk_terms(a, block, at, H, carve);
      const float *q = a.in.q, *k = a.in.k, *v = a.in.v, *dO = a.dout;
      float *dQ = a.grads.dq, *dK = a.grads.dk, *dV = a.grads.dv;
      float* P = carve.take(c * c);            // [c, c]  (Q Kᵀ) ⊙ Γ
      float* dPG = carve.take(c * c);          // [c, c]  dP ⊙ Γ
      float* dGammaGamma = carve.take(c * c);  // [c, c]  dΓ ⊙ Γ (gated)
      float* dA = carve.take(c * c);           // [c, c]  (delta rules)
      float* dEG = carve.take(c * c);          // [c, c]  dE ⊙ Γ (delta rules)
      float* dU = carve.take(c * d);           // [c, d]
      float* dOH = carve.take(c * d);          // [c, d]  dO H
      float* UG = carve.take(c * d);           // [c, d]  U dH'
      float* dB = carve.take(c * 2 * d);       // [c, 2d] [dBV | dBK] (delta rules)
      float* dlambda = carve.take(c);          // [c]     dλ (gated)
      float* ddelta_delta = carve.take(c);     // [c]     δ ⊙ dδ (gated)

      // B1  dU = diag(δ) K dH'ᵀ + Pᵀ dO,   P = (Q Kᵀ) ⊙ Γ
      block.each(c * c, [&](int64_t ri) { P[ri] = m.QK[ri] * m.Gamma[ri]; });
      block.each(c * d, [&](int64_t rj) {
        const int64_t r = rj / d, j = rj % d;
        float DKG = 0.0f, PdO = 0.0f;
        for (int64_t l = 0; l < d; ++l) DKG += m.DK[r * d + l] * G[j * d + l];
        for (int64_t i = r; i < c; ++i) PdO += P[i * c + r] * dO[at.at(i, j)];
        dU[rj] = DKG + PdO;
      });
      // B2  dH = γ_c dH' + dOᵀ diag(γ) Q − dUᵀ W   (the last term: delta rules)   [d, d]
      block.each(dd, [&](int64_t ij) {
        const int64_t i = ij / d, j = ij % d;
        float dOQ = 0.0f, dUW = 0.0f;
        for (int64_t r = 0; r < c; ++r) dOQ += dO[at.at(r, i)] * (m.gamma[r] * q[at.at(r, j)]);
        if (delta_rule)
          for (int64_t r = 0; r < c; ++r) dUW += dU[r * d + i] * m.YW[r * 2 * d + d + j];
        dH[ij] = dOQ + m.gamma[c - 1] * G[ij] - dUW;
      });
      // B3  dP = lower_incl(dO Uᵀ) (the mask comes with Γ), kept as dP ⊙ Γ   [c, c]
      block.each(c * c, [&](int64_t ri) {
        const int64_t r = ri / c, i = ri % c;
        float dOU = 0.0f;
        if (i <= r)
          for (int64_t j = 0; j < d; ++j) dOU += dO[at.at(r, j)] * m.U[i * d + j];
        dPG[ri] = i <= r ? dOU * m.Gamma[ri] : 0.0f;
      });
      //     dO H and U dH'   [c, d]
      block.each(c * d, [&](int64_t rj) {
        const int64_t r = rj / d, j = rj % d;
        float dOH_rj = 0.0f, UG_rj = 0.0f;
        for (int64_t l = 0; l < d; ++l) {
          dOH_rj += dO[at.at(r, l)] * H[l * d + j];
          UG_rj += m.U[r * d + l] * G[l * d + j];
        }
        dOH[rj] = dOH_rj;
        UG[rj] = UG_rj;
      });
      //     dQ = diag(γ) dO H + (dP ⊙ Γ) K,   dK = diag(δ) U dH' + (dP ⊙ Γ)ᵀ Q   [c, d]
      block.each(c * d, [&](int64_t rj) {
        const int64_t r = rj / d, j = rj % d;
        float dPGK = 0.0f, dPGQ = 0.0f;
        for (int64_t i = 0; i <= r; ++i) dPGK += dPG[r * c + i] * k[at.at(i, j)];
        for (int64_t i = r; i < c; ++i) dPGQ += dPG[i * c + r] * q[at.at(i, j)];
        dQ[at.at(r, j)] = m.gamma[r] * dOH[rj] + dPGK;
        dK[at.at(r, j)] = m.delta[r] * UG[rj] + dPGQ;
      });

      if (!delta_rule) {  // B4  linear: dV = dU
        block.each(c * d, [&](int64_t rj) { dV[at.at(rj / d, rj % d)] = dU[rj]; });
      } else {
        const float* beta = a.in.beta;
        // B5–B6  (I + A)ᵀ [dBV | dBK] = [dU | dW],  dW = −dU H: the right side   [c, 2d]
        block.each(c * 2 * d, [&](int64_t rj) {
          const int64_t r = rj / (2 * d), j = rj % (2 * d);
          float dUH = 0.0f;
          if (j >= d)
            for (int64_t l = 0; l < d; ++l) dUH += dU[r * d + l] * H[l * d + (j - d)];
          dB[rj] = j < d ? dU[r * d + j] : -dUH;
        });
        //        then back substitution, one column per item
        block.each(2 * d, [&](int64_t j) {
          for (int64_t r = c - 2; r >= 0; --r) {
            float x = dB[r * 2 * d + j];
            for (int64_t i = r + 1; i < c; ++i) x -= m.A[i * c + r] * dB[i * 2 * d + j];
            dB[r * 2 * d + j] = x;
          }
        });
        // B7  dV = diag(β) dBV   [c, d]
        block.each(c * d, [&](int64_t rj) {
          const int64_t r = rj / d, j = rj % d;
          dV[at.at(r, j)] = beta[at.token(r)] * dB[r * 2 * d + j];
        });
        //     dA = −strictly_lower(dBV Yᵀ + dBK Wᵀ);  dE ⊙ Γ = diag(β) dA ⊙ Γ   [c, c]
        block.each(c * c, [&](int64_t ri) {
          const int64_t r = ri / c, i = ri % c;
          float dBYW = 0.0f;
          if (i < r)
            for (int64_t l = 0; l < 2 * d; ++l) dBYW += dB[r * 2 * d + l] * m.YW[i * 2 * d + l];
          dA[ri] = i < r ? -dBYW : 0.0f;
          dEG[ri] = beta[at.token(r)] * (dA[ri] * m.Gamma[ri]);
        });
        //     dK += diag(β ⊙ γ) dBK + (dE ⊙ Γ + (dE ⊙ Γ)ᵀ) K   [c, d]
        block.each(c * d, [&](int64_t rj) {
          const int64_t r = rj / d, j = rj % d;
          float dEGK = 0.0f, dEGtK = 0.0f;
          for (int64_t i = 0; i < r; ++i) dEGK += dEG[r * c + i] * k[at.at(i, j)];
          for (int64_t i = r + 1; i < c; ++i) dEGtK += dEG[i * c + r] * k[at.at(i, j)];
          dK[at.at(r, j)] += beta[at.token(r)] * m.gamma[r] * dB[r * 2 * d + d + j] + dEGK + dEGtK;
        });
        // B8  dβ_r = dBV_r·v_r + γ_r dBK_r·k_r + Σ_i dA_ri E_ri,   E = K Kᵀ ⊙ Γ   [c]
        block.each(c, [&](int64_t r) {
          float dBVv = 0.0f, dBKk = 0.0f, dAE = 0.0f;
          for (int64_t j = 0; j < d; ++j) {
            dBVv += dB[r * 2 * d + j] * v[at.at(r, j)];
            dBKk += dB[r * 2 * d + d + j] * k[at.at(r, j)];
          }
          for (int64_t i = 0; i < r; ++i) dAE += dA[r * c + i] * (m.KK[r * c + i] * m.Gamma[r * c + i]);
          a.grads.dbeta[at.token(r)] = dBVv + m.gamma[r] * dBKk + dAE;
        });
      }
      if (gated) {
        const float* beta = a.in.beta;
        // dΓ ⊙ Γ, gathered for the gates: dΓ = dP ⊙ (Q Kᵀ) + dE ⊙ (K Kᵀ) (the last: delta)   [c, c]
        block.each(c * c, [&](int64_t ri) {
          dGammaGamma[ri] = dPG[ri] * m.QK[ri] + (delta_rule ? dEG[ri] * m.KK[ri] : 0.0f);
        });
        // B9  dγ_r = dO_r·(H q_r) + β_r dBK_r·k_r   (dO_r·(H q_r) = (dO H)_r·q_r; β: delta)
        //     dδ_r = u_rᵀ dH' k_r = (U dH')_r·k_r
        //     dλ_r = γ_r dγ_r + Σ_i (dΓ⊙Γ)_ri − Σ_i (dΓ⊙Γ)_ir − δ_r dδ_r   [c]
        block.each(c, [&](int64_t r) {
          float dOHq = 0.0f, dBKk = 0.0f, UGk = 0.0f, row = 0.0f, col = 0.0f;
          for (int64_t j = 0; j < d; ++j) {
            dOHq += dOH[r * d + j] * q[at.at(r, j)];
            if (delta_rule) dBKk += dB[r * 2 * d + d + j] * k[at.at(r, j)];
            UGk += UG[r * d + j] * k[at.at(r, j)];
          }
          for (int64_t i = 0; i < c; ++i) {
            row += dGammaGamma[r * c + i];
            col += dGammaGamma[i * c + r];
          }
          const float dgamma = dOHq + (delta_rule ? beta[at.token(r)] * dBKk : 0.0f);
          ddelta_delta[r] = m.delta[r] * UGk;
          dlambda[r] = m.gamma[r] * dgamma + row - col - ddelta_delta[r];
        });
        //     dλ_c += γ_c ⟨dH', H⟩ + Σ_i δ_i dδ_i
        // B10 dg_j = Σ_{r ≥ j} dλ_r   (one item: a sum over the chunk)
        block.each(1, [&](int64_t) {
          float GH = 0.0f, decay_to_end = 0.0f;
          for (int64_t ij = 0; ij < dd; ++ij) GH += G[ij] * H[ij];
          for (int64_t r = 0; r < c; ++r) decay_to_end += ddelta_delta[r];
          float sum = dlambda[c - 1] + (m.gamma[c - 1] * GH + decay_to_end);
          a.grads.dg[at.token(c - 1)] = sum;
          for (int64_t r = c - 2; r >= 0; --r) {
            sum += dlambda[r];
            a.grads.dg[at.token(r)] = sum;
          }
        });
      }
    });
  }
};

}  // namespace lina::cuda
