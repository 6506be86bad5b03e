// CPU kernels: plain functions on raw pointers with named dimensions,
// templated on the float type (float, double) and explicitly instantiated in
// their .cpp files. They know nothing of Tensor or autograd; core/dispatch.cpp
// is their only caller, and a test can call one alone.
//
// Accumulation rule: a kernel writes (=) its outputs unless its name or a
// comment says it accumulates (+=).
#pragma once
#include <cstdint>

#include "core/elementwise_math.h"

namespace lina::cpu {

// ---- elementwise (elementwise.cpp) ----
template <class T> void fill(T* x, int64_t n, T value);
template <class T> void unary_forward(UnaryFn f, const T* x, T* y, int64_t n, T p);
template <class T>
void unary_backward(UnaryFn f, const T* x, const T* y, const T* dy, T* dx, int64_t n, T p);
// out[i] = a[i·a_strides] ∘ b[i·b_strides] over `shape` (ndim dims); strides
// are 0 along broadcast dimensions.
template <class T>
void binary(BinaryFn f, const T* a, const int64_t* a_strides, const T* b, const int64_t* b_strides,
            T* out, const int64_t* shape, int ndim);
template <class T> void axpy(T* dst, const T* src, int64_t n, T alpha);  // dst += alpha·src

// ---- layout (layout.cpp) ----
// dst[Σ i_k dst_strides[k]] (= or +=) src[Σ i_k src_strides[k]] for i in shape.
// Works on any element type (float, double, int32).
template <class T>
void copy_strided(const T* src, const int64_t* src_strides, T* dst, const int64_t* dst_strides,
                  const int64_t* shape, int ndim, bool accumulate);

// ---- reductions (reduce.cpp) ----
template <class T> void sum_middle(const T* x, T* out, int64_t outer, int64_t n, int64_t inner);
template <class T> double sum_squares(const T* x, int64_t n);

// ---- matrix products (matmul.cpp) ----
// For i < batch: C_i = alpha·op(A_i)·op(B_i) + beta·C_i, row-major,
// op(A_i) is M×K, op(B_i) is K×N, C_i is M×N. Eigen's GEMM does the work.
template <class T>
void gemm(int64_t batch, int64_t M, int64_t N, int64_t K, const T* a, bool ta, int64_t stride_a,
          const T* b, bool tb, int64_t stride_b, T* c, int64_t stride_c, T alpha, T beta);


// ---- softmax, log-softmax, cross-entropy, embedding ----
// [anchor:SOFTMAX-LOSS]

// ---- rms_norm, l2_norm, causal conv1d, rope ----
// [anchor:NORM-CONV-ROPE]

// ---- optimiser (AdamW step) ----
// [anchor:OPTIM]

// ---- scan: the linear / delta / gated-delta recurrence ----
// [anchor:SCAN]

}  // namespace lina::cpu
