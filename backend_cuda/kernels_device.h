// The per-thread work of every CUDA kernel, as LINA_HD functions
// (__host__ __device__ under nvcc, plain inline under g++). Each __global__
// kernel in the .cu files beside this header is a grid-stride loop calling
// one of these with its global index; tests/test_cuda_host_emulation.cpp calls
// the same functions over a whole grid on the host, so the indexing logic the
// GPU runs is checked against the CPU backend on a machine without a GPU.
//
// Accumulation rule: a thread writes (=) its output element, except
// copy_strided with accumulate, which adds (atomically on the GPU).
// No CUDA headers here: the file must compile under g++ alone.
#pragma once
#include <cstdint>

#include "core/elementwise_math.h"

namespace lina::cuda {

constexpr int kMaxDims = 8;   // the most dimensions a strided kernel accepts
constexpr int kThreads = 256;  // threads per block (a power of two: block sums halve it)

// ---- fill, unary, axpy: one element per thread ------------------------------

template <class T>
LINA_HD void fill_thread(int64_t i, T* x, T value) { x[i] = value; }

// y[i] = f(x[i], p)
template <class Fn>
LINA_HD void unary_forward_thread(int64_t i, const float* x, float* y, float p) {
  y[i] = Fn::forward(x[i], p);
}

// dx[i] = dy[i] · f'(x[i]) (y = f(x) passed in, several derivatives use it)
template <class Fn>
LINA_HD void unary_backward_thread(int64_t i, const float* x, const float* y, const float* dy,
                                   float* dx, float p) {
  dx[i] = Fn::backward(x[i], y[i], dy[i], p);
}

// dst[i] += alpha · src[i]
LINA_HD void axpy_thread(int64_t i, float* dst, const float* src, float alpha) {
  dst[i] += alpha * src[i];
}

// ---- strided indexing ---------------------------------------------------------

// The offsets of the flat row-major index `idx` of `shape` in two strided
// buffers: the coordinates are peeled off from the last dimension.
LINA_HD void strided_offsets(int64_t idx, int ndim, const int64_t* shape, const int64_t* strides_a,
                             const int64_t* strides_b, int64_t& offset_a, int64_t& offset_b) {
  offset_a = 0;
  offset_b = 0;
  for (int d = ndim - 1; d >= 0; --d) {
    int64_t coord = idx % shape[d];
    idx /= shape[d];
    offset_a += coord * strides_a[d];
    offset_b += coord * strides_b[d];
  }
}

// out[idx] = a[sa(idx)] ∘ b[sb(idx)] over `shape`; strides are 0 along
// broadcast dimensions. Passed to the kernel by value (fits the 4 KB limit).
struct BinaryArgs {
  const float* a = nullptr;
  const float* b = nullptr;
  float* out = nullptr;
  int64_t n = 0;  // elements of out
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t a_strides[kMaxDims] = {};
  int64_t b_strides[kMaxDims] = {};
};

// Fills BinaryArgs from the backend's raw arguments. The caller checks
// ndim ≤ kMaxDims first.
inline BinaryArgs make_binary_args(const float* a, const int64_t* a_strides, const float* b,
                                   const int64_t* b_strides, float* out, const int64_t* shape,
                                   int ndim) {
  BinaryArgs args;
  args.a = a;
  args.b = b;
  args.out = out;
  args.ndim = ndim;
  args.n = 1;
  for (int d = 0; d < ndim; ++d) {
    args.shape[d] = shape[d];
    args.a_strides[d] = a_strides[d];
    args.b_strides[d] = b_strides[d];
    args.n *= shape[d];
  }
  return args;
}

template <class Fn>
LINA_HD void binary_thread(int64_t idx, const BinaryArgs& args) {
  int64_t oa, ob;
  strided_offsets(idx, args.ndim, args.shape, args.a_strides, args.b_strides, oa, ob);
  args.out[idx] = Fn::apply(args.a[oa], args.b[ob]);
}

// dst[dv(idx)] (= or +=) src[sv(idx)] for every flat index idx of `shape`.
struct CopyStridedArgs {
  const float* src = nullptr;
  float* dst = nullptr;
  int64_t n = 0;  // elements of shape
  int ndim = 0;
  bool accumulate = false;
  int64_t shape[kMaxDims] = {};
  int64_t src_strides[kMaxDims] = {};
  int64_t dst_strides[kMaxDims] = {};
};

inline CopyStridedArgs make_copy_strided_args(const float* src, const int64_t* src_strides,
                                              float* dst, const int64_t* dst_strides,
                                              const int64_t* shape, int ndim, bool accumulate) {
  CopyStridedArgs args;
  args.src = src;
  args.dst = dst;
  args.ndim = ndim;
  args.accumulate = accumulate;
  args.n = 1;
  for (int d = 0; d < ndim; ++d) {
    args.shape[d] = shape[d];
    args.src_strides[d] = src_strides[d];
    args.dst_strides[d] = dst_strides[d];
    args.n *= shape[d];
  }
  return args;
}

// *p += v, race-free on the GPU: zero destination strides make several
// threads add into one element (sum_to).
LINA_HD void add_to(float* p, float v) {
#ifdef __CUDA_ARCH__
  atomicAdd(p, v);
#else
  *p += v;
#endif
}

LINA_HD void copy_strided_thread(int64_t idx, const CopyStridedArgs& args) {
  int64_t os, od;
  strided_offsets(idx, args.ndim, args.shape, args.src_strides, args.dst_strides, os, od);
  if (args.accumulate) add_to(args.dst + od, args.src[os]);
  else args.dst[od] = args.src[os];
}

// ---- reductions -----------------------------------------------------------------

// x viewed as [outer, n, inner]; column c = o·inner + i of out [outer, inner].
// The partial sum of column c that lane `lane` of `lanes` computes:
// Σ x[o, j, i] for j = lane, lane + lanes, …  With lanes = 1 it is the
// whole column (one thread per column, coalesced along inner); with a block
// of lanes per column the kernel then adds the lanes' partials.
LINA_HD float sum_middle_partial(int64_t column, int64_t lane, int64_t lanes, const float* x,
                                 int64_t n, int64_t inner) {
  int64_t o = column / inner, i = column % inner;
  const float* first = x + o * n * inner + i;
  float s = 0.0f;
  for (int64_t j = lane; j < n; j += lanes) s += first[j * inner];
  return s;
}

LINA_HD void sum_middle_column_thread(int64_t column, const float* x, float* out, int64_t n,
                                      int64_t inner) {
  out[column] = sum_middle_partial(column, 0, 1, x, n, inner);
}

// Thread `thread` of `threads`: Σ x[k]² for k = thread, thread + threads, …
// in double; the kernel adds the threads' partials.
LINA_HD double sum_squares_partial(int64_t thread, int64_t threads, const float* x, int64_t n) {
  double s = 0.0;
  for (int64_t k = thread; k < n; k += threads) s += double(x[k]) * double(x[k]);
  return s;
}

// ---- matrix products --------------------------------------------------------------

// c_b = beta · c_b for every batch entry b (each M·N contiguous, stride_c
// apart): what a product with K = 0 leaves. beta = 0 writes zeros, so a
// NaN already in c does not survive.
LINA_HD void scale_batched_thread(int64_t idx, float* c, int64_t mn, int64_t stride_c, float beta) {
  float* p = c + (idx / mn) * stride_c + idx % mn;
  *p = beta == 0.0f ? 0.0f : beta * *p;
}

}  // namespace lina::cuda
