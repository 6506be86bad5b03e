// Sums over many rows that do not depend on the thread count: the rows are
// cut into fixed chunks of kRowsPerChunk, each chunk sums into its own
// partial row on one thread, and reduce_partials then adds the partials in
// chunk order. The weight gradients of rms_norm and the conv
// (norm_conv_rope.cpp) and the gates' bias gradient (elementwise.cpp) use it.
#pragma once
#include <cstdint>
#include <vector>

#include "backend_cpu/parallel.h"

namespace lina::cpu {

constexpr int64_t kRowsPerChunk = 128;

inline int64_t chunk_count(int64_t rows) { return (rows + kRowsPerChunk - 1) / kRowsPerChunk; }

// out[e] = Σ_chunk partial[chunk, e] (chunk order fixed), for e < width;
// out += that where `add`.
template <class T>
void reduce_partials(const std::vector<T>& partial, int64_t chunks, int64_t width, T* out,
                     bool add = false) {
  LINA_PARALLEL_FOR_IF(chunks * width > kParallelMin)
  for (int64_t e = 0; e < width; ++e) {
    T s = T(0);
    for (int64_t ch = 0; ch < chunks; ++ch) s += partial[size_t(ch * width + e)];
    out[e] = add ? out[e] + s : s;  // out += s, or out = s
  }
}

}  // namespace lina::cpu
