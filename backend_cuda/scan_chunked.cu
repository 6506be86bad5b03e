// The chunked scan on the GPU (float32): docs/recurrence.md §3 (the delta
// rules) and docs/recurrence-gated.md (decay per head or per key channel),
// as plain kernels over tiles of at most 64 tokens (scan_tiles.cuh). One
// template covers every write rule through its two properties: how the state
// decays (kDecay: none, per head, per key channel) and whether the write is
// corrected (kDelta). The token-by-token reference is scan_sequential.cu;
// the tests compare both with each other and with the CPU.
//
// Per (batch, head) and tile of c tokens entering with the state H (d×d,
// value × key), with λ_rj = log α_0j + … + log α_rj the cumulative log-decay
// of key channel j from the tile start through token r (one number per
// head: the same for every j; none: 0), and Λ_ri = e^{λ_r − λ_i} for i ≤ r
// (TileDecay, scan_tiles.cuh: from_start e^{λ_r}, to_end e^{λ_end − λ_i},
// head_between and channel_between e^{λ_r − λ_i}):
//   F1–F2  (I + A)[Y | W] = [diag(β) V | diag(β)(K ⊙ e^λ)],  A = strictly_lower(diag(β) E),
//          E_ri = Σ_j k_rj k_ij e^{λ_rj − λ_ij}                       (delta rules)
//   F3     U = Y − W Hᵀ                                    (without the delta correction U = V)
//   F4     O = (Q ⊙ e^λ) Hᵀ + P U,   P_ri = Σ_j q_rj k_ij e^{λ_rj − λ_ij} for i ≤ r
//   F5     H' = H diag(e^{λ_end}) + Uᵀ (K ⊙ e^{λ_end − λ})
// Only F3 and F5 need H, and row v of H' needs only row v of H: the pass
// that carries the state from tile to tile runs in parallel over (batch,
// head, group of state rows); everything else runs over (batch, head, tile).
//
// Forward, three kernels on the stream:
//   scan_solve_kernel          F1–F2 of every tile (delta rules)          → Y, W
//   scan_state_forward_kernel  tile after tile: the entering state, F3, F5 → tile states, U, S_T
//   scan_output_kernel         F4 of every tile                           → O
// What it keeps for the backward (ScanChunkedSaved, core/kernel_args.h):
// the state entering each chunk (chunk_states [B, H, ⌈T/C⌉, d, d]) and,
// for the delta rules when a chunk is one tile (min(C, T) ≤ 64,
// scan_keeps_solve), Y, W and U [B, T, H, d] each. Backward (recurrence.md §3.4, recurrence-gated.md §3),
// four kernels (three without the delta correction):
//   scan_readout_backward_kernel  Pᵀ dO of every tile (B1's second term)
//   scan_state_backward_kernel    tiles in reverse: B1, B2                  → dU, dH' of each tile, dS_0
//   scan_delta_backward_kernel    B5–B8 of every tile (delta rules)        → dV, dβ, dK's delta terms
//   scan_gradients_kernel         B3, and the learned decay's B4/B9–B10             → dQ, dK, d log α
// Chunks longer than a tile keep only chunk_states: their backward first
// runs scan_solve_kernel (delta rules) and scan_state_forward_kernel again,
// each chunk starting from its saved state, for Y, W, U and the state
// entering each tile. Reading what the forward kept gives the same bits as
// that recomputation: the kernels are the same and run on the same inputs.
// Outputs are written (=) in a fixed order: no atomics, the same bits on
// every run.
//
// Tiles that threads read down a column are padded to rows of d + 1
// (padded_row, scan_tiles.cuh: the solve's K, the output kernel's Q, K, U and
// H, the readout backward's Q and K), and the products over them keep a
// register tile of up to kRegisterRows rows per thread (decayed_products,
// output_rows). Shared memory per block at d = 32, for C = 16 (the default) /
// C = 64 (a decay per channel adds its c×d λ; the padding adds under 1 KB):
// solve 7 / 41 KB, the state passes 4–12 / 11–45 KB, output 11–15 / 44–60 KB,
// readout backward 7–11 / 40–56 KB, delta backward 16 / 77 KB, gradients
// 17–25 / 56–88 KB. Above 48 KB a
// kernel asks for it (with_shared_memory), and fewer blocks share an SM: at
// C = 64 the backward's tile kernels run 2–3 blocks of 256 threads per SM.
#include <string>

#include "backend_cuda/cuda_context.h"
#include "backend_cuda/cuda_kernels.h"
#include "backend_cuda/scan_tiles.cuh"
#include "backend_cuda/scratch.h"
#include "core/error.h"

namespace lina::cuda {

namespace {

// The rule takes a gradient of its log α (a learned decay).
template <DecayKind kDecay> constexpr bool learned_decay() {
  return kDecay == DecayKind::LearnedPerHead || kDecay == DecayKind::LearnedPerChannel;
}

// ---- forward ---------------------------------------------------------------------

struct SolveShared {
  double* lambda;  // [c][w]  λ
  float* K;        // [c][d + 1]  the tile's keys, rows padded (read down columns by E's product)
  float* E;        // [c][c]  (K Kᵀ) ⊙ Λ below the diagonal; A = diag(β) E
  float* Y;        // [c][d]  the right side diag(β) V, then Y
  float* W;        // [c][d]  the right side diag(β)(K ⊙ e^λ), then W
  float* beta;     // [c]
  LINA_HD SolveShared(SharedCarve& m, int64_t c, int64_t d, int64_t w)
      : lambda(m.take<double>(c * w)), K(m.take<float>(c * padded_row(d))), E(m.take<float>(c * c)),
        Y(m.take<float>(c * d)), W(m.take<float>(c * d)), beta(m.take<float>(c)) {}
};

// F1–F2 of one tile (delta rules); grid (tiles, B·H). Y, W [B, T, H, d].
template <DecayKind kDecay>
__global__ void __launch_bounds__(kScanThreads)
    scan_solve_kernel(ScanShape s, ScanTiling z, const float* k, const float* v, const float* beta,
                      const float* log_alpha, float* Y, float* W) {
  const int d = int(s.d), w = decay_width<kDecay>(d);
  const Tile at = tile_of(z, blockIdx.y, blockIdx.x);
  const int c = at.rows;
  LINA_DYNAMIC_SHARED(double, scan_shared);
  SharedCarve carve{reinterpret_cast<char*>(scan_shared)};
  const SolveShared t(carve, z.rows, d, w);

  load_padded_rows(t.K, k, at, d);
  for (int r = threadIdx.x; r < c; r += blockDim.x) t.beta[r] = beta[at.token(r)];
  load_log_alpha<kDecay>(t.lambda, s, log_alpha, at);
  __syncthreads();
  const TileDecay<kDecay> decay{t.lambda, w, c - 1};
  // F1  E = (K Kᵀ) ⊙ Λ, strictly below the diagonal
  decayed_products(t.E, t.K, t.K, padded_row(d), decay, c, d, /*strict=*/true);
  // F2's right sides: diag(β) V and diag(β)(K ⊙ e^λ)
  for (int e = threadIdx.x; e < c * d; e += blockDim.x) {
    const int r = e / d, j = e % d;
    t.Y[e] = t.beta[r] * v[at.token(r) * d + j];
    t.W[e] = t.beta[r] * decay.from_start(r, j) * t.K[r * padded_row(d) + j];
  }
  __syncthreads();
  // F2  (I + A)[Y | W] = the right sides, by forward substitution down the
  //     rows, one of the 2d columns per thread (c²/2 multiply-adds each; the
  //     other threads wait: the solve is short beside the products)
  for (int col = threadIdx.x; col < 2 * d; col += blockDim.x) {
    float* X = col < d ? t.Y : t.W;
    const int j = col % d;
    for (int r = 1; r < c; ++r) {
      float x = X[r * d + j];
      for (int i = 0; i < r; ++i) x -= t.beta[r] * t.E[r * c + i] * X[i * d + j];
      X[r * d + j] = x;
    }
  }
  __syncthreads();
  store_rows(Y, t.Y, at, d);
  store_rows(W, t.W, at, d);
}

// State rows a block of the passes over tiles carries: R rows × d keys, one
// state entry per thread (d = 32: R = 8, four blocks per (batch, head)).
int state_rows_per_block(int64_t d) {
  const int64_t R = kScanThreads / d;
  return int(R < 1 ? 1 : R > d ? d : R);
}

struct StateForwardShared {
  double* lambda;  // [c][w]  λ
  float* H;        // [R][d]  the block's rows v0 … v0 + R − 1 of the state
  float* Kend;     // [c][d]  K ⊙ e^{λ_end − λ}: each key as the tile's end sees it
  float* W;        // [c][d]  (delta rules)
  float* U;        // [c][R]  the block's columns of Y (delta rules) or V, then of U
  LINA_HD StateForwardShared(SharedCarve& m, int64_t c, int64_t d, int64_t w, int64_t R, bool delta)
      : lambda(m.take<double>(c * w)), H(m.take<float>(R * d)), Kend(m.take<float>(c * d)),
        W(m.take<float>(delta ? c * d : 0)), U(m.take<float>(c * R)) {}
};

// The pass over the tiles of one (batch, head), rows v0 … v0 + R − 1 of the
// state (grid (⌈d / R⌉, B·H)): the state entering each tile (saved, or read
// back from the chunk's saved state in the backward), F3 and F5. values is
// Y (delta rules) or V; U [B, T, H, d] receives the block's columns of U
// (delta rules); tile_states [B, H, tiles, d, d], chunk_states, final_state:
// each written when not null.
template <DecayKind kDecay, bool kDelta>
__global__ void __launch_bounds__(kScanThreads)
    scan_state_forward_kernel(ScanShape s, ScanTiling z, int rows_per_block, const float* k,
                              const float* log_alpha, const float* values, const float* W, const float* initial_state,
                              const float* saved_chunk_states, float* U, float* tile_states,
                              float* chunk_states, float* final_state) {
  const int d = int(s.d), w = decay_width<kDecay>(d), v0 = blockIdx.x * rows_per_block;
  const int R = rows_per_block < d - v0 ? rows_per_block : d - v0;  // this block's state rows
  const int64_t bh = blockIdx.y, dd = int64_t(d) * d, own = v0 * d;  // own: its first entry in a [d, d] state
  LINA_DYNAMIC_SHARED(double, scan_shared);
  SharedCarve carve{reinterpret_cast<char*>(scan_shared)};
  const StateForwardShared t(carve, z.rows, d, w, rows_per_block, kDelta);

  for (int e = threadIdx.x; e < R * d; e += blockDim.x) t.H[e] = initial_state ? initial_state[bh * dd + own + e] : 0.0f;
  for (int64_t n = 0; n < z.tiles; ++n) {
    const Tile at = tile_of(z, bh, n);
    const int c = at.rows;
    const int64_t chunk_state = (bh * z.chunks + z.chunk_of(n)) * dd + own;
    __syncthreads();  // the last tile's F5 is done with the shared tiles
    // The state entering the tile: read back, or saved.
    for (int e = threadIdx.x; e < R * d; e += blockDim.x) {
      if (saved_chunk_states && z.starts_chunk(n)) t.H[e] = saved_chunk_states[chunk_state + e];
      if (tile_states) tile_states[(bh * z.tiles + n) * dd + own + e] = t.H[e];
      if (chunk_states && z.starts_chunk(n)) chunk_states[chunk_state + e] = t.H[e];
    }
    load_log_alpha<kDecay>(t.lambda, s, log_alpha, at);
    __syncthreads();
    const TileDecay<kDecay> decay{t.lambda, w, c - 1};
    for (int e = threadIdx.x; e < c * d; e += blockDim.x) {
      const int r = e / d, j = e % d;
      t.Kend[e] = k[at.token(r) * d + j] * decay.to_end(r, j);
      if (kDelta) t.W[e] = W[at.token(r) * d + j];
    }
    load_rows(t.U, values, at, d, v0, R);
    __syncthreads();
    if constexpr (kDelta) {
      // F3  U = Y − W Hᵀ, the block's columns   [c][R]
      for (int e = threadIdx.x; e < c * R; e += blockDim.x) {
        const int r = e / R, v = e % R;
        float WH = 0.0f;
        for (int j = 0; j < d; ++j) WH += t.W[r * d + j] * t.H[v * d + j];
        t.U[e] -= WH;
      }
      __syncthreads();
      store_rows(U, t.U, at, d, v0, R);
    }
    // F5  H' = H diag(e^{λ_end}) + Uᵀ Kend, the block's rows   [R][d]
    for (int e = threadIdx.x; e < R * d; e += blockDim.x) {
      const int v = e / d, j = e % d;
      float UK = 0.0f;
      for (int r = 0; r < c; ++r) UK += t.U[r * R + v] * t.Kend[r * d + j];
      t.H[e] = t.H[e] * decay.from_start(c - 1, j) + UK;
    }
  }
  if (final_state)  // each thread its own entries of H, as F5 left them
    for (int e = threadIdx.x; e < R * d; e += blockDim.x) final_state[bh * dd + own + e] = t.H[e];
}

// Rows padded to d + 1 (padded_row): P's product reads K down its columns,
// F4 reads H down its columns (a lane per state row v).
struct OutputShared {
  double* lambda;  // [c][w]      λ
  float* Q;        // [c][d + 1]  the tile's queries, then Q ⊙ e^λ
  float* K;        // [c][d + 1]
  float* U;        // [c][d + 1]  the write vectors as rows (V without the delta correction)
  float* H;        // [d][d + 1]  the state entering the tile
  float* P;        // [c][c]      the weights of the tile's own writes
  LINA_HD OutputShared(SharedCarve& m, int64_t c, int64_t d, int64_t w)
      : lambda(m.take<double>(c * w)), Q(m.take<float>(c * padded_row(d))), K(m.take<float>(c * padded_row(d))),
        U(m.take<float>(c * padded_row(d))), H(m.take<float>(d * padded_row(d))), P(m.take<float>(c * c)) {}
};

// F4  O = (Q ⊙ e^λ) Hᵀ + P U into o [B, T, H, d], the shared tiles padded.
// A thread takes one column v of O and the rows r = g, g + G, … (G =
// blockDim / d row groups), kRegisterRows at a time in registers: each
// H_vj and U_iv is read once for all of them, and the lanes of a warp (one v
// each, the same rows) read Q_rj and P_ri at one address (a broadcast) and
// H down a column of the padded tile (32 banks). Each element sums over j,
// then i, in order: the bits of one thread per element.
__device__ void output_rows(const OutputShared& t, const Tile& at, int c, int d, float* o) {
  const int ld = padded_row(d);
  const int groups = d < int(blockDim.x) ? int(blockDim.x) / d : 1;
  for (int e = threadIdx.x; e < groups * d; e += blockDim.x) {
    const int v = e % d, g = e / d;
    for (int r0 = g; r0 < c; r0 += groups * kRegisterRows) {
      float QH[kRegisterRows], PU[kRegisterRows];
      for (int n = 0; n < kRegisterRows; ++n) QH[n] = PU[n] = 0.0f;
      for (int j = 0; j < d; ++j) {
        const float H_vj = t.H[v * ld + j];
        for (int n = 0; n < kRegisterRows; ++n) {
          const int r = r0 + n * groups;
          if (r < c) QH[n] += t.Q[r * ld + j] * H_vj;
        }
      }
      const int last = r0 + (kRegisterRows - 1) * groups < c - 1 ? r0 + (kRegisterRows - 1) * groups : c - 1;
      for (int i = 0; i <= last; ++i) {  // P is 0 above the diagonal, but each row stops at r, as one thread would
        const float U_iv = t.U[i * ld + v];
        for (int n = 0; n < kRegisterRows; ++n) {
          const int r = r0 + n * groups;
          if (r < c && i <= r) PU[n] += t.P[r * c + i] * U_iv;
        }
      }
      for (int n = 0; n < kRegisterRows; ++n) {
        const int r = r0 + n * groups;
        if (r < c) o[at.token(r) * d + v] = QH[n] + PU[n];
      }
    }
  }
}

// F4 of one tile; grid (tiles, B·H). o [B, T, H, d].
template <DecayKind kDecay>
__global__ void __launch_bounds__(kScanThreads)
    scan_output_kernel(ScanShape s, ScanTiling z, const float* q, const float* k, const float* log_alpha,
                       const float* U, const float* tile_states, float* o) {
  const int d = int(s.d), w = decay_width<kDecay>(d);
  const int64_t bh = blockIdx.y, n = blockIdx.x, dd = int64_t(d) * d;
  const Tile at = tile_of(z, bh, n);
  const int c = at.rows;
  LINA_DYNAMIC_SHARED(double, scan_shared);
  SharedCarve carve{reinterpret_cast<char*>(scan_shared)};
  const OutputShared t(carve, z.rows, d, w);

  load_padded_rows(t.Q, q, at, d);
  load_padded_rows(t.K, k, at, d);
  load_padded_rows(t.U, U, at, d);
  load_padded_state(t.H, tile_states + (bh * z.tiles + n) * dd, d);
  load_log_alpha<kDecay>(t.lambda, s, log_alpha, at);
  __syncthreads();
  const TileDecay<kDecay> decay{t.lambda, w, c - 1};
  // P = (Q Kᵀ) ⊙ Λ, on and below the diagonal
  decayed_products(t.P, t.Q, t.K, padded_row(d), decay, c, d, /*strict=*/false);
  __syncthreads();
  // Q ⊙ e^λ: how each token reads the entering state
  for (int e = threadIdx.x; e < c * d; e += blockDim.x) t.Q[e / d * padded_row(d) + e % d] *= decay.from_start(e / d, e % d);
  __syncthreads();
  output_rows(t, at, c, d, o);  // F4
}

// ---- backward --------------------------------------------------------------------

struct ReadoutBackwardShared {
  double* lambda;  // [c][w]      λ
  float* Q;        // [c][d + 1]  rows padded for P's product
  float* K;        // [c][d + 1]
  float* dO;       // [c][d]      the tile's output gradient
  float* P;        // [c][c]      as in F4
  LINA_HD ReadoutBackwardShared(SharedCarve& m, int64_t c, int64_t d, int64_t w)
      : lambda(m.take<double>(c * w)), Q(m.take<float>(c * padded_row(d))), K(m.take<float>(c * padded_row(d))),
        dO(m.take<float>(c * d)), P(m.take<float>(c * c)) {}
};

// B1's second term, Pᵀ dO, of one tile; grid (tiles, B·H). dU [B, T, H, d].
template <DecayKind kDecay>
__global__ void __launch_bounds__(kScanThreads)
    scan_readout_backward_kernel(ScanShape s, ScanTiling z, const float* q, const float* k,
                                 const float* log_alpha, const float* dout, float* dU) {
  const int d = int(s.d), w = decay_width<kDecay>(d);
  const Tile at = tile_of(z, blockIdx.y, blockIdx.x);
  const int c = at.rows;
  LINA_DYNAMIC_SHARED(double, scan_shared);
  SharedCarve carve{reinterpret_cast<char*>(scan_shared)};
  const ReadoutBackwardShared t(carve, z.rows, d, w);

  load_padded_rows(t.Q, q, at, d);
  load_padded_rows(t.K, k, at, d);
  load_rows(t.dO, dout, at, d);
  load_log_alpha<kDecay>(t.lambda, s, log_alpha, at);
  __syncthreads();
  const TileDecay<kDecay> decay{t.lambda, w, c - 1};
  // P = (Q Kᵀ) ⊙ Λ, on and below the diagonal
  decayed_products(t.P, t.Q, t.K, padded_row(d), decay, c, d, /*strict=*/false);
  __syncthreads();
  // Pᵀ dO: row i gathers the outputs that read token i's write   [c][d]
  for (int e = threadIdx.x; e < c * d; e += blockDim.x) {
    const int i = e / d, v = e % d;
    float PdO = 0.0f;
    for (int r = i; r < c; ++r) PdO += t.P[r * c + i] * t.dO[r * d + v];
    dU[at.token(i) * d + v] = PdO;
  }
}

struct StateBackwardShared {
  double* lambda;  // [c][w]  λ
  float* G;        // [R][d]  the block's rows of dH', the gradient of the state leaving the tile
  float* Qstart;   // [c][d]  Q ⊙ e^λ
  float* Kend;     // [c][d]  K ⊙ e^{λ_end − λ}
  float* W;        // [c][d]  (delta rules)
  float* dO;       // [c][R]  the block's columns of dO
  float* dU;       // [c][R]  the block's columns of Pᵀ dO, then of dU
  LINA_HD StateBackwardShared(SharedCarve& m, int64_t c, int64_t d, int64_t w, int64_t R, bool delta)
      : lambda(m.take<double>(c * w)), G(m.take<float>(R * d)), Qstart(m.take<float>(c * d)),
        Kend(m.take<float>(c * d)), W(m.take<float>(delta ? c * d : 0)), dO(m.take<float>(c * R)),
        dU(m.take<float>(c * R)) {}
};

// The pass over the tiles in reverse, rows v0 … v0 + R − 1 of the state
// gradient (grid (⌈d / R⌉, B·H)): B1 and B2. dU [B, T, H, d] holds Pᵀ dO and
// receives dU; tile_grads [B, H, tiles, d, d] receives dH' of each tile;
// dinitial_state = dS_0.
template <DecayKind kDecay, bool kDelta>
__global__ void __launch_bounds__(kScanThreads)
    scan_state_backward_kernel(ScanShape s, ScanTiling z, int rows_per_block, const float* q,
                               const float* k, const float* log_alpha, const float* dout, const float* W,
                               const float* dfinal_state, float* dU, float* tile_grads, float* dinitial_state) {
  const int d = int(s.d), w = decay_width<kDecay>(d), v0 = blockIdx.x * rows_per_block;
  const int R = rows_per_block < d - v0 ? rows_per_block : d - v0;
  const int64_t bh = blockIdx.y, dd = int64_t(d) * d, own = v0 * d;
  LINA_DYNAMIC_SHARED(double, scan_shared);
  SharedCarve carve{reinterpret_cast<char*>(scan_shared)};
  const StateBackwardShared t(carve, z.rows, d, w, rows_per_block, kDelta);

  for (int e = threadIdx.x; e < R * d; e += blockDim.x)
    t.G[e] = dfinal_state ? dfinal_state[bh * dd + own + e] : 0.0f;
  for (int64_t n = z.tiles - 1; n >= 0; --n) {
    const Tile at = tile_of(z, bh, n);
    const int c = at.rows;
    __syncthreads();  // the last tile's B2 is done with the shared tiles
    for (int e = threadIdx.x; e < R * d; e += blockDim.x)
      tile_grads[(bh * z.tiles + n) * dd + own + e] = t.G[e];
    load_log_alpha<kDecay>(t.lambda, s, log_alpha, at);
    __syncthreads();
    const TileDecay<kDecay> decay{t.lambda, w, c - 1};
    for (int e = threadIdx.x; e < c * d; e += blockDim.x) {
      const int r = e / d, j = e % d;
      t.Qstart[e] = q[at.token(r) * d + j] * decay.from_start(r, j);
      t.Kend[e] = k[at.token(r) * d + j] * decay.to_end(r, j);
      if (kDelta) t.W[e] = W[at.token(r) * d + j];
    }
    load_rows(t.dO, dout, at, d, v0, R);
    load_rows(t.dU, dU, at, d, v0, R);
    __syncthreads();
    // B1  dU = Kend dH'ᵀ + Pᵀ dO, the block's columns   [c][R]
    for (int e = threadIdx.x; e < c * R; e += blockDim.x) {
      const int r = e / R, v = e % R;
      float KG = 0.0f;
      for (int j = 0; j < d; ++j) KG += t.Kend[r * d + j] * t.G[v * d + j];
      t.dU[e] += KG;
    }
    __syncthreads();
    store_rows(dU, t.dU, at, d, v0, R);
    // B2  dH = dH' diag(e^{λ_end}) + dOᵀ (Q ⊙ e^λ) − dUᵀ W (the last: delta rules),
    //     the block's rows   [R][d]
    for (int e = threadIdx.x; e < R * d; e += blockDim.x) {
      const int v = e / d, j = e % d;
      float dOQ = 0.0f, dUW = 0.0f;
      for (int r = 0; r < c; ++r) dOQ += t.dO[r * R + v] * t.Qstart[r * d + j];
      if (kDelta)
        for (int r = 0; r < c; ++r) dUW += t.dU[r * R + v] * t.W[r * d + j];
      t.G[e] = t.G[e] * decay.from_start(c - 1, j) + dOQ - dUW;
    }
  }
  for (int e = threadIdx.x; e < R * d; e += blockDim.x) dinitial_state[bh * dd + own + e] = t.G[e];
}

struct DeltaBackwardShared {
  double* lambda;  // [c][w]  λ
  float* K;        // [c][d]
  float* Y;        // [c][d]
  float* W;        // [c][d]
  float* dBV;      // [c][d]  dU, then dBV
  float* dBK;      // [c][d]  dW, then dBK
  float* E;        // [c][c]  (K Kᵀ) ⊙ Λ below the diagonal, as in F1
  float* dA;       // [c][c]  dA, then dE ⊙ Λ
  float* H;        // [d][d]  the state entering the tile
  float* beta;     // [c]
  LINA_HD DeltaBackwardShared(SharedCarve& m, int64_t c, int64_t d, int64_t w)
      : lambda(m.take<double>(c * w)), K(m.take<float>(c * d)), Y(m.take<float>(c * d)),
        W(m.take<float>(c * d)), dBV(m.take<float>(c * d)), dBK(m.take<float>(c * d)),
        E(m.take<float>(c * c)), dA(m.take<float>(c * c)), H(m.take<float>(d * d)), beta(m.take<float>(c)) {}
};

// The phases of scan_delta_backward_kernel: block-wide loops over the tile
// in shared memory; the kernel syncs between them.

// B5  dW = −dU H, dU in t.dBV, dW into t.dBK   [c][d]
__device__ inline void delta_backward_dW(const DeltaBackwardShared& t, int c, int d) {
  for (int e = threadIdx.x; e < c * d; e += blockDim.x) {
    const int r = e / d, j = e % d;
    float dUH = 0.0f;
    for (int l = 0; l < d; ++l) dUH += t.dBV[r * d + l] * t.H[l * d + j];
    t.dBK[e] = -dUH;
  }
}

// B6  (I + A)ᵀ [dBV | dBK] = [dU | dW], in place, by back substitution up
//     the rows, one of the 2d columns per thread (A = diag(β) E)
__device__ inline void delta_backward_solve(const DeltaBackwardShared& t, int c, int d) {
  for (int col = threadIdx.x; col < 2 * d; col += blockDim.x) {
    float* X = col < d ? t.dBV : t.dBK;
    const int j = col % d;
    for (int r = c - 2; r >= 0; --r) {
      float x = X[r * d + j];
      for (int i = r + 1; i < c; ++i) x -= t.beta[i] * t.E[i * c + r] * X[i * d + j];
      X[r * d + j] = x;
    }
  }
}

// B7  dV = diag(β) dBV into dv [B, T, H, d];  dA = −strictly_lower(dBV Yᵀ + dBK Wᵀ) into t.dA
__device__ inline void delta_backward_dv_dA(const DeltaBackwardShared& t, const Tile& at, int c, int d,
                                            float* dv) {
  for (int e = threadIdx.x; e < c * d; e += blockDim.x)
    dv[at.token(e / d) * d + e % d] = t.beta[e / d] * t.dBV[e];
  for (int e = threadIdx.x; e < c * c; e += blockDim.x) {
    const int r = e / c, i = e % c;
    float dBYW = 0.0f;
    if (i < r)
      for (int j = 0; j < d; ++j)
        dBYW += t.dBV[r * d + j] * t.Y[i * d + j] + t.dBK[r * d + j] * t.W[i * d + j];
    t.dA[e] = -dBYW;
  }
}

// B8  dβ_r = dBV_r·v_r + dBK_r·(k_r ⊙ e^{λ_r}) + Σ_i dA_ri E_ri, into dbeta [B, T, H]
template <DecayKind kDecay>
__device__ void delta_backward_dbeta(const DeltaBackwardShared& t, const TileDecay<kDecay>& decay, const Tile& at,
                                     const float* v, int c, int d, float* dbeta) {
  for (int r = threadIdx.x; r < c; r += blockDim.x) {
    float dbeta_r = 0.0f;
    for (int j = 0; j < d; ++j)
      dbeta_r += t.dBV[r * d + j] * v[at.token(r) * d + j] +
                 t.dBK[r * d + j] * t.K[r * d + j] * decay.from_start(r, j);
    for (int i = 0; i < r; ++i) dbeta_r += t.dA[r * c + i] * t.E[r * c + i];
    dbeta[at.token(r)] = dbeta_r;
  }
}

// B7  dK = diag(β)(dBK ⊙ e^λ) + (dE ⊙ Λ) K + (dE ⊙ Λ)ᵀ K, with dE ⊙ Λ in
//     t.dA, into dk [B, T, H, d]; and dlambda_extra (when not null)
template <DecayKind kDecay>
__device__ void delta_backward_dk(const DeltaBackwardShared& t, const TileDecay<kDecay>& decay, const Tile& at,
                                  int c, int d, float* dk, float* dlambda_extra) {
  for (int e = threadIdx.x; e < c * d; e += blockDim.x) {
    const int r = e / d, j = e % d;
    const float from_W = t.beta[r] * decay.from_start(r, j) * t.dBK[e];
    float as_row = 0.0f, as_column = 0.0f;  // E_ri (i < r) and E_ir (i > r)
    for (int i = 0; i < r; ++i) as_row += t.dA[r * c + i] * t.K[i * d + j] * decay.channel_between(i, r, j);
    for (int i = r + 1; i < c; ++i)
      as_column += t.dA[i * c + r] * t.K[i * d + j] * decay.channel_between(r, i, j);
    dk[at.token(r) * d + j] = from_W + as_row + as_column;
    if (dlambda_extra) dlambda_extra[at.token(r) * d + j] = t.K[e] * (from_W + as_row - as_column);
  }
}

// B5–B8 of one tile (delta rules); grid (tiles, B·H). Writes dv, dbeta, and
// dk = the delta terms (scan_gradients_kernel adds the rest); dlambda_extra
// [B, T, H, d] (with a learned decay) = k ⊙ (the delta terms of dk that
// carry e^{+λ_r} − the one that carries e^{−λ_r}), what they add to dλ_r.
template <DecayKind kDecay>
__global__ void __launch_bounds__(kScanThreads)
    scan_delta_backward_kernel(ScanShape s, ScanTiling z, const float* k, const float* v,
                               const float* beta, const float* log_alpha, const float* tile_states,
                               const float* dU, const float* Y, const float* W, float* dv,
                               float* dbeta, float* dk, float* dlambda_extra) {
  const int d = int(s.d), w = decay_width<kDecay>(d);
  const int64_t bh = blockIdx.y, n = blockIdx.x, dd = int64_t(d) * d;
  const Tile at = tile_of(z, bh, n);
  const int c = at.rows;
  LINA_DYNAMIC_SHARED(double, scan_shared);
  SharedCarve carve{reinterpret_cast<char*>(scan_shared)};
  const DeltaBackwardShared t(carve, z.rows, d, w);

  load_rows(t.K, k, at, d);
  load_rows(t.Y, Y, at, d);
  load_rows(t.W, W, at, d);
  load_rows(t.dBV, dU, at, d);
  load_block(t.H, tile_states + (bh * z.tiles + n) * dd, dd);
  for (int r = threadIdx.x; r < c; r += blockDim.x) t.beta[r] = beta[at.token(r)];
  load_log_alpha<kDecay>(t.lambda, s, log_alpha, at);
  __syncthreads();
  const TileDecay<kDecay> decay{t.lambda, w, c - 1};
  decayed_products(t.E, t.K, t.K, d, decay, c, d, /*strict=*/true);  // E of F1 (K unpadded here)
  delta_backward_dW(t, c, d);                                      // B5
  __syncthreads();
  delta_backward_solve(t, c, d);                                   // B6
  __syncthreads();
  delta_backward_dv_dA(t, at, c, d, dv);                           // B7: dV, dA
  __syncthreads();
  delta_backward_dbeta(t, decay, at, v, c, d, dbeta);              // B8
  __syncthreads();
  // dE ⊙ Λ = diag(β) dA ⊙ Λ, in place (a decay per channel stays in the sums of dK)
  for (int e = threadIdx.x; e < c * c; e += blockDim.x)
    if (e % c < e / c) t.dA[e] *= t.beta[e / c] * decay.head_between(e % c, e / c);
  __syncthreads();
  delta_backward_dk(t, decay, at, c, d, dk, dlambda_extra);           // B7: dK
}

struct GradientShared {
  double* lambda;     // [c][w]  λ
  float* Q;           // [c][d]
  float* K;           // [c][d]
  float* U;           // [c][d]  the write vectors (V without the delta correction)
  float* dO;          // [c][d]
  float* H;           // [d][d]  the state entering the tile
  float* G;           // [d][d]  dH', the gradient of the state leaving it
  float* dP_decayed;  // [c][c]  dP ⊙ Λ, dP = dO Uᵀ on and below the diagonal
  float* dlambda;     // [c][d]  dλ, then its sums from the tile end   (learned decay)
  float* k_dk_end;    // [c][d]  k ⊙ the part of dk through Kend      (learned decay)
  LINA_HD GradientShared(SharedCarve& m, int64_t c, int64_t d, int64_t w, bool learned)
      : lambda(m.take<double>(c * w)), Q(m.take<float>(c * d)), K(m.take<float>(c * d)),
        U(m.take<float>(c * d)), dO(m.take<float>(c * d)), H(m.take<float>(d * d)), G(m.take<float>(d * d)),
        dP_decayed(m.take<float>(c * c)), dlambda(m.take<float>(learned ? c * d : 0)),
        k_dk_end(m.take<float>(learned ? c * d : 0)) {}
};

// The phases of scan_gradients_kernel: block-wide loops over the tile in
// shared memory; the kernel syncs between them.

// B3  t.dP_decayed = dP ⊙ Λ, dP = lower_incl(dO Uᵀ)   [c][c]
template <DecayKind kDecay>
__device__ void gradients_dP_decayed(const GradientShared& t, const TileDecay<kDecay>& decay, int c, int d) {
  for (int e = threadIdx.x; e < c * c; e += blockDim.x) {
    const int r = e / c, i = e % c;
    float dOU = 0.0f;
    if (i <= r)
      for (int v = 0; v < d; ++v) dOU += t.dO[r * d + v] * t.U[i * d + v];
    t.dP_decayed[e] = i <= r ? dOU * decay.head_between(i, r) : 0.0f;
  }
}

// B3  dq_r = (dO H)_r ⊙ e^{λ_r} + Σ_{i ≤ r} (dP ⊙ Λ)_ri k_i ⊙ e^{λ_r − λ_i}
//     dk_r = (U dH')_r ⊙ e^{λ_end − λ_r} + Σ_{i ≥ r} (dP ⊙ Λ)_ir q_i ⊙ e^{λ_i − λ_r}
// into dq, dk [B, T, H, d] (dk added to the delta terms there with kDelta);
// with a learned decay, dλ's terms into t.dlambda and t.k_dk_end.
template <DecayKind kDecay, bool kDelta>
__device__ void gradients_dq_dk(const GradientShared& t, const TileDecay<kDecay>& decay, const Tile& at, int c,
                                int d, const float* dlambda_extra, float* dq, float* dk) {
  constexpr bool kLearned = learned_decay<kDecay>();
  for (int e = threadIdx.x; e < c * d; e += blockDim.x) {
    const int r = e / d, j = e % d;
    float dOH = 0.0f, UG = 0.0f, dq_read = 0.0f, dk_read = 0.0f;
    for (int l = 0; l < d; ++l) {
      dOH += t.dO[r * d + l] * t.H[l * d + j];
      UG += t.U[r * d + l] * t.G[l * d + j];
    }
    for (int i = 0; i < r; ++i) dq_read += t.dP_decayed[r * c + i] * t.K[i * d + j] * decay.channel_between(i, r, j);
    for (int i = r + 1; i < c; ++i)
      dk_read += t.dP_decayed[i * c + r] * t.Q[i * d + j] * decay.channel_between(r, i, j);
    const float diagonal = t.dP_decayed[r * c + r];            // dP_rr: token r's read of its own write
    const float dq_decayed = decay.from_start(r, j) * dOH + dq_read;
    const float dk_end = decay.to_end(r, j) * UG;        // through Kend, into the state leaving the tile
    const int64_t at_rj = at.token(r) * d + j;
    dq[at_rj] = dq_decayed + diagonal * t.K[e];
    dk[at_rj] = (kDelta ? dk[at_rj] : 0.0f) + dk_end + dk_read + diagonal * t.Q[e];
    if (kLearned) {
      // The terms without decay cancel in dλ exactly, so they are left out
      // rather than left to float32: the diagonal of P, and the last token's
      // write into the leaving state (e^{λ_end − λ_end} = 1).
      const float dk_decayed_end = r == c - 1 ? 0.0f : dk_end;
      t.dlambda[e] = t.Q[e] * dq_decayed - t.K[e] * (dk_decayed_end + dk_read) +
                  (dlambda_extra ? dlambda_extra[at_rj] : 0.0f);
      t.k_dk_end[e] = t.K[e] * dk_decayed_end;
    }
  }
}

// B4–B5 by the whole block: the last row's terms added to t.dlambda's last
// row, then t.dlambda summed from the tile end, in place   [c][d]. Overwrites
// t.G and t.k_dk_end, which nothing reads after.
template <DecayKind kDecay>
__device__ void dlambda_sums_from_end(const GradientShared& t, const TileDecay<kDecay>& decay, int c, int d) {
  for (int e = threadIdx.x; e < d * d; e += blockDim.x) t.G[e] *= t.H[e];
  sums_down_columns(t.G, d, d, false);         // last row: Σ_v (dH' ⊙ H)_vj
  sums_down_columns(t.k_dk_end, c, d, false);  // last row: Σ_i k_ij (dk through Kend)_ij
  __syncthreads();
  for (int j = threadIdx.x; j < d; j += blockDim.x)
    t.dlambda[(c - 1) * d + j] += t.k_dk_end[(c - 1) * d + j] + decay.from_start(c - 1, j) * t.G[(d - 1) * d + j];
  sums_down_columns(t.dlambda, c, d, /*from_end=*/true);
}

// d log α from t.dlambda: dlog_alpha [B, T, H, d] for a decay per channel,
// [B, T, H] (summed over the channels) for one per head.
template <DecayKind kDecay>
__device__ void store_dlog_alpha(const GradientShared& t, const Tile& at, int c, int d, float* dlog_alpha) {
  if (kDecay == DecayKind::LearnedPerChannel) {
    store_rows(dlog_alpha, t.dlambda, at, d);
  } else {
    for (int r = threadIdx.x; r < c; r += blockDim.x) {
      float per_head = 0.0f;
      for (int j = 0; j < d; ++j) per_head += t.dlambda[r * d + j];
      dlog_alpha[at.token(r)] = per_head;
    }
  }
}

// B3 of one tile, then the learned decay's gradient; grid (tiles, B·H). dq is
// written; dk too, or added to the delta terms already there (kDelta).
// With a learned decay (recurrence-gated.md §3 B4–B5): every term of dq_r
// carries e^{+λ_r} and every term of dk_r here e^{−λ_r}, so
//   dλ_r = q_r ⊙ dq_r − k_r ⊙ dk_r + dlambda_extra_r
//          (+ on the last row: e^{λ_end} ⊙ Σ_v (dH' ⊙ H)_v
//                              + Σ_i k_i ⊙ (the part of dk_i through Kend)),
//          each sum without the terms that carry no decay, which cancel
//   d log α_s = Σ_{r ≥ s} dλ_r   (summed over the channels for a decay per head)
template <DecayKind kDecay, bool kDelta>
__global__ void __launch_bounds__(kScanThreads)
    scan_gradients_kernel(ScanShape s, ScanTiling z, const float* q, const float* k, const float* log_alpha,
                          const float* dout, const float* U, const float* tile_states,
                          const float* tile_grads, const float* dlambda_extra, float* dq, float* dk,
                          float* dlog_alpha) {
  constexpr bool kLearned = learned_decay<kDecay>();
  const int d = int(s.d), w = decay_width<kDecay>(d);
  const int64_t bh = blockIdx.y, n = blockIdx.x, dd = int64_t(d) * d, state = (bh * z.tiles + n) * dd;
  const Tile at = tile_of(z, bh, n);
  const int c = at.rows;
  LINA_DYNAMIC_SHARED(double, scan_shared);
  SharedCarve carve{reinterpret_cast<char*>(scan_shared)};
  const GradientShared t(carve, z.rows, d, w, kLearned);

  load_rows(t.Q, q, at, d);
  load_rows(t.K, k, at, d);
  load_rows(t.U, U, at, d);
  load_rows(t.dO, dout, at, d);
  load_block(t.H, tile_states + state, dd);
  load_block(t.G, tile_grads + state, dd);
  load_log_alpha<kDecay>(t.lambda, s, log_alpha, at);
  __syncthreads();
  const TileDecay<kDecay> decay{t.lambda, w, c - 1};
  gradients_dP_decayed(t, decay, c, d);                                        // B3: dP ⊙ Λ
  __syncthreads();
  gradients_dq_dk<kDecay, kDelta>(t, decay, at, c, d, dlambda_extra, dq, dk);  // B3: dq, dk
  if (!kLearned) return;
  __syncthreads();
  dlambda_sums_from_end(t, decay, c, d);                                       // B4–B5
  __syncthreads();
  store_dlog_alpha<kDecay>(t, at, c, d, dlog_alpha);
}

// ---- the entry points ----------------------------------------------------------------

// How the launchers name themselves in an error.
constexpr const char* kName = "cuda::scan_chunked";

// The sizes every launch of one call shares.
struct ScanLaunch {
  ScanShape s;
  ScanTiling z;
  int w;     // decay_width
  int rows;  // state_rows_per_block
  cudaStream_t stream;
  int64_t activation() const { return s.B * s.T * s.H * s.d; }       // floats of [B, T, H, d]
  int64_t tile_states() const { return s.B * s.H * z.tiles * s.d * s.d; }  // of [B, H, tiles, d, d]
  dim3 per_tile() const { return dim3(unsigned(z.tiles), unsigned(s.B * s.H)); }
  dim3 per_row_group() const { return dim3(unsigned((s.d + rows - 1) / rows), unsigned(s.B * s.H)); }
};

template <DecayKind kDecay> ScanLaunch scan_launch(const ScanShape& s, int64_t C) {
  check(s.B * s.H <= 65535,
        "cuda::scan_chunked: at most 65535 (batch, head) pairs, got " + std::to_string(s.B * s.H));
  return ScanLaunch{s, make_tiling(s, C), decay_width<kDecay>(int(s.d)), state_rows_per_block(s.d),
                    context().stream};
}

// F1–F2 → Y, W.
template <DecayKind kDecay>
void launch_solve(const ScanLaunch& launch, const ScanInputs<float>& in, float* Y, float* W) {
  auto* solve = scan_solve_kernel<kDecay>;
  const ScanTiling& z = launch.z;
  const size_t bytes = with_shared_memory(
      solve, shared_bytes<SolveShared>(z.rows, launch.s.d, launch.w), kName);
  LINA_LAUNCH(solve, launch.per_tile(), kScanThreads, bytes, launch.stream)(launch.s, z, in.k, in.v, in.beta,
                                                                             in.log_alpha, Y, W);
  LINA_CHECK_LAUNCH("cuda::scan_chunked (F1–F2)");
}

// The pass over the tiles (see scan_state_forward_kernel).
template <DecayKind kDecay, bool kDelta>
void launch_state_forward(const ScanLaunch& launch, const ScanInputs<float>& in, const float* Y,
                          const float* W, const float* initial_state, const float* saved_chunk_states, float* U,
                          float* tile_states, float* chunk_states, float* final_state) {
  auto* pass = scan_state_forward_kernel<kDecay, kDelta>;
  const size_t bytes = with_shared_memory(
      pass, shared_bytes<StateForwardShared>(launch.z.rows, launch.s.d, launch.w, launch.rows, kDelta),
      kName);
  LINA_LAUNCH(pass, launch.per_row_group(), kScanThreads, bytes, launch.stream)(
      launch.s, launch.z, launch.rows, in.k, in.log_alpha, kDelta ? Y : in.v, W, initial_state, saved_chunk_states, U,
      tile_states, chunk_states, final_state);
  LINA_CHECK_LAUNCH("cuda::scan_chunked (F3, F5: the pass over the tiles)");
}

template <DecayKind kDecay, bool kDelta>
void chunked_forward(const ScanShape& s, int64_t C, const ScanInputs<float>& in, const float* initial_state,
                     float* o, float* final_state, const ScanChunkedSaved<float>& saved) {
  const ScanLaunch launch = scan_launch<kDecay>(s, C);
  // The state entering each tile: the chunk_states themselves when a chunk is one tile.
  const bool tiles_are_chunks = launch.z.parts == 1 && saved.chunk_states;
  Scratch<float> tile_states(tiles_are_chunks ? 0 : launch.tile_states());  // [B, H, tiles, d, d]
  float* entering = tiles_are_chunks ? saved.chunk_states : tile_states.get();  // [B, H, tiles, d, d]
  // Y, W of F2 and U of F3 (delta rules)   [B, T, H, d] each: kept for the
  // backward (saved.U not null), else scratch
  const int64_t act = kDelta && !saved.U ? launch.activation() : 0;
  Scratch<float> Y_scratch(act), W_scratch(act), U_scratch(act);
  float* Y = saved.U ? saved.Y : Y_scratch.get();
  float* W = saved.U ? saved.W : W_scratch.get();
  float* U = saved.U ? saved.U : U_scratch.get();

  if constexpr (kDelta) launch_solve<kDecay>(launch, in, Y, W);
  launch_state_forward<kDecay, kDelta>(launch, in, Y, W, initial_state, nullptr, U, entering,
                                       tiles_are_chunks ? nullptr : saved.chunk_states, final_state);
  auto* output = scan_output_kernel<kDecay>;
  const size_t bytes = with_shared_memory(
      output, shared_bytes<OutputShared>(launch.z.rows, s.d, launch.w), kName);
  LINA_LAUNCH(output, launch.per_tile(), kScanThreads, bytes, launch.stream)(s, launch.z, in.q, in.k, in.log_alpha,
                                                                    kDelta ? U : in.v, entering, o);
  LINA_CHECK_LAUNCH("cuda::scan_chunked_forward (F4)");
}

template <DecayKind kDecay, bool kDelta>
void chunked_backward(const ScanShape& s, int64_t C, const ScanInputs<float>& in,
                      const ScanChunkedSaved<const float>& saved, const float* dout, const float* dfinal_state,
                      const ScanInputGrads<float>& grads) {
  constexpr bool kLearned = learned_decay<kDecay>();
  const ScanLaunch launch = scan_launch<kDecay>(s, C);
  const int64_t act = launch.activation();
  // Y, W, U (delta rules) and the state entering each tile: kept by the
  // forward where a chunk is one tile (the chunk_states are then the tile
  // states); else the forward's solve and pass over the tiles again, each
  // chunk starting from its saved state.
  check(!saved.U || launch.z.parts == 1, "cuda::scan_chunked: Y, W, U kept for chunks longer than a tile");
  const bool solve_again = kDelta && !saved.U;
  Scratch<float> tile_states(launch.z.parts > 1 ? launch.tile_states() : 0);  // [B, H, tiles, d, d]
  const float* entering = launch.z.parts > 1 ? tile_states.get() : saved.chunk_states;  // [B, H, tiles, d, d]
  const int64_t again = solve_again ? act : 0;
  Scratch<float> Y_again(again), W_again(again), U_again(again);  // [B, T, H, d] each
  const float* Y = solve_again ? Y_again.get() : saved.Y;
  const float* W = solve_again ? W_again.get() : saved.W;
  const float* U = solve_again ? U_again.get() : saved.U;
  if (solve_again) launch_solve<kDecay>(launch, in, Y_again.get(), W_again.get());
  if (solve_again || launch.z.parts > 1)
    launch_state_forward<kDecay, kDelta>(launch, in, Y, W, nullptr, saved.chunk_states, U_again.get(),
                                         tile_states.get(), nullptr, nullptr);

  // dU: Pᵀ dO first, all of it after the reverse pass (dV itself without the delta correction).
  Scratch<float> dU_buffer(kDelta ? act : 0);  // [B, T, H, d]
  float* dU = kDelta ? dU_buffer.get() : grads.dv;
  auto* readout = scan_readout_backward_kernel<kDecay>;
  size_t bytes =
      with_shared_memory(readout, shared_bytes<ReadoutBackwardShared>(launch.z.rows, s.d, launch.w), kName);
  LINA_LAUNCH(readout, launch.per_tile(), kScanThreads, bytes, launch.stream)(s, launch.z, in.q, in.k, in.log_alpha,
                                                                               dout, dU);
  LINA_CHECK_LAUNCH("cuda::scan_chunked_backward (Pᵀ dO)");

  Scratch<float> tile_grads(launch.tile_states());  // dH' of each tile   [B, H, tiles, d, d]
  auto* pass = scan_state_backward_kernel<kDecay, kDelta>;
  bytes = with_shared_memory(
      pass, shared_bytes<StateBackwardShared>(launch.z.rows, s.d, launch.w, launch.rows, kDelta), kName);
  LINA_LAUNCH(pass, launch.per_row_group(), kScanThreads, bytes, launch.stream)(
      s, launch.z, launch.rows, in.q, in.k, in.log_alpha, dout, W, dfinal_state, dU, tile_grads.get(), grads.dinitial_state);
  LINA_CHECK_LAUNCH("cuda::scan_chunked_backward (B1, B2: the pass over the tiles)");

  Scratch<float> dlambda_extra(kDelta && kLearned ? act : 0);  // [B, T, H, d]
  if constexpr (kDelta) {
    auto* delta = scan_delta_backward_kernel<kDecay>;
    bytes = with_shared_memory(delta, shared_bytes<DeltaBackwardShared>(launch.z.rows, s.d, launch.w), kName);
    LINA_LAUNCH(delta, launch.per_tile(), kScanThreads, bytes, launch.stream)(
        s, launch.z, in.k, in.v, in.beta, in.log_alpha, entering, dU, Y, W, grads.dv, grads.dbeta,
        grads.dk, dlambda_extra.get());
    LINA_CHECK_LAUNCH("cuda::scan_chunked_backward (B5–B8)");
  }
  auto* gradients = scan_gradients_kernel<kDecay, kDelta>;
  bytes = with_shared_memory(
      gradients, shared_bytes<GradientShared>(launch.z.rows, s.d, launch.w, kLearned), kName);
  LINA_LAUNCH(gradients, launch.per_tile(), kScanThreads, bytes, launch.stream)(
      s, launch.z, in.q, in.k, in.log_alpha, dout, kDelta ? U : in.v, entering, tile_grads.get(),
      dlambda_extra.get(), grads.dq, grads.dk, grads.dlog_alpha);
  LINA_CHECK_LAUNCH("cuda::scan_chunked_backward (B3, B9–B10)");
}

// Calls f(DecayKind, delta) for the rule, as template arguments: the two
// properties the kernels are written over (core/kernel_args.h).
template <DecayKind kDecay, bool kDelta> struct WriteRule {
  static constexpr DecayKind decay = kDecay;
  static constexpr bool delta = kDelta;
};
template <class F> void with_write_rule(ScanRule rule, F&& f) {
  switch (rule) {
    case ScanRule::Linear: return f(WriteRule<decay_kind(ScanRule::Linear), uses_beta(ScanRule::Linear)>{});
    case ScanRule::Delta: return f(WriteRule<decay_kind(ScanRule::Delta), uses_beta(ScanRule::Delta)>{});
    case ScanRule::Gdn: return f(WriteRule<decay_kind(ScanRule::Gdn), uses_beta(ScanRule::Gdn)>{});
    case ScanRule::Retnet: return f(WriteRule<decay_kind(ScanRule::Retnet), uses_beta(ScanRule::Retnet)>{});
    case ScanRule::Mamba2: return f(WriteRule<decay_kind(ScanRule::Mamba2), uses_beta(ScanRule::Mamba2)>{});
    case ScanRule::Gla: return f(WriteRule<decay_kind(ScanRule::Gla), uses_beta(ScanRule::Gla)>{});
  }
}

}  // namespace

void scan_chunked_forward(const ScanShape& s, int64_t C, const ScanInputs<float>& in, const float* initial_state,
                          float* o, float* final_state, const ScanChunkedSaved<float>& saved) {
  with_write_rule(s.rule, [&](auto rule) {
    using Rule = decltype(rule);
    chunked_forward<Rule::decay, Rule::delta>(s, C, in, initial_state, o, final_state, saved);
  });
}

void scan_chunked_backward(const ScanShape& s, int64_t C, const ScanInputs<float>& in,
                           const ScanChunkedSaved<const float>& saved, const float* dout, const float* dfinal_state,
                           const ScanInputGrads<float>& grads) {
  with_write_rule(s.rule, [&](auto rule) {
    using Rule = decltype(rule);
    chunked_backward<Rule::decay, Rule::delta>(s, C, in, saved, dout, dfinal_state, grads);
  });
}

}  // namespace lina::cuda
