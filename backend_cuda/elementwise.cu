// Elementwise CUDA kernels: fill, unary forward/backward, broadcasting binary,
// add_inplace, dropout, the SwiGLU product, the fused gates (beta_log_alpha).
// Each kernel but the gates' backward (a block per tile of columns, its sum
// in shared memory) is a grid-stride loop over the per-thread functions of
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
// the counter (core/philox.h), the same number the CPU draws for it. With a
// residual, the residual connection's sum too: y = residual + x ⊙ M.
__global__ void dropout_kernel(const float* x, const float* residual, float* y, int64_t n,
                               DropoutKey key) {
  for (int64_t i = first_index(); i < n; i += index_stride()) {
    const float dropped = x[i] * dropout_factor<float>(key, i);
    y[i] = residual ? __fadd_rn(residual[i], dropped) : dropped;  // the product rounded, then the sum
  }
}

// y = silu(gate) ⊙ up, one thread per element of y [rows, width]; gate's and
// up's rows (and their gradients') start every `stride` elements. The
// backward writes both gradients.
__global__ void swiglu_forward_kernel(const float* gate, const float* up, float* y, int64_t n,
                                      int64_t width, int64_t stride) {
  for (int64_t i = first_index(); i < n; i += index_stride()) {
    const int64_t in = (i / width) * stride + i % width;
    y[i] = math::Silu::forward(gate[in], 0.0f) * up[in];
  }
}

__global__ void swiglu_backward_kernel(const float* gate, const float* up, const float* dy,
                                       float* dgate, float* dup, int64_t n, int64_t width,
                                       int64_t stride) {
  for (int64_t i = first_index(); i < n; i += index_stride()) {
    const int64_t in = (i / width) * stride + i % width;
    dgate[in] = math::Silu::backward(gate[in], 0.0f, dy[i] * up[in], 0.0f);  // dy·up·silu'(gate)
    dup[in] = dy[i] * math::Silu::forward(gate[in], 0.0f);
  }
}

// ---- beta_log_alpha: β = σ(z + b), log α = log σ(z + b) into two planes ----------------
// (math::BetaLogAlpha; the per-element work in kernels_device.h)

// One thread per gate of z [rows, ld] (its last N columns), writing its plane's element.
__global__ void beta_log_alpha_forward_kernel(const float* z, const float* bias, float* out, int64_t rows,
                                              int64_t N, int64_t ld, int64_t n_beta) {
  for (int64_t i = first_index(); i < rows * N; i += index_stride())
    beta_log_alpha_forward_thread(i, z, bias, out, rows, N, ld, n_beta);
}

// The backward, dz and dbias in one launch: a block per tile of `tile`
// columns (a power of two, at most 32), its kThreads threads laid out as
// `tile` columns × kThreads / tile row lanes. Thread (lane, c) walks the
// rows lane, lane + lanes, … of column c, writing dz and summing its du;
// the lanes' sums then meet in shared memory by halving, always in the same
// order (no atomics: the same bits every run), and lane 0 writes dbias
// (dbias += the sum where add_dbias). Neighbouring threads read and write
// neighbouring columns of a row.
__global__ void beta_log_alpha_backward_kernel(const float* out, const float* dout, float* dz, float* dbias,
                                               int64_t rows, int64_t N, int64_t ld, int64_t n_beta,
                                               bool add_dz, bool add_dbias, int tile) {
  __shared__ float partial[kThreads];  // [lanes, tile]
  const int c = int(threadIdx.x) % tile, lane = int(threadIdx.x) / tile, lanes = kThreads / tile;
  // the same number of tiles for every thread of the block: the barriers below are reached by all
  for (int64_t first = int64_t(blockIdx.x) * tile; first < N; first += int64_t(gridDim.x) * tile) {
    const int64_t n = first + c;
    float s = 0.0f;
    if (n < N)
      for (int64_t r = lane; r < rows; r += lanes)
        s += beta_log_alpha_dz_thread(r, n, out, dout, dz, rows, N, ld, n_beta, add_dz);
    partial[threadIdx.x] = s;
    __syncthreads();
    for (int half = lanes / 2; half > 0; half /= 2) {
      if (lane < half) partial[threadIdx.x] += partial[threadIdx.x + half * tile];
      __syncthreads();
    }
    if (lane == 0 && n < N) dbias[n] = add_dbias ? dbias[n] + partial[c] : partial[c];
    __syncthreads();  // partial[c] is read before the next tile writes partial
  }
}

// The simple reference beside it: one thread per column, down the rows in
// order, no shared memory (tests/test_ops_elementwise.cpp compares the two).
__global__ void beta_log_alpha_backward_reference_kernel(const float* out, const float* dout, float* dz,
                                                         float* dbias, int64_t rows, int64_t N, int64_t ld,
                                                         int64_t n_beta, bool add_dz, bool add_dbias) {
  for (int64_t n = first_index(); n < N; n += index_stride()) {
    float s = 0.0f;
    for (int64_t r = 0; r < rows; ++r)
      s += beta_log_alpha_dz_thread(r, n, out, dout, dz, rows, N, ld, n_beta, add_dz);
    dbias[n] = add_dbias ? dbias[n] + s : s;
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

void dropout_apply(const float* x, const float* residual, float* y, int64_t n, const DropoutKey& key) {
  if (n == 0) return;
  LINA_LAUNCH(dropout_kernel, blocks_for(n), kThreads, 0, context().stream)(x, residual, y, n, key);
  LINA_CHECK_LAUNCH("cuda::dropout_apply");
}

void add_inplace(float* dst, const float* src, int64_t n, float alpha) {
  if (n == 0) return;
  LINA_LAUNCH(add_inplace_kernel, blocks_for(n), kThreads, 0, context().stream)(dst, src, n, alpha);
  LINA_CHECK_LAUNCH("cuda::add_inplace");
}

void swiglu_forward(const float* gate, const float* up, float* y, int64_t rows, int64_t width,
                    int64_t stride) {
  const int64_t n = rows * width;
  if (n == 0) return;
  LINA_LAUNCH(swiglu_forward_kernel, blocks_for(n), kThreads, 0, context().stream)(gate, up, y, n, width,
                                                                                   stride);
  LINA_CHECK_LAUNCH("cuda::swiglu_forward");
}

void swiglu_backward(const float* gate, const float* up, const float* dy, float* dgate,
                     float* dup, int64_t rows, int64_t width, int64_t stride) {
  const int64_t n = rows * width;
  if (n == 0) return;
  LINA_LAUNCH(swiglu_backward_kernel, blocks_for(n), kThreads, 0, context().stream)(gate, up, dy, dgate, dup,
                                                                                    n, width, stride);
  LINA_CHECK_LAUNCH("cuda::swiglu_backward");
}

void beta_log_alpha_forward(const float* z, const float* bias, float* out, int64_t rows, int64_t N,
                            int64_t ld, int64_t n_beta) {
  if (rows * N == 0) return;
  LINA_LAUNCH(beta_log_alpha_forward_kernel, blocks_for(rows * N), kThreads, 0, context().stream)(
      z, bias, out, rows, N, ld, n_beta);
  LINA_CHECK_LAUNCH("cuda::beta_log_alpha_forward");
}

// Columns per block of the backward: the smallest power of two ≥ N, at most
// 32 (a warp's worth of neighbouring columns); the rest of the block's
// threads are row lanes, so a few columns still keep 256 threads busy.
static int gate_tile(int64_t N) {
  int tile = 1;
  while (tile < 32 && tile < N) tile *= 2;
  return tile;
}

void beta_log_alpha_backward(const float* out, const float* dout, float* dz, float* dbias, int64_t rows,
                             int64_t N, int64_t ld, int64_t n_beta, bool add_dz, bool add_dbias) {
  if (N == 0) return;  // rows = 0 still writes dbias = 0 (or leaves it as it was)
  const int tile = gate_tile(N);
  const int64_t tiles = (N + tile - 1) / tile;
  const unsigned blocks = unsigned(tiles < (int64_t(1) << 16) ? tiles : (int64_t(1) << 16));  // beyond: the loop strides
  LINA_LAUNCH(beta_log_alpha_backward_kernel, blocks, kThreads, 0, context().stream)(out, dout, dz, dbias, rows,
                                                                                      N, ld, n_beta, add_dz,
                                                                                      add_dbias, tile);
  LINA_CHECK_LAUNCH("cuda::beta_log_alpha_backward");
}

void beta_log_alpha_backward_reference(const float* out, const float* dout, float* dz, float* dbias,
                                       int64_t rows, int64_t N, int64_t ld, int64_t n_beta, bool add_dz,
                                       bool add_dbias) {
  if (N == 0) return;
  LINA_LAUNCH(beta_log_alpha_backward_reference_kernel, blocks_for(N), kThreads, 0, context().stream)(
      out, dout, dz, dbias, rows, N, ld, n_beta, add_dz, add_dbias);
  LINA_CHECK_LAUNCH("cuda::beta_log_alpha_backward_reference");
}

}  // namespace lina::cuda
