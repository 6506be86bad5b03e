// The per-thread work of the CUDA embedding kernels (softmax_loss.cu): one
// thread per output element, as LINA_HD functions beside the CPU backend's
// formulas. The row kernels (softmax, log-softmax, cross-entropy, argmax)
// are written in softmax_loss.cu itself, a warp per row.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/elementwise_math.h"  // LINA_HD

namespace lina::cuda {

// The keys row r may see: all N, or with causal (rows form [Tq, N] matrices)
// query i = r mod Tq sees keys j ≤ i + (N − Tq).
LINA_HD int64_t visible_keys(int64_t r, int64_t N, int64_t Tq, bool causal) {
  if (!causal) return N;
  int64_t last = r % Tq + (N - Tq);
  return last + 1 < N ? last + 1 : N;
}

// ---- ids out of range ----------------------------------------------------------------
// A kernel that meets an id outside [0, limit) does not read with it: it
// writes NaN where the row would go and records the id in the context's
// index_error word (one 64-bit store, so a record is never torn; when
// several are bad, one of them). memory.cu reads the word at the next
// synchronisation and throws the CPU backend's message.
enum IndexKind : uint64_t { kEmbeddingId = 1, kCrossEntropyTarget = 2 };
LINA_HD uint64_t pack_index_error(IndexKind kind, int32_t value, int64_t limit) {
  return (uint64_t(kind) << 56) | ((uint64_t(limit) & 0xffffffu) << 32) | uint64_t(uint32_t(value));
}
LINA_HD bool index_ok(int32_t id, int64_t limit) { return id >= 0 && id < limit; }

// ---- embedding --------------------------------------------------------------------------

// Element i = (n, c) of out [N, C]: weight[ids[n], c], weight [V, C].
LINA_HD void embedding_forward_thread(int64_t i, const float* weight, const int32_t* ids,
                                      float* out, int64_t V, int64_t C, uint64_t* index_error) {
  int64_t n = i / C, c = i % C;
  const int32_t id = ids[n];
  if (!index_ok(id, V)) {
    *index_error = pack_index_error(kEmbeddingId, id, V);
    out[i] = NAN;
    return;
  }
  out[i] = weight[int64_t(id) * C + c];
}

// Element i = (v, c) of dweight [V, C]: Σ dy[n, c] over the n with ids[n] = v,
// added in order of n. Each output has one owner thread, so repeated ids
// need no atomics and the sum is the same on every run (0 where no id is v).
LINA_HD void embedding_backward_thread(int64_t i, const float* dy, const int32_t* ids,
                                       float* dweight, int64_t N, int64_t C, bool accumulate) {
  int64_t v = i / C, c = i % C;
  float s = 0.0f;
  for (int64_t n = 0; n < N; ++n)
    if (ids[n] == v) s += dy[n * C + c];
  dweight[i] = accumulate ? dweight[i] + s : s;  // dweight += s with accumulate
}

}  // namespace lina::cuda
