// CUDA causal attention (float32), tiled in the manner of FlashAttention:
// each block keeps a tile of rows in shared memory and streams the other
// side's rows through it one tile at a time. Shapes and maths: core/kernel_args.h
// (AttentionShape) and backend_cpu/attention.cpp. The one-thread-per-row
// kernels of attention_reference.cu are the simple reference these are
// tested against (tests/cuda/test_attention.cpp); head sizes over
// kMaxTiledHeadSize go to them.
//
// Layouts: q, out, dout, dq [B, Tq, H, d]; k, v, dk, dv [B, Tk, Hkv, d];
// lse [B, H, Tq]; dscores [B, H, Tq, Tk]. Query i sees keys j ≤ i + (Tk − Tq);
// query head h reads KV head h / (H / Hkv). A query tile is Bq = 32 rows, a
// key tile Bk = 32 rows (one warp's lanes: lane c takes key c of a tile);
// kAttentionThreads threads per block, 4 warps.
//
// The probabilities are never stored: the forward keeps each query row's
// log-sum-exp, lse_i = log Σ_j e^{S_ij} (S = scale · q kᵀ), and the backward
// rebuilds P_ij = e^{S_ij − lse_i} from q and k where it needs it. That
// trades the T×T matrix's trips through global memory (written by the
// forward, read three times by the backward) for one more q·k per pair.
//
// Forward, attention_forward_kernel: grid (B·H, ⌈Tq / Bq⌉), a block per
// (batch, head, query tile). Shared: Q [Bq][d] (the block's queries), K, V
// [Bk][d + 1] (one key tile), P [Bq][Bk + 1] (its scores, then weights), O
// [Bq][d] (the output so far) and per row m, l, rescale [Bq]. Over the key
// tiles the block's last row sees, an online softmax, a warp per row:
//   S = scale · Q Kᵀ
//   m' = max(m, max_j S_j),  rescale = e^{m − m'},  P = e^{S − m'}
//   l = l · rescale + Σ_j P_j,  O = O · rescale + (P ⊙ M) V,  m = m'
// (M the dropout factors, all 1 without dropout), then out = O / l and
// lse = m + log l.
//
// Backward, attention_backward_query_kernel: the same grid. Shared: Q, dO
// [Bq][d], one tile of K and V [Bk][d + 1], P and dS [Bq][Bk + 1], dQ
// [Bq][d], D and lse [Bq]. First sweep over the key tiles: P again, dP = M ⊙
// dO Vᵀ (parked in dscores) and D = Σ_j P_j dP_j (a warp per row); second
// sweep: P again, dscores = scale · P ⊙ (dP − D) and dQ += dscores K.
// attention_backward_key_kernel: grid (B·Hkv, ⌈Tk / Bk⌉), a block per
// (batch, KV head, key tile). Shared: K [Bk][d + 1] (the block's keys), Q, dO
// [Bq][d] (one query tile of one head), P [Bq][Bk + 1] (P ⊙ M, rebuilt from
// lse), dS [Bq][Bk + 1] (dscores), dK, dV [Bk][d], lse [Bq]. Over the heads
// of the group in order, then the query tiles that see the block's keys:
// dK += dSᵀ Q, dV += Pᵀ dO.
//
// Shared rows are padded to an odd stride where threads walk down a column:
// the key tiles (d + 1: the 32 threads that each take one key of a score row
// read 32 different banks) and P, dS (Bk + 1: a thread per key reading down
// the query rows). Each output element is summed by one thread in a fixed
// order (no atomics, the same bits every run). The backward's sums run in
// the reference's order except D, which a warp adds as a butterfly per key
// tile; P, dv and the rebuilt probabilities equal its bits wherever the
// compiler fuses the same multiply-adds in both (g++ with -ffp-contract=off),
// and dscores, dq, dk differ by D's rounding.
// Shared memory per block at d = 32: forward 21 KB, query backward 29 KB,
// key backward 29 KB; at d = 128: 70, 91 and 91 KB (over 48 KB a kernel
// asks for it: with_shared_memory).
#include <cmath>

#include "backend_cuda/cuda_context.h"
#include "backend_cuda/cuda_kernels.h"
#include "backend_cuda/scratch.h"
#include "backend_cuda/shared_carve.cuh"
#include "backend_cuda/warp_reduce.cuh"
#include "core/kernel_args.h"

namespace lina::cuda {

namespace {

constexpr int kQueryTile = 32;          // Bq: query rows per tile
constexpr int kKeyTile = 32;            // Bk: key rows per tile
constexpr int kAttentionThreads = 128;  // threads of every attention block: 4 warps
static_assert(kKeyTile == kWarp, "a warp per query row: lane c takes key c of the tile");
constexpr int kWeightStride = kKeyTile + 1;  // P and dS rows in shared memory, padded
// The largest head size the tiled kernels take: each backward kernel keeps
// about 2·Bq·d + 2·Bk·(d + 1) + 2·Bq·(Bk + 1) + Bk·d floats, 91 KB at d =
// 128 (a block may have 227 KB).
constexpr int64_t kMaxTiledHeadSize = 128;
constexpr int kMaxGridY = 65535;

// The rows of one head in x [B, T, heads, d]: row t starts at row(t).
struct HeadRows {
  int64_t first, stride;
  LINA_HD int64_t row(int64_t t) const { return first + t * stride; }
};
LINA_HD HeadRows head_rows(int64_t T, int64_t heads, int64_t d, int64_t b, int64_t h) {
  return HeadRows{(b * T * heads + h) * d, heads * d};
}

LINA_HD int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
// Keys query i sees: 0 … visible_keys − 1.
LINA_HD int64_t visible_keys(const AttentionShape& s, int64_t i) { return i + (s.Tk - s.Tq) + 1; }
// The first query that sees key j.
LINA_HD int64_t first_query_seeing(const AttentionShape& s, int64_t j) {
  const int64_t i = j - (s.Tk - s.Tq);
  return i > 0 ? i : 0;
}

// A block of the forward and of the dq backward: batch b, query head h,
// query rows i0 … i0 + rows − 1.
struct QueryBlock {
  int64_t bh, i0, keys;  // keys: those the block's last row sees
  int rows;
  HeadRows q, kv;        // its rows of q / out / dout / dq, and of k / v
  int64_t Tq, Tk;
  // Row r's place in lse [B, H, Tq], and where its scores start in dscores [B, H, Tq, Tk].
  LINA_HD int64_t lse_row(int r) const { return bh * Tq + i0 + r; }
  LINA_HD int64_t probs_row(int r) const { return lse_row(r) * Tk; }
};
__device__ QueryBlock query_block(const AttentionShape& s) {
  QueryBlock qb;
  qb.bh = blockIdx.x;
  qb.i0 = int64_t(blockIdx.y) * kQueryTile;
  qb.rows = int(min64(kQueryTile, s.Tq - qb.i0));
  qb.keys = visible_keys(s, qb.i0 + qb.rows - 1);
  const int64_t b = qb.bh / s.H, h = qb.bh % s.H;
  qb.q = head_rows(s.Tq, s.H, s.d, b, h);
  qb.kv = head_rows(s.Tk, s.Hkv, s.d, b, h / (s.H / s.Hkv));
  qb.Tq = s.Tq;
  qb.Tk = s.Tk;
  return qb;
}
// Keys of row r in the key tile from j0 that it sees: 0 … seen − 1 of cols.
LINA_HD int seen_in_tile(const AttentionShape& s, const QueryBlock& qb, int r, int64_t j0, int cols) {
  const int64_t seen = visible_keys(s, qb.i0 + r) - j0;
  return int(seen < 0 ? 0 : seen > cols ? cols : seen);
}

// ---- block-wide loops over shared tiles (every thread calls them; the caller syncs) ----

// tile [rows][stride] = rows first … first + rows − 1 of one head of x,
// each row's d values first.
__device__ void load_tile(float* tile, const float* x, HeadRows at, int64_t first, int rows, int d,
                          int stride) {
  for (int e = threadIdx.x; e < rows * d; e += blockDim.x)
    tile[e / d * stride + e % d] = x[at.row(first + e / d) + e % d];
}
__device__ void load_tile(float* tile, const float* x, HeadRows at, int64_t first, int rows, int d) {
  load_tile(tile, x, at, first, rows, d, d);
}
__device__ void store_tile(float* x, const float* tile, HeadRows at, int64_t first, int rows, int d) {
  for (int e = threadIdx.x; e < rows * d; e += blockDim.x) x[at.row(first + e / d) + e % d] = tile[e];
}
__device__ void fill(float* x, int n, float value) {
  for (int e = threadIdx.x; e < n; e += blockDim.x) x[e] = value;
}
// The row stride of the key tiles in shared memory: odd, so the threads of
// a warp that read one entry of each of 32 key rows (a tile's scores) hit
// 32 different banks.
LINA_HD int padded(int64_t d) { return int(d) + 1; }
// a · b over d entries, in index order (the reference's order).
__device__ float dot(const float* a, const float* b, int d) {
  float acc = 0.0f;
  for (int c = 0; c < d; ++c) acc += a[c] * b[c];
  return acc;
}
// P_rc = e^{S_rc − lse_r}, S_rc = scale · q_r · k_c: a probability rebuilt
// from the row's log-sum-exp (the reference's expression, attention_device.h).
__device__ float rebuilt_prob(const AttentionShape& s, const float* q_row, const float* k_row, float row_lse) {
  return expf(float(s.scale) * dot(q_row, k_row, int(s.d)) - row_lse);
}
// Every dscores entry of the block's rows past the keys the row sees: 0.
__device__ void zero_hidden(float* x, const AttentionShape& s, const QueryBlock& qb) {
  for (int64_t e = threadIdx.x; e < qb.rows * s.Tk; e += blockDim.x) {
    const int r = int(e / s.Tk);
    const int64_t j = e % s.Tk;
    if (j >= visible_keys(s, qb.i0 + r)) x[qb.probs_row(r) + j] = 0.0f;
  }
}

// ---- forward ----------------------------------------------------------------------

struct ForwardShared {
  float* Q;        // [Bq][d]      the block's queries
  float* K;        // [Bk][d + 1]  one tile of keys (rows padded)
  float* V;        // [Bk][d + 1]  and their values
  float* P;        // [Bq][Bk + 1] the tile's scores, then e^{S − m} ⊙ M
  float* O;        // [Bq][d]      Σ_j e^{S_j − m} M_j v_j over the tiles so far
  float* m;        // [Bq]         the row's largest score so far
  float* l;        // [Bq]         Σ_j e^{S_j − m} so far (undropped)
  float* rescale;  // [Bq]         e^{m_before − m} of the last tile
  LINA_HD ForwardShared(SharedCarve& c, int64_t d)
      : Q(c.take<float>(kQueryTile * d)), K(c.take<float>(kKeyTile * padded(d))),
        V(c.take<float>(kKeyTile * padded(d))), P(c.take<float>(kQueryTile * kWeightStride)),
        O(c.take<float>(kQueryTile * d)), m(c.take<float>(kQueryTile)), l(c.take<float>(kQueryTile)),
        rescale(c.take<float>(kQueryTile)) {}
};

// P = scale · Q Kᵀ for the pairs that see each other (−∞ for the others).
__device__ void tile_scores(const ForwardShared& t, const AttentionShape& s, const QueryBlock& qb, int64_t j0,
                            int cols) {
  const int d = int(s.d);
  for (int e = threadIdx.x; e < qb.rows * cols; e += blockDim.x) {
    const int r = e / cols, c = e % cols;
    const bool seen = c < seen_in_tile(s, qb, r, j0, cols);
    t.P[r * kWeightStride + c] = seen ? float(s.scale) * dot(t.Q + r * d, t.K + c * padded(d), d) : -INFINITY;
  }
}

// The online softmax over one key tile, a warp per row, lane c on key c:
// the new running max m (a butterfly max), the weights P = e^{S − m} (times
// the dropout factors), and the running sum l (a butterfly sum), both P and
// l rescaled to the new max. Lane 0 keeps the row's m, l, rescale.
__device__ void online_softmax_step(const ForwardShared& t, const AttentionShape& s, const QueryBlock& qb,
                                    int64_t j0, int cols) {
  const int warp = threadIdx.x / kWarp, c = lane();
  for (int r = warp; r < qb.rows; r += blockDim.x / kWarp) {  // the same rows for every lane of the warp
    float* P = t.P + r * kWeightStride;
    const bool seen = c < seen_in_tile(s, qb, r, j0, cols);
    const float score = seen ? P[c] : -INFINITY;
    const float m_before = t.m[r];
    const float tile_max = warp_max(score);  // every lane has read m_before: the shuffles wait for all
    const float m = tile_max > m_before ? tile_max : m_before;
    // equal maxima (a tile the row does not see) keep the scale at 1: no −∞ − −∞
    const float rescale = m == m_before ? 1.0f : expf(m_before - m);
    const float p = seen ? expf(score - m) : 0.0f;
    const float sum = warp_sum(p);
    if (c < cols) P[c] = p * dropout_factor<float>(s.dropout, qb.probs_row(r) + j0 + c);
    if (c == 0) {
      t.l[r] = t.l[r] * rescale + sum;
      t.m[r] = m;
      t.rescale[r] = rescale;
    }
  }
}

// O = O · rescale + P V, one element of O per thread (always the same thread).
__device__ void accumulate_output(const ForwardShared& t, int rows, int cols, int d) {
  for (int e = threadIdx.x; e < rows * d; e += blockDim.x) {
    const int r = e / d, x = e % d;
    float acc = t.O[e] * t.rescale[r];
    for (int c = 0; c < cols; ++c) acc += t.P[r * kWeightStride + c] * t.V[c * padded(d) + x];
    t.O[e] = acc;
  }
}

// A block per (batch, head, query tile): grid (B·H, ⌈Tq / Bq⌉).
__global__ void __launch_bounds__(kAttentionThreads)
    attention_forward_kernel(AttentionShape s, const float* q, const float* k, const float* v, float* lse,
                             float* out) {
  const int d = int(s.d);
  const QueryBlock qb = query_block(s);
  LINA_DYNAMIC_SHARED(float, attention_shared);
  SharedCarve carve{reinterpret_cast<char*>(attention_shared)};
  const ForwardShared t(carve, d);

  load_tile(t.Q, q, qb.q, qb.i0, qb.rows, d);
  fill(t.O, qb.rows * d, 0.0f);
  fill(t.m, qb.rows, -INFINITY);
  fill(t.l, qb.rows, 0.0f);
  for (int64_t j0 = 0; j0 < qb.keys; j0 += kKeyTile) {
    const int cols = int(min64(kKeyTile, qb.keys - j0));
    __syncthreads();  // the last tile's products are done with K, V and P
    load_tile(t.K, k, qb.kv, j0, cols, d, padded(d));
    load_tile(t.V, v, qb.kv, j0, cols, d, padded(d));
    __syncthreads();
    tile_scores(t, s, qb, j0, cols);
    __syncthreads();
    online_softmax_step(t, s, qb, j0, cols);
    __syncthreads();
    accumulate_output(t, qb.rows, cols, d);
  }
  __syncthreads();  // the final m and l
  for (int e = threadIdx.x; e < qb.rows * d; e += blockDim.x)
    out[qb.q.row(qb.i0 + e / d) + e % d] = t.O[e] / t.l[e / d];
  for (int r = threadIdx.x; r < qb.rows; r += blockDim.x) lse[qb.lse_row(r)] = t.m[r] + logf(t.l[r]);
}

// ---- backward: dscores and dq -----------------------------------------------------

struct QueryBackwardShared {
  float* Q;    // [Bq][d]       the block's queries
  float* dO;   // [Bq][d]       their output gradients
  float* K;    // [Bk][d + 1]   one tile of keys, rows padded
  float* V;    // [Bk][d + 1]   their values (first sweep)
  float* P;    // [Bq][Bk + 1]  the tile's probabilities, rebuilt from lse (first sweep)
  float* dS;   // [Bq][Bk + 1]  the tile's dP, then its dscores
  float* dQ;   // [Bq][d]       Σ_j dscores_j k_j over the tiles so far
  float* D;    // [Bq]          Σ_j P_j dP_j over the tiles so far
  float* lse;  // [Bq]          the rows' log-sum-exp
  LINA_HD QueryBackwardShared(SharedCarve& c, int64_t d)
      : Q(c.take<float>(kQueryTile * d)), dO(c.take<float>(kQueryTile * d)),
        K(c.take<float>(kKeyTile * padded(d))), V(c.take<float>(kKeyTile * padded(d))),
        P(c.take<float>(kQueryTile * kWeightStride)), dS(c.take<float>(kQueryTile * kWeightStride)),
        dQ(c.take<float>(kQueryTile * d)), D(c.take<float>(kQueryTile)), lse(c.take<float>(kQueryTile)) {}
};

// P = e^{S − lse} and dP = M ⊙ dO Vᵀ of the pairs that see each other (0
// for the others) into P and dS; dP also parked in dscores.
__device__ void tile_probs_dprobs(const QueryBackwardShared& t, const AttentionShape& s, const QueryBlock& qb,
                                  int64_t j0, int cols, float* dscores) {
  const int d = int(s.d);
  for (int e = threadIdx.x; e < qb.rows * cols; e += blockDim.x) {
    const int r = e / cols, c = e % cols;
    float p = 0.0f, dP = 0.0f;
    if (c < seen_in_tile(s, qb, r, j0, cols)) {
      const int64_t at = qb.probs_row(r) + j0 + c;
      p = rebuilt_prob(s, t.Q + r * d, t.K + c * padded(d), t.lse[r]);
      dP = dropout_factor<float>(s.dropout, at) * dot(t.dO + r * d, t.V + c * padded(d), d);
      dscores[at] = dP;
    }
    t.P[r * kWeightStride + c] = p;
    t.dS[r * kWeightStride + c] = dP;
  }
}

// D += Σ_j P_j dP_j over the tile, a warp per row, lane c on key c (a
// butterfly sum: the unseen keys add zeros). Lane 0 keeps D.
__device__ void add_to_D(const QueryBackwardShared& t, const QueryBlock& qb, int cols) {
  const int warp = threadIdx.x / kWarp, c = lane();
  for (int r = warp; r < qb.rows; r += blockDim.x / kWarp) {
    const float PdP = c < cols ? t.P[r * kWeightStride + c] * t.dS[r * kWeightStride + c] : 0.0f;
    const float tile_sum = warp_sum(PdP);
    if (c == 0) t.D[r] += tile_sum;
  }
}

// dscores = scale · P ⊙ (dP − D) of the pairs that see each other, P rebuilt
// again, into dS and dscores (dP read back from dscores, where the same
// thread parked it).
__device__ void tile_dscores(const QueryBackwardShared& t, const AttentionShape& s, const QueryBlock& qb,
                             int64_t j0, int cols, float* dscores) {
  const int d = int(s.d);
  for (int e = threadIdx.x; e < qb.rows * cols; e += blockDim.x) {
    const int r = e / cols, c = e % cols;
    if (c >= seen_in_tile(s, qb, r, j0, cols)) continue;
    const int64_t at = qb.probs_row(r) + j0 + c;
    const float p = rebuilt_prob(s, t.Q + r * d, t.K + c * padded(d), t.lse[r]);
    const float ds = float(s.scale) * p * (dscores[at] - t.D[r]);
    t.dS[r * kWeightStride + c] = ds;
    dscores[at] = ds;
  }
}

// dQ += dS K over the keys each row sees, one element of dQ per thread.
__device__ void accumulate_dq(const QueryBackwardShared& t, const AttentionShape& s, const QueryBlock& qb,
                              int64_t j0, int cols) {
  const int d = int(s.d);
  for (int e = threadIdx.x; e < qb.rows * d; e += blockDim.x) {
    const int r = e / d, x = e % d, seen = seen_in_tile(s, qb, r, j0, cols);
    float acc = t.dQ[e];
    for (int c = 0; c < seen; ++c) acc += t.dS[r * kWeightStride + c] * t.K[c * padded(d) + x];
    t.dQ[e] = acc;
  }
}

// A block per (batch, head, query tile): grid (B·H, ⌈Tq / Bq⌉). Two sweeps
// over the key tiles: D needs every dP of the row before any dscores.
__global__ void __launch_bounds__(kAttentionThreads)
    attention_backward_query_kernel(AttentionShape s, const float* q, const float* k, const float* v,
                                    const float* lse, const float* dout, float* dscores, float* dq) {
  const int d = int(s.d);
  const QueryBlock qb = query_block(s);
  LINA_DYNAMIC_SHARED(float, attention_shared);
  SharedCarve carve{reinterpret_cast<char*>(attention_shared)};
  const QueryBackwardShared t(carve, d);

  load_tile(t.Q, q, qb.q, qb.i0, qb.rows, d);
  load_tile(t.dO, dout, qb.q, qb.i0, qb.rows, d);
  for (int r = threadIdx.x; r < qb.rows; r += blockDim.x) t.lse[r] = lse[qb.lse_row(r)];
  fill(t.dQ, qb.rows * d, 0.0f);
  fill(t.D, qb.rows, 0.0f);
  for (int64_t j0 = 0; j0 < qb.keys; j0 += kKeyTile) {  // P, dP, D
    const int cols = int(min64(kKeyTile, qb.keys - j0));
    __syncthreads();  // the last tile is done with K, V, P and dS
    load_tile(t.K, k, qb.kv, j0, cols, d, padded(d));
    load_tile(t.V, v, qb.kv, j0, cols, d, padded(d));
    __syncthreads();
    tile_probs_dprobs(t, s, qb, j0, cols, dscores);
    __syncthreads();
    add_to_D(t, qb, cols);
  }
  for (int64_t j0 = 0; j0 < qb.keys; j0 += kKeyTile) {  // dscores, dq
    const int cols = int(min64(kKeyTile, qb.keys - j0));
    __syncthreads();  // D is complete; the last tile is done with K and dS
    load_tile(t.K, k, qb.kv, j0, cols, d, padded(d));
    __syncthreads();
    tile_dscores(t, s, qb, j0, cols, dscores);
    __syncthreads();
    accumulate_dq(t, s, qb, j0, cols);
  }
  store_tile(dq, t.dQ, qb.q, qb.i0, qb.rows, d);  // each thread its own elements of dQ
  zero_hidden(dscores, s, qb);
}

// ---- backward: dk and dv ----------------------------------------------------------

// A block of the dk / dv backward: batch b, KV head kvh, keys j0 … j0 + cols − 1.
struct KeyBlock {
  int64_t b, kvh, j0, first_query;  // first_query: the first that sees key j0
  int cols;
  HeadRows kv;
};
__device__ KeyBlock key_block(const AttentionShape& s) {
  KeyBlock kb;
  kb.b = blockIdx.x / s.Hkv;
  kb.kvh = blockIdx.x % s.Hkv;
  kb.j0 = int64_t(blockIdx.y) * kKeyTile;
  kb.cols = int(min64(kKeyTile, s.Tk - kb.j0));
  kb.first_query = first_query_seeing(s, kb.j0);
  kb.kv = head_rows(s.Tk, s.Hkv, s.d, kb.b, kb.kvh);
  return kb;
}

struct KeyBackwardShared {
  float* K;    // [Bk][d + 1]   the block's keys, rows padded
  float* Q;    // [Bq][d]       one tile of queries of one head of the group
  float* dO;   // [Bq][d]       their output gradients
  float* P;    // [Bq][Bk + 1]  P ⊙ M of those queries and the block's keys (0 where unseen)
  float* dS;   // [Bq][Bk + 1]  dscores likewise
  float* dK;   // [Bk][d]       Σ dscores_ij q_i so far
  float* dV;   // [Bk][d]       Σ P_ij M_ij dout_i so far
  float* lse;  // [Bq]          the query rows' log-sum-exp
  LINA_HD KeyBackwardShared(SharedCarve& c, int64_t d)
      : K(c.take<float>(kKeyTile * padded(d))), Q(c.take<float>(kQueryTile * d)),
        dO(c.take<float>(kQueryTile * d)), P(c.take<float>(kQueryTile * kWeightStride)),
        dS(c.take<float>(kQueryTile * kWeightStride)), dK(c.take<float>(kKeyTile * d)),
        dV(c.take<float>(kKeyTile * d)), lse(c.take<float>(kQueryTile)) {}
};

// P (rebuilt from lse, times M) and dS of query rows i0 … i0 + rows − 1 of
// head h and the block's keys.
__device__ void load_weights(const KeyBackwardShared& t, const AttentionShape& s, const KeyBlock& kb,
                             int64_t h, int64_t i0, int rows, const float* dscores) {
  const int d = int(s.d);
  for (int e = threadIdx.x; e < rows * kb.cols; e += blockDim.x) {
    const int r = e / kb.cols, c = e % kb.cols;
    const int64_t i = i0 + r, j = kb.j0 + c, at = ((kb.b * s.H + h) * s.Tq + i) * s.Tk + j;
    const bool seen = j < visible_keys(s, i);
    t.P[r * kWeightStride + c] =
        seen ? rebuilt_prob(s, t.Q + r * d, t.K + c * padded(d), t.lse[r]) * dropout_factor<float>(s.dropout, at)
             : 0.0f;
    t.dS[r * kWeightStride + c] = seen ? dscores[at] : 0.0f;
  }
}

// dK += dSᵀ Q, dV += Pᵀ dO over the tile's rows in order, one element of
// each per thread. Unseen pairs add exact zeros: the sums keep the
// reference's bits.
__device__ void accumulate_dk_dv(const KeyBackwardShared& t, int rows, int cols, int d) {
  for (int e = threadIdx.x; e < cols * d; e += blockDim.x) {
    const int c = e / d, x = e % d;
    float dk = t.dK[e], dv = t.dV[e];
    for (int r = 0; r < rows; ++r) {
      dk += t.dS[r * kWeightStride + c] * t.Q[r * d + x];
      dv += t.P[r * kWeightStride + c] * t.dO[r * d + x];
    }
    t.dK[e] = dk;
    t.dV[e] = dv;
  }
}

// A block per (batch, KV head, key tile): grid (B·Hkv, ⌈Tk / Bk⌉). The
// heads of the group in order, each over the query tiles that see the
// block's keys: a fixed order, no atomics.
__global__ void __launch_bounds__(kAttentionThreads)
    attention_backward_key_kernel(AttentionShape s, const float* q, const float* k, const float* lse,
                                  const float* dout, const float* dscores, float* dk, float* dv) {
  const int d = int(s.d);
  const int64_t group = s.H / s.Hkv;
  const KeyBlock kb = key_block(s);
  LINA_DYNAMIC_SHARED(float, attention_shared);
  SharedCarve carve{reinterpret_cast<char*>(attention_shared)};
  const KeyBackwardShared t(carve, d);

  load_tile(t.K, k, kb.kv, kb.j0, kb.cols, d, padded(d));
  fill(t.dK, kb.cols * d, 0.0f);
  fill(t.dV, kb.cols * d, 0.0f);
  for (int64_t g = 0; g < group; ++g) {
    const int64_t h = kb.kvh * group + g;
    const HeadRows qh = head_rows(s.Tq, s.H, s.d, kb.b, h);
    for (int64_t i0 = kb.first_query; i0 < s.Tq; i0 += kQueryTile) {
      const int rows = int(min64(kQueryTile, s.Tq - i0));
      __syncthreads();  // the last tile's products are done with Q, dO, P and dS
      load_tile(t.Q, q, qh, i0, rows, d);
      load_tile(t.dO, dout, qh, i0, rows, d);
      for (int r = threadIdx.x; r < rows; r += blockDim.x) t.lse[r] = lse[(kb.b * s.H + h) * s.Tq + i0 + r];
      __syncthreads();
      load_weights(t, s, kb, h, i0, rows, dscores);
      __syncthreads();
      accumulate_dk_dv(t, rows, kb.cols, d);
    }
  }
  store_tile(dk, t.dK, kb.kv, kb.j0, kb.cols, d);  // each thread its own elements
  store_tile(dv, t.dV, kb.kv, kb.j0, kb.cols, d);
}

// ---- launches ---------------------------------------------------------------------

int64_t tiles(int64_t n, int tile) { return (n + tile - 1) / tile; }

// Shapes the tiles hold: a head of at most kMaxTiledHeadSize, and a grid
// whose y (tiles per head) stays within CUDA's 65535.
bool tiled(const AttentionShape& s) {
  return s.d <= kMaxTiledHeadSize && tiles(s.Tq, kQueryTile) <= kMaxGridY && tiles(s.Tk, kKeyTile) <= kMaxGridY;
}

}  // namespace

void attention_forward(const AttentionShape& s, const float* q, const float* k, const float* v,
                       float* lse, float* out) {
  if (!tiled(s)) return attention_forward_reference(s, q, k, v, lse, out);
  if (s.B * s.H * s.Tq == 0) return;
  const dim3 grid(unsigned(s.B * s.H), unsigned(tiles(s.Tq, kQueryTile)));
  const size_t bytes = with_shared_memory(attention_forward_kernel, shared_bytes<ForwardShared>(s.d),
                                          "cuda::attention_forward");
  LINA_LAUNCH(attention_forward_kernel, grid, kAttentionThreads, bytes, context().stream)(s, q, k, v, lse,
                                                                                         out);
  LINA_CHECK_LAUNCH("cuda::attention_forward");
}

void attention_backward(const AttentionShape& s, const float* q, const float* k, const float* v,
                        const float* lse, const float* dout, float* dscores, float* dq,
                        float* dk, float* dv) {
  if (!tiled(s)) return attention_backward_reference(s, q, k, v, lse, dout, dscores, dq, dk, dv);
  cudaStream_t stream = context().stream;
  if (s.B * s.H * s.Tq > 0) {
    const dim3 grid(unsigned(s.B * s.H), unsigned(tiles(s.Tq, kQueryTile)));
    const size_t bytes = with_shared_memory(attention_backward_query_kernel,
                                            shared_bytes<QueryBackwardShared>(s.d), "cuda::attention_backward");
    LINA_LAUNCH(attention_backward_query_kernel, grid, kAttentionThreads, bytes, stream)(s, q, k, v, lse,
                                                                                        dout, dscores, dq);
    LINA_CHECK_LAUNCH("cuda::attention_backward (dscores, dq)");
  }
  if (s.B * s.Hkv * s.Tk > 0) {  // after the first kernel on the same stream: reads its dscores
    const dim3 grid(unsigned(s.B * s.Hkv), unsigned(tiles(s.Tk, kKeyTile)));
    const size_t bytes = with_shared_memory(attention_backward_key_kernel,
                                            shared_bytes<KeyBackwardShared>(s.d), "cuda::attention_backward");
    LINA_LAUNCH(attention_backward_key_kernel, grid, kAttentionThreads, bytes, stream)(s, q, k, lse,
                                                                                      dout, dscores, dk, dv);
    LINA_CHECK_LAUNCH("cuda::attention_backward (dk, dv)");
  }
}

}  // namespace lina::cuda
