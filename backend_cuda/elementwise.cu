// Elementwise CUDA kernels: fill, unary forward/backward, broadcasting binary,
// add_inplace, dropout, the SwiGLU product. Each kernel is a grid-stride loop over the per-thread functions of
// backend_cuda/kernels_device.h; the maths is core/elementwise_math.h, the
// same lines the CPU backend runs. Unary and binary kernels are compiled once
// per function: the host picks the instantiation with visit_unary/visit_binary.
#include <string>

#include "backend_cuda/cuda_context.h"
#include "backend_cuda/cuda_kernels.h"
#include "backend_cuda/kernels_device.h"
#include "core/error.h"

namespace lina::cuda {

// ---- kernels ------------------------------------------------------------------

template <class T>
__global__ void fill_kernel(T* x, int64_t n, T value) {
  for (int64_t i = first_index(); i < n; i += index_stride()) fill_thread(i, x, value);
}

template <class Fn>
__global__ void unary_forward_kernel(const float* x, float* y, int64_t n, float p) {
  for (int64_t i = first_index(); i < n; i += index_stride()) unary_forward_thread<Fn>(i, x, y, p);
}

template <class Fn>
__global__ void unary_backward_kernel(const float* x, const float* y, const float* dy, float* dx,
                                      int64_t n, float p) {
  for (int64_t i = first_index(); i < n; i += index_stride())
    unary_backward_thread<Fn>(i, x, y, dy, dx, p);
}

template <class Fn>
__global__ void binary_kernel(BinaryArgs args) {
  for (int64_t i = first_index(); i < args.n; i += index_stride()) binary_thread<Fn>(i, args);
}

__global__ void add_inplace_kernel(float* dst, const float* src, int64_t n, float alpha) {
  for (int64_t i = first_index(); i < n; i += index_stride()) add_inplace_thread(i, dst, src, alpha);
}

// Inverted dropout, one thread per element: the element's factor comes from
// the counter (core/philox.h), the same number the CPU draws for it.
__global__ void dropout_kernel(const float* x, float* y, int64_t n, DropoutKey key) {
  for (int64_t i = first_index(); i < n; i += index_stride())
    y[i] = x[i] * dropout_factor<float>(key, i);
}

// y = silu(gate) ⊙ up, one thread per element; the backward writes both gradients.
__global__ void swiglu_forward_kernel(const float* gate, const float* up, float* y, int64_t n) {
  for (int64_t i = first_index(); i < n; i += index_stride())
    y[i] = math::Silu::forward(gate[i], 0.0f) * up[i];
}

__global__ void swiglu_backward_kernel(const float* gate, const float* up, const float* dy,
                                       float* dgate, float* dup, int64_t n) {
  for (int64_t i = first_index(); i < n; i += index_stride()) {
    dgate[i] = math::Silu::backward(gate[i], 0.0f, dy[i] * up[i], 0.0f);  // dy·up·silu'(gate)
    dup[i] = dy[i] * math::Silu::forward(gate[i], 0.0f);
  }
}

// ---- launchers ------------------------------------------------------------------

void fill(float* x, int64_t n, float value) {
  if (n == 0) return;
  LINA_LAUNCH(fill_kernel<float>, blocks_for(n), kThreads, 0, context().stream)(x, n, value);
  LINA_CHECK_LAUNCH("cuda::fill");
}

void fill_i32(int32_t* x, int64_t n, int32_t value) {
  if (n == 0) return;
  LINA_LAUNCH(fill_kernel<int32_t>, blocks_for(n), kThreads, 0, context().stream)(x, n, value);
  LINA_CHECK_LAUNCH("cuda::fill_i32");
}

void unary_forward(UnaryFn f, const float* x, float* y, int64_t n, float p) {
  if (n == 0) return;
  cudaStream_t stream = context().stream;
  math::visit_unary(f, [&](auto fn) {
    using Fn = decltype(fn);
    LINA_LAUNCH(unary_forward_kernel<Fn>, blocks_for(n), kThreads, 0, stream)(x, y, n, p);
  });
  LINA_CHECK_LAUNCH("cuda::unary_forward");
}

void unary_backward(UnaryFn f, const float* x, const float* y, const float* dy, float* dx,
                    int64_t n, float p) {
  if (n == 0) return;
  cudaStream_t stream = context().stream;
  math::visit_unary(f, [&](auto fn) {
    using Fn = decltype(fn);
    LINA_LAUNCH(unary_backward_kernel<Fn>, blocks_for(n), kThreads, 0, stream)(x, y, dy, dx, n, p);
  });
  LINA_CHECK_LAUNCH("cuda::unary_backward");
}

void binary(BinaryFn f, const float* a, const int64_t* a_strides, const float* b,
            const int64_t* b_strides, float* out, const int64_t* shape, int ndim) {
  check(ndim <= kMaxDims, "cuda::binary: " + std::to_string(ndim) + " dimensions, at most " +
                              std::to_string(kMaxDims) + " supported");
  BinaryArgs args = make_binary_args(a, a_strides, b, b_strides, out, shape, ndim);
  if (args.n == 0) return;
  cudaStream_t stream = context().stream;
  math::visit_binary(f, [&](auto fn) {
    using Fn = decltype(fn);
    LINA_LAUNCH(binary_kernel<Fn>, blocks_for(args.n), kThreads, 0, stream)(args);
  });
  LINA_CHECK_LAUNCH("cuda::binary");
}

void dropout_apply(const float* x, float* y, int64_t n, const DropoutKey& key) {
  if (n == 0) return;
  LINA_LAUNCH(dropout_kernel, blocks_for(n), kThreads, 0, context().stream)(x, y, n, key);
  LINA_CHECK_LAUNCH("cuda::dropout_apply");
}

void add_inplace(float* dst, const float* src, int64_t n, float alpha) {
  if (n == 0) return;
  LINA_LAUNCH(add_inplace_kernel, blocks_for(n), kThreads, 0, context().stream)(dst, src, n, alpha);
  LINA_CHECK_LAUNCH("cuda::add_inplace");
}

void swiglu_forward(const float* gate, const float* up, float* y, int64_t n) {
  if (n == 0) return;
  LINA_LAUNCH(swiglu_forward_kernel, blocks_for(n), kThreads, 0, context().stream)(gate, up, y, n);
  LINA_CHECK_LAUNCH("cuda::swiglu_forward");
}

void swiglu_backward(const float* gate, const float* up, const float* dy, float* dgate,
                     float* dup, int64_t n) {
  if (n == 0) return;
  LINA_LAUNCH(swiglu_backward_kernel, blocks_for(n), kThreads, 0, context().stream)(gate, up, dy, dgate, dup,
                                                                                    n);
  LINA_CHECK_LAUNCH("cuda::swiglu_backward");
}

}  // namespace lina::cuda
