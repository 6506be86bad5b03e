// The chunked scan on the GPU for the rules without the delta correction,
// with a decay per key channel (gla) or per head (linear, retnet, mamba2,
// where every channel has the same decay): block programs
// (backend_cuda/block_program.h), one block per (batch, head) walking its
// chunks. The twin of backend_cpu/scan_chunked_gated.cpp, derived in
// docs/recurrence-gated.md, which the tests compare it with. scan.cu runs it
// for the decay per key channel; the rules with one decay per head keep the
// Γ-matrix programs of scan_chunked_device.h.
//
// Per chunk of c rows entering with the state H (d×d, value × key), with
// λ_rj = log a_0j + … + log a_rj the decay of key channel j from the chunk
// start to row r:
//   P_ri = Σ_j q_rj k_ij e^{λ_rj − λ_ij}   for i ≤ r, 0 above
//   F1  O  = (Q ⊙ e^λ) Hᵀ + P V
//   F2  H' = H diag(e^{λ_end}) + Vᵀ (K ⊙ e^{λ_end − λ})
// e^{λ_r − λ_i} = a_{i+1} ⋯ a_r is walked as a running product, one row of d
// numbers per work item, so no exponent is ever positive and nothing
// overflows however strong the decay.
//
// Layouts as in scan_device.h: q, k, v, o [B, T, H, d]; g [B, T, H, d] (per
// channel) or [B, T, H]; chunk_states [B, H, N, d, d]. Outputs are written
// (=).
#pragma once
#include <cmath>
#include <cstdint>

#include "backend_cuda/scan_chunked_device.h"

namespace lina::cuda {

namespace chunked_gated {

using chunked::Carve;
using chunked::ChunkPlace;

// The decays of one chunk, every one a [c, d] matrix (row r, key channel j).
struct Decays {
  float* a;   // a_rj = e^{log a_rj}, the decay of token r
  float* Dq;  // e^{λ_rj}: from the chunk start to row r
  float* Dk;  // e^{λ_end,j − λ_rj}: from row r to the chunk end
};

LINA_HD Decays chunk_decays(const ScanArgs& a, const Block& block, const ChunkPlace& at,
                            Carve& carve) {
  const int64_t c = at.c, d = at.d;
  Decays m{carve.take(c * d), carve.take(c * d), carve.take(c * d)};
  // One channel per item: the running sum from the chunk start gives λ_r, the
  // one back from the chunk end λ_end − λ_i (a sum over the tokens after i,
  // never a difference of two large λ).
  block.each(d, [&](int64_t j) {
    float from_start = 0.0f, to_end = 0.0f;
    for (int64_t r = 0; r < c; ++r) {
      const float log_a = scan_log_decay(a.s, a.in.g, at.token(r), j);
      from_start += log_a;
      m.a[r * d + j] = expf(log_a);
      m.Dq[r * d + j] = expf(from_start);
    }
    for (int64_t i = c - 1; i >= 0; --i) {
      m.Dk[i * d + j] = expf(to_end);
      to_end += scan_log_decay(a.s, a.in.g, at.token(i), j);
    }
  });
  return m;
}

}  // namespace chunked_gated

// The forward, chunks in order (chunked::walk_chunks_forward). Per chunk:
// the decays, P (one row per item, the running product E_r in the
// workspace), then F1 and F2.
struct ScanChunkedGatedForward : chunked::ForwardBlocks {
  // the decays (3 [c, d]), E [c, d] and P [c, c] at C_max
  static LINA_HD int64_t workspace_floats(const Args& a) {
    const int64_t C = chunked::max_chunk(a), d = a.s.d;
    return 4 * C * d + C * C;
  }

  static LINA_HD void run(const Args& a, const Block& block) {
    using namespace chunked;
    const int64_t d = a.s.d, dd = d * d;
    const float *q = a.in.q, *k = a.in.k, *v = a.in.v;
    walk_chunks_forward(a, block, [&](const ChunkPlace& at, float* H, Carve& carve) {
      const int64_t c = at.c;
      const chunked_gated::Decays m = chunked_gated::chunk_decays(a, block, at, carve);
      float* E = carve.take(c * d);  // [c, d]  row r: e^{λ_r − λ_i} while walking i
      float* P = carve.take(c * c);  // [c, c]
      // P row r: walk i down from r, E_r = a_{i+1} ⋯ a_r
      block.each(c, [&](int64_t r) {
        float* E_r = E + r * d;
        for (int64_t j = 0; j < d; ++j) E_r[j] = 1.0f;
        for (int64_t i = c - 1; i > r; --i) P[r * c + i] = 0.0f;
        for (int64_t i = r; i >= 0; --i) {
          float p = 0.0f;
          for (int64_t j = 0; j < d; ++j) p += q[at.at(r, j)] * k[at.at(i, j)] * E_r[j];
          P[r * c + i] = p;
          for (int64_t j = 0; j < d; ++j) E_r[j] *= m.a[i * d + j];
        }
      });
      // F1  O = (Q ⊙ e^λ) Hᵀ + P V   [c, d]
      block.each(c * d, [&](int64_t rj) {
        const int64_t r = rj / d, j = rj % d;
        float QH = 0.0f, PV = 0.0f;
        for (int64_t l = 0; l < d; ++l) QH += q[at.at(r, l)] * m.Dq[r * d + l] * H[j * d + l];
        for (int64_t i = 0; i <= r; ++i) PV += P[r * c + i] * v[at.at(i, j)];
        a.o[at.at(r, j)] = QH + PV;
      });
      // F2  H' = H diag(e^{λ_end}) + Vᵀ (K ⊙ e^{λ_end − λ}), in place (item ij reads only H_ij)
      block.each(dd, [&](int64_t ij) {
        const int64_t i = ij / d, j = ij % d;
        float VK = 0.0f;
        for (int64_t r = 0; r < c; ++r) VK += v[at.at(r, i)] * k[at.at(r, j)] * m.Dk[r * d + j];
        H[ij] = H[ij] * m.Dq[(c - 1) * d + j] + VK;
      });
    });
  }
};

// docs/recurrence-gated.md §3, one pass over the chunks in reverse
// (chunked::walk_chunks_backward), each chunk's decays recomputed:
//   dP = dO Vᵀ (i ≤ r)
//   dQ = (dO H) ⊙ e^λ + Σ_{i ≤ r} dP_ri k_i ⊙ e^{λ_r − λ_i}
//   dK = (V dH') ⊙ e^{λ_end − λ} + Σ_{r ≥ i} dP_ri q_r ⊙ e^{λ_r − λ_i}
//   dV = Pᵀ dO + (K ⊙ e^{λ_end − λ}) dH'ᵀ
//   dH = dH' diag(e^{λ_end}) + dOᵀ (Q ⊙ e^λ)
//   dλ_r = q_r ⊙ dq_r − k_r ⊙ dk_r, and on the last row also
//          + e^{λ_end} ⊙ Σ_v (dH' ⊙ H)_v + Σ_i k_i ⊙ (V dH')_i ⊙ e^{λ_end − λ_i}
//   dlog a_s = Σ_{r ≥ s} dλ_r   (summed over the channels for a per-head gate)
struct ScanChunkedGatedBackward : chunked::BackwardBlocks {
  // the decays (3 [c, d]), E, dOH, VG, dλ (4 [c, d]), P and dP (2 [c, c]) at C_max
  static LINA_HD int64_t workspace_floats(const Args& a) {
    const int64_t C = chunked::max_chunk(a), d = a.s.d;
    return 7 * C * d + 2 * C * C;
  }

  static LINA_HD void run(const Args& a, const Block& block) {
    using namespace chunked;
    const ScanShape& s = a.s;
    const int64_t d = s.d, dd = d * d;
    const float *q = a.in.q, *k = a.in.k, *v = a.in.v, *dO = a.dout;
    float *dQ = a.grads.dq, *dK = a.grads.dk, *dV = a.grads.dv;
    // H [d, d] the state entering the chunk; G = dH' and dH [d, d] in shared memory
    walk_chunks_backward(a, block, [&](const ChunkPlace& at, const float* H, const float* G,
                                       float* dH, Carve& carve) {
      const int64_t c = at.c;
      const chunked_gated::Decays m = chunked_gated::chunk_decays(a, block, at, carve);
      float* E = carve.take(c * d);     // [c, d]  one running product per item
      float* dOH = carve.take(c * d);   // [c, d]  dO H
      float* VG = carve.take(c * d);    // [c, d]  V dH'
      float* dlam = carve.take(c * d);  // [c, d]  dλ, then its suffix sums
      float* P = carve.take(c * c);     // [c, c]
      float* dP = carve.take(c * c);    // [c, c]  dO Vᵀ on and below the diagonal

      block.each(c * c, [&](int64_t ri) {
        const int64_t r = ri / c, i = ri % c;
        float dOV = 0.0f;
        if (i <= r)
          for (int64_t j = 0; j < d; ++j) dOV += dO[at.at(r, j)] * v[at.at(i, j)];
        dP[ri] = dOV;
      });
      block.each(c * d, [&](int64_t rj) {
        const int64_t r = rj / d, j = rj % d;
        float dOH_rj = 0.0f, VG_rj = 0.0f;
        for (int64_t l = 0; l < d; ++l) {
          dOH_rj += dO[at.at(r, l)] * H[l * d + j];
          VG_rj += v[at.at(r, l)] * G[l * d + j];
        }
        dOH[rj] = dOH_rj;
        VG[rj] = VG_rj;
      });
      // dQ row r (and P row r): walk i down from r, E_r = a_{i+1} ⋯ a_r
      block.each(c, [&](int64_t r) {
        float* E_r = E + r * d;
        for (int64_t j = 0; j < d; ++j) {
          E_r[j] = 1.0f;
          dQ[at.at(r, j)] = dOH[r * d + j] * m.Dq[r * d + j];
        }
        for (int64_t i = c - 1; i > r; --i) P[r * c + i] = 0.0f;
        for (int64_t i = r; i >= 0; --i) {
          float p = 0.0f;
          for (int64_t j = 0; j < d; ++j) {
            p += q[at.at(r, j)] * k[at.at(i, j)] * E_r[j];
            dQ[at.at(r, j)] += dP[r * c + i] * k[at.at(i, j)] * E_r[j];
          }
          P[r * c + i] = p;
          for (int64_t j = 0; j < d; ++j) E_r[j] *= m.a[i * d + j];
        }
      });
      // dK row i: walk r up from i, E_i = a_{i+1} ⋯ a_r
      block.each(c, [&](int64_t i) {
        float* E_i = E + i * d;
        for (int64_t j = 0; j < d; ++j) {
          E_i[j] = 1.0f;
          dK[at.at(i, j)] = VG[i * d + j] * m.Dk[i * d + j];
        }
        for (int64_t r = i; r < c; ++r) {
          if (r > i)
            for (int64_t j = 0; j < d; ++j) E_i[j] *= m.a[r * d + j];
          for (int64_t j = 0; j < d; ++j) dK[at.at(i, j)] += dP[r * c + i] * q[at.at(r, j)] * E_i[j];
        }
      });
      // dV = Pᵀ dO + (K ⊙ e^{λ_end − λ}) dH'ᵀ   [c, d]
      block.each(c * d, [&](int64_t ij) {
        const int64_t i = ij / d, j = ij % d;
        float PdO = 0.0f, KG = 0.0f;
        for (int64_t r = i; r < c; ++r) PdO += P[r * c + i] * dO[at.at(r, j)];
        for (int64_t l = 0; l < d; ++l) KG += k[at.at(i, l)] * m.Dk[i * d + l] * G[j * d + l];
        dV[at.at(i, j)] = PdO + KG;
      });
      // dH = dH' diag(e^{λ_end}) + dOᵀ (Q ⊙ e^λ)   [d, d]
      block.each(dd, [&](int64_t ij) {
        const int64_t i = ij / d, j = ij % d;
        float dOQ = 0.0f;
        for (int64_t r = 0; r < c; ++r) dOQ += dO[at.at(r, i)] * q[at.at(r, j)] * m.Dq[r * d + j];
        dH[ij] = G[ij] * m.Dq[(c - 1) * d + j] + dOQ;
      });

      if (uses_gate(s.rule)) {
        // dλ_r = q_r ⊙ dq_r − k_r ⊙ dk_r   [c, d]
        block.each(c * d, [&](int64_t rj) {
          const int64_t r = rj / d, j = rj % d;
          dlam[rj] = q[at.at(r, j)] * dQ[at.at(r, j)] - k[at.at(r, j)] * dK[at.at(r, j)];
        });
        // the state's terms on the last row, then dlog a_s = Σ_{r ≥ s} dλ_r, one channel per item
        block.each(d, [&](int64_t j) {
          float GH = 0.0f, KVG = 0.0f;
          for (int64_t l = 0; l < d; ++l) GH += G[l * d + j] * H[l * d + j];
          for (int64_t i = 0; i < c; ++i) KVG += k[at.at(i, j)] * VG[i * d + j] * m.Dk[i * d + j];
          float sum = 0.0f;
          for (int64_t r = c - 1; r >= 0; --r) {
            sum += dlam[r * d + j] + (r == c - 1 ? m.Dq[r * d + j] * GH + KVG : 0.0f);
            dlam[r * d + j] = sum;
          }
        });
        block.each(c, [&](int64_t r) {
          if (gate_per_channel(s.rule)) {
            for (int64_t j = 0; j < d; ++j) a.grads.dg[at.at(r, j)] = dlam[r * d + j];
          } else {
            float per_head = 0.0f;
            for (int64_t j = 0; j < d; ++j) per_head += dlam[r * d + j];
            a.grads.dg[at.token(r)] = per_head;
          }
        });
      }
    });
  }
};

// The chunked programs a rule runs: these for a decay per key channel, the
// Γ-matrix ones of scan_chunked_device.h otherwise. f(ChunkedPrograms<..>{})
// is called with the pair; scan.cu launches it, so every caller takes the
// same choice from this one place.
template <class ForwardProgram, class BackwardProgram> struct ChunkedPrograms {
  using Forward = ForwardProgram;
  using Backward = BackwardProgram;
};
template <class F> void with_chunked_programs(ScanRule rule, F&& f) {
  if (gate_per_channel(rule)) f(ChunkedPrograms<ScanChunkedGatedForward, ScanChunkedGatedBackward>{});
  else f(ChunkedPrograms<ScanChunkedForward, ScanChunkedBackward>{});
}

}  // namespace lina::cuda
