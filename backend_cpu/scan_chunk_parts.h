// What both chunked scans share (scan_chunked.cpp for the delta rules,
// scan_chunked_gated.cpp for the rules without the delta correction): the
// per-thread scratch buffer and the maps onto one chunk's rows.
#pragma once
#include <Eigen/Core>
#include <cassert>
#include <cstddef>

#include "backend_cpu/cpu_kernels.h"
#include "backend_cpu/eigen_maps.h"

namespace lina::cpu::scan_chunk {

// c entries of one head in a [B, T, H] tensor (stride H).
template <class T> using GateMap = Eigen::Map<Vector<T>, 0, Eigen::InnerStride<>>;
template <class T> using ConstGateMap = Eigen::Map<const Vector<T>, 0, Eigen::InnerStride<>>;

// One thread's scratch: a buffer carved into matrices of the current chunk's
// size, reset for every chunk (no allocation after construction).
template <class T>
class Scratch {
 public:
  explicit Scratch(size_t elements) : buffer_(Eigen::Index(elements)) {}
  void reset() { used_ = 0; }
  MatrixMap<T> matrix(int64_t rows, int64_t cols) {
    T* p = buffer_.data() + used_;
    used_ += size_t(rows * cols);
    assert(used_ <= size_t(buffer_.size()));
    return MatrixMap<T>(p, rows, cols);
  }
  VectorMap<T> vector(int64_t n) {
    T* p = buffer_.data() + used_;
    used_ += size_t(n);
    assert(used_ <= size_t(buffer_.size()));
    return VectorMap<T>(p, n);
  }

 private:
  // Eigen's own allocation is aligned to its widest vector, so the maps
  // carved from it start at the same alignment in every run (an unaligned
  // start changes how Eigen splits a sum, and so the rounding).
  Vector<T> buffer_;
  size_t used_ = 0;
};

// Where one chunk's rows sit in the [B, T, H, d] / [B, T, H] tensors.
struct ChunkPlace {
  int64_t c;        // rows in this chunk (C, or fewer for the last one)
  int64_t token0;   // index of its first token in [B, T, H]
  int64_t stride;   // H: from one token of the head to the next in [B, T, H]
  int64_t d;
};

template <class T> ConstRowsMap<T> rows(const T* x, const ChunkPlace& at) {
  return ConstRowsMap<T>(x + at.token0 * at.d, at.c, at.d, Eigen::OuterStride<>(at.stride * at.d));
}
template <class T> RowsMap<T> rows(T* x, const ChunkPlace& at) {
  return RowsMap<T>(x + at.token0 * at.d, at.c, at.d, Eigen::OuterStride<>(at.stride * at.d));
}
template <class T> ConstGateMap<T> gates(const T* x, const ChunkPlace& at) {
  return ConstGateMap<T>(x + at.token0, at.c, Eigen::InnerStride<>(at.stride));
}
template <class T> GateMap<T> gates(T* x, const ChunkPlace& at) {
  return GateMap<T>(x + at.token0, at.c, Eigen::InnerStride<>(at.stride));
}

// Γ [c, c] of one chunk from its log-decays log_a(i) (i < c):
//   Γ_ri = exp(log_a(i+1) + … + log_a(r)) for i ≤ r (Γ_rr = 1), 0 above the diagonal.
// Each entry is the exp of a segment sum (accurate in float32 even when the
// decay over the chunk is huge, unlike a difference of two large running
// sums). The exps are taken over the whole matrix at once, so they vectorise
// (the upper triangle holds exp(0) until it is cleared).
template <class T, class LogDecay>
void segment_decays(int64_t c, LogDecay log_a, MatrixMap<T>& Gamma) {
  Gamma.setZero();
  for (int64_t r = 0; r < c; ++r) {
    T segment = 0;
    for (int64_t i = r - 1; i >= 0; --i) {
      segment += log_a(i + 1);
      Gamma(r, i) = segment;
    }
  }
  Gamma = Gamma.array().exp().matrix();
  Gamma.template triangularView<Eigen::StrictlyUpper>().setZero();
}

// The chunked scan of the rules without the delta correction (linear,
// retention, gated linear, channel-gated linear): scan_chunked_gated.cpp.
// scan_chunked_forward / _backward hand these rules over to it.
template <class T>
void gated_forward(const ScanShape& s, int64_t C, const ScanInputs<T>& in, const T* s0, T* o,
                   T* s_final, T* chunk_states);
template <class T>
void gated_backward(const ScanShape& s, int64_t C, const ScanInputs<T>& in,
                    const T* chunk_states, const T* dout, const T* ds_final,
                    const ScanInputGrads<T>& grads);

// The delta rules' Eigen version (scan_chunked.cpp). It and gated_forward /
// gated_backward are the references for the fixed-size kernel
// (scan_chunked_fixed.cpp), which serves every rule with at most one decay
// per head at d = 32 and C = 16 or 64, and returns false for anything else.
template <class T>
void delta_forward_eigen(const ScanShape& s, int64_t C, const ScanInputs<T>& in, const T* s0,
                         T* o, T* s_final, T* chunk_states);
template <class T>
void delta_backward_eigen(const ScanShape& s, int64_t C, const ScanInputs<T>& in,
                          const T* chunk_states, const T* dout, const T* ds_final,
                          const ScanInputGrads<T>& grads);
template <class T>
bool fixed_forward(const ScanShape& s, int64_t C, const ScanInputs<T>& in, const T* s0, T* o,
                   T* s_final, T* chunk_states);
template <class T>
bool fixed_backward(const ScanShape& s, int64_t C, const ScanInputs<T>& in,
                    const T* chunk_states, const T* dout, const T* ds_final,
                    const ScanInputGrads<T>& grads);

}  // namespace lina::cpu::scan_chunk
