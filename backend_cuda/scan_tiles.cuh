// The pieces the chunked scan's kernels (scan_chunked.cu) share: how a
// head's tokens are cut into tiles, a tile's rows in shared memory, and the
// decay inside a tile. Included by scan_chunked.cu only.
//
// Layouts: q, k, v, o and every per-token buffer [B, T, H, d]; beta, log_alpha
// [B, T, H] (log_alpha [B, T, H, d] for a decay per key channel); states [.., d, d]
// value × key, row-major.
#pragma once
#include <cmath>
#include <cstdint>

#include "backend_cuda/shared_carve.cuh"
#include "core/kernel_args.h"

namespace lina::cuda {

constexpr int kScanThreads = 256;   // threads of every chunked-scan block
constexpr int kMaxTileRows = int(kScanTileTokens);  // the most tokens one tile holds in shared memory
// Rows of a product one thread keeps in registers (its register tile): the
// loops over them have this constant trip count, so nvcc unrolls them and
// the accumulators stay in registers.
constexpr int kRegisterRows = 8;

// The row stride of a tile [rows][d] that threads read down a column (lanes
// on 32 different rows, one column): d + 1, odd, so that the 32 lanes hit 32
// different banks. At d = 32 an unpadded tile puts every row's column j in
// bank j: up to 32 lanes on one bank, a 32-way conflict.
LINA_HD int padded_row(int64_t d) { return int(d) + 1; }

// How the chunked kernels cut a head's T tokens. The kernel list's unit is
// the chunk of C tokens (one saved state each, chunk_states [B, H, chunks,
// d, d]); the kernels' unit is the tile, at most 64 tokens, whose rows fit in
// shared memory. A chunk of C ≤ 64 tokens is one tile; a longer one is cut
// into `parts` tiles of `rows` tokens (its last one shorter), so the maths
// is unchanged and the saved states stay one per chunk.
struct ScanTiling {
  int64_t T = 0, H = 0;
  int64_t chunk = 0;   // C
  int64_t chunks = 0;  // ⌈T / C⌉
  int64_t parts = 0;   // tiles per chunk: ⌈min(C, T) / 64⌉
  int64_t rows = 0;    // tokens of a full tile: ⌈min(C, T) / parts⌉ ≤ 64
  int64_t tiles = 0;   // tiles per head (the last chunk may have fewer than `parts`)

  LINA_HD int64_t chunk_of(int64_t n) const { return n / parts; }
  LINA_HD bool starts_chunk(int64_t n) const { return n % parts == 0; }
  LINA_HD int64_t first_token(int64_t n) const { return chunk_of(n) * chunk + (n % parts) * rows; }
  LINA_HD int rows_of(int64_t n) const {  // ≥ 1 for every n < tiles
    const int64_t chunk_end = (chunk_of(n) + 1) * chunk < T ? (chunk_of(n) + 1) * chunk : T;
    const int64_t left = chunk_end - first_token(n);
    return int(left < rows ? left : rows);
  }
};

inline ScanTiling make_tiling(const ScanShape& s, int64_t C) {
  ScanTiling z;
  z.T = s.T, z.H = s.H, z.chunk = C;
  z.chunks = (s.T + C - 1) / C;
  const int64_t longest = C < s.T ? C : s.T;  // the longest chunk that occurs
  z.parts = (longest + kMaxTileRows - 1) / kMaxTileRows;
  z.rows = (longest + z.parts - 1) / z.parts;
  const int64_t last_chunk = s.T - (z.chunks - 1) * C;
  z.tiles = (z.chunks - 1) * z.parts + (last_chunk + z.rows - 1) / z.rows;
  return z;
}

// One tile of one (batch, head): where its tokens sit in [B, T, H].
struct Tile {
  int64_t first;   // index of its first token in [B, T, H]
  int64_t stride;  // H: from one token of the head to the next
  int rows;        // c ≤ 64 tokens
  LINA_HD int64_t token(int r) const { return first + r * stride; }
};

// Tile n of (batch, head) pair bh = b·H + h.
LINA_HD Tile tile_of(const ScanTiling& z, int64_t bh, int64_t n) {
  return Tile{((bh / z.H) * z.T + z.first_token(n)) * z.H + bh % z.H, z.H, z.rows_of(n)};
}

// ---- a tile's rows in shared memory (block-wide loops; the caller syncs) ----

// tile [c][width] = columns col0 … col0 + width − 1 of the tile's rows of x [B, T, H, d].
__device__ inline void load_rows(float* tile, const float* x, const Tile& at, int d, int col0 = 0,
                                 int width = -1) {
  if (width < 0) width = d;
  for (int e = threadIdx.x; e < at.rows * width; e += blockDim.x)
    tile[e] = x[at.token(e / width) * d + col0 + e % width];
}

// tile [c][d + 1] = the tile's rows of x [B, T, H, d], each row padded (padded_row).
__device__ inline void load_padded_rows(float* tile, const float* x, const Tile& at, int d) {
  for (int e = threadIdx.x; e < at.rows * d; e += blockDim.x)
    tile[e / d * padded_row(d) + e % d] = x[at.token(e / d) * d + e % d];
}

// dst [count] = src [count]: a tile's d×d state from global memory.
__device__ inline void load_block(float* dst, const float* src, int64_t count) {
  for (int64_t e = threadIdx.x; e < count; e += blockDim.x) dst[e] = src[e];
}

// dst [d][d + 1] = src [d][d], a state from global memory, each row padded.
__device__ inline void load_padded_state(float* dst, const float* src, int d) {
  for (int e = threadIdx.x; e < d * d; e += blockDim.x) dst[e / d * padded_row(d) + e % d] = src[e];
}

// The tile's rows of x [B, T, H, d] (columns col0 …) = tile [c][width].
__device__ inline void store_rows(float* x, const float* tile, const Tile& at, int d, int col0 = 0,
                                  int width = -1) {
  if (width < 0) width = d;
  for (int e = threadIdx.x; e < at.rows * width; e += blockDim.x)
    x[at.token(e / width) * d + col0 + e % width] = tile[e];
}

// ---- the decay inside a tile ----

// Numbers of log-decay per token: one per key channel, one per head, or none.
template <DecayKind kDecay> constexpr int decay_width(int d) {
  return kDecay == DecayKind::LearnedPerChannel ? d : kDecay == DecayKind::None ? 0 : 1;
}

// x [c][w] summed down each column in place, by the whole block (every
// thread calls it; it syncs first, so x may have been written just before):
// x_rj ← x_0j + … + x_rj, or with from_end x_rj ← x_rj + … + x_{c−1,j}. One
// thread per column would leave all but w threads idle for c steps, so each
// column is cut into segments of rows, a thread per (segment, column): each
// sums its segment in place, then adds the totals of the segments before it
// (the two passes of a blocked prefix sum). The caller syncs before reading.
template <class T> __device__ void sums_down_columns(T* x, int c, int w, bool from_end) {
  const int segments = w >= int(blockDim.x) ? 1 : int(blockDim.x) / w;  // per column
  const int length = (c + segments - 1) / segments;                    // rows of a segment
  auto at = [&](int i, int j) -> T& { return x[(from_end ? c - 1 - i : i) * w + j]; };  // i-th row walked
  __syncthreads();
  for (int e = threadIdx.x; e < segments * w; e += blockDim.x) {  // its own segment
    const int j = e % w, first = (e / w) * length, end = first + length < c ? first + length : c;
    T sum = T(0);
    for (int i = first; i < end; ++i) sum = at(i, j) = sum + at(i, j);
  }
  if (segments == 1) return;  // one segment per column: done (then segments · w ≤ blockDim.x below)
  __syncthreads();
  const int e = threadIdx.x, j = e % w, segment = e / w, first = segment * length;
  T before = T(0);  // the totals of the earlier segments: read by every thread before any adds
  if (e < segments * w)
    for (int s = 0; s < segment && s * length < c; ++s)
      before += at(((s + 1) * length < c ? (s + 1) * length : c) - 1, j);  // segment s's last row
  __syncthreads();
  if (e < segments * w)
    for (int i = first; i < first + length && i < c; ++i) at(i, j) += before;
}

// lambda [c][w] = λ_rj = log α_0j + … + log α_rj, the log-decay from the tile
// start to token r inclusive (one column for a decay per head), by the whole
// block. Summed in float64, so a difference λ_r − λ_i is as exact as the
// segment sum log α_{i+1} + … + log α_r (docs/recurrence.md §5.3) however
// large λ grows inside the tile.
template <DecayKind kDecay>
__device__ void load_log_alpha(double* lambda, const ScanShape& s, const float* log_alpha, const Tile& at) {
  const int w = decay_width<kDecay>(int(s.d));
  if (w == 0) return;
  for (int e = threadIdx.x; e < at.rows * w; e += blockDim.x)
    lambda[e] = double(scan_log_alpha(s, log_alpha, at.token(e / w), e % w));
  sums_down_columns(lambda, at.rows, w, /*from_end=*/false);
}

// The decays of a tile, read from λ in shared memory. Every exponent is a
// sum of log α ≤ 0 over the tokens between two positions in order, so every
// factor is in [0, 1] and nothing overflows (docs/recurrence-gated.md §2).
template <DecayKind kDecay> struct TileDecay {
  static constexpr bool kPerChannel = kDecay == DecayKind::LearnedPerChannel;
  static constexpr bool kPerHead = kDecay == DecayKind::FixedPerHead || kDecay == DecayKind::LearnedPerHead;
  const double* lambda;  // [c][w] shared memory
  int w;                 // decay_width
  int last;              // c − 1

  __device__ double log_at(int r, int j) const { return lambda[r * w + (kPerChannel ? j : 0)]; }
  // e^{λ_rj}: from the tile start to token r (key channel j)
  __device__ float from_start(int r, int j) const {
    if constexpr (kDecay == DecayKind::None) return 1.0f;
    else return expf(float(log_at(r, j)));
  }
  // e^{λ_end,j − λ_ij}: from token i to the tile end
  __device__ float to_end(int i, int j) const {
    if constexpr (kDecay == DecayKind::None) return 1.0f;
    else return expf(float(log_at(last, j) - log_at(i, j)));
  }
  // Λ_ri = e^{λ_r − λ_i} (i ≤ r) for a decay per head; 1 for the other kinds
  __device__ float head_between(int i, int r) const {
    if constexpr (kPerHead) return expf(float(log_at(r, 0) - log_at(i, 0)));
    else return 1.0f;
  }
  // e^{λ_rj − λ_ij} (i ≤ r) for a decay per key channel; 1 for the other kinds
  __device__ float channel_between(int i, int r, int j) const {
    if constexpr (kPerChannel) return expf(float(log_at(r, j) - log_at(i, j)));
    else return 1.0f;
  }
};

// out [c][c] = Σ_j x_rj y_ij e^{λ_rj − λ_ij} for i ≤ r (i < r when strict),
// 0 above: (X Yᵀ) ⊙ Λ with every term decayed from token i to token r.
// x, y [c][ld], ld = padded_row(d) (or d where a kernel keeps its tiles
// unpadded). The caller syncs.
//
// A thread takes one column i and the rows r = g, g + G, … (G = blockDim / c
// row groups, g its group), kRegisterRows of them at a time in registers:
// each y_ij is read once for all of them, and the lanes of a warp (one i
// each, the rows of one or two groups) read x_rj at one or two addresses
// (broadcasts) and y down a column of the padded tile (32 banks). Each entry is summed over j in
// order, as one thread per entry would: the same bits.
template <DecayKind kDecay>
__device__ void decayed_products(float* out, const float* x, const float* y, int ld,
                                 const TileDecay<kDecay>& decay, int c, int d, bool strict) {
  const int groups = int(blockDim.x) / c;  // ≥ 4: c ≤ 64
  if (int(threadIdx.x) >= groups * c) return;
  const int i = threadIdx.x % c, g = threadIdx.x / c;
  auto kept = [&](int r) { return i < r || (i == r && !strict); };  // the mask before any exp
  for (int r0 = g; r0 < c; r0 += groups * kRegisterRows) {
    float sum[kRegisterRows];
    for (int n = 0; n < kRegisterRows; ++n) sum[n] = 0.0f;
    for (int j = 0; j < d; ++j) {
      const float y_ij = y[i * ld + j];
      for (int n = 0; n < kRegisterRows; ++n) {
        const int r = r0 + n * groups;
        if (r < c && kept(r)) sum[n] += x[r * ld + j] * y_ij * decay.channel_between(i, r, j);
      }
    }
    for (int n = 0; n < kRegisterRows; ++n) {
      const int r = r0 + n * groups;
      if (r < c) out[r * c + i] = kept(r) ? sum[n] * decay.head_between(i, r) : 0.0f;
    }
  }
}

}  // namespace lina::cuda
