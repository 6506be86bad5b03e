// The per-thread work of every CUDA kernel, as LINA_HD functions
// (__host__ __device__ under nvcc, plain inline under g++). Each __global__
// kernel in the .cu files beside this header is a grid-stride loop calling
// one of these with its global index (and the op × device table,
// tests/test_cuda_backend.cpp, runs them on a GPU or on cuda_sim/).
//
// Accumulation rule: a thread writes (=) its output element, except
// copy_strided with accumulate, which adds into the destination element it
// alone owns (no atomics anywhere).
#pragma once
#include <array>
#include <cstdint>

#include "core/elementwise_math.h"

namespace lina::cuda {

constexpr int kMaxDims = 8;   // the most dimensions a strided kernel accepts
constexpr int kThreads = 256;  // threads per block (a power of two: block sums halve it)

// ---- fill, unary, add_inplace: one element per thread ------------------------------

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
LINA_HD void add_inplace_thread(int64_t i, float* dst, const float* src, float alpha) {
  dst[i] += alpha * src[i];
}

// ---- beta_log_alpha: β and log α in one op (math::BetaLogAlpha) ------------------
// z, dz [rows, N], bias, dbias [N]; out, dout: the planes β [rows, n_beta],
// then log α [rows, N − n_beta]. Element i = r·N + n of z.

// out[plane index of (r, n)] = σ(u) or log σ(u), u = z[i] + bias[n]
LINA_HD void beta_log_alpha_forward_thread(int64_t i, const float* z, const float* bias, float* out,
                                           int64_t rows, int64_t N, int64_t ld, int64_t n_beta) {
  using G = math::BetaLogAlpha;
  const int64_t r = i / N, n = i % N;
  const float u = z[r * ld + (ld - N) + n] + bias[n];  // the last N columns of z's row
  out[G::out_index(r, n, rows, N, n_beta)] = n < n_beta ? G::beta(u) : G::log_alpha(u);
}

// du of row r, column n, from the output and its gradient; dz[r, n] = du
// (or += du where add_dz). Returns du, for the caller's Σ over rows (dbias).
LINA_HD float beta_log_alpha_dz_thread(int64_t r, int64_t n, const float* out, const float* dout,
                                       float* dz, int64_t rows, int64_t N, int64_t ld, int64_t n_beta,
                                       bool add_dz) {
  using G = math::BetaLogAlpha;
  const int64_t o = G::out_index(r, n, rows, N, n_beta);
  const float du = n < n_beta ? G::beta_backward(out[o], dout[o]) : G::log_alpha_backward(out[o], dout[o]);
  float& d = dz[r * ld + (ld - N) + n];
  d = add_dz ? d + du : du;
  return du;
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
  // for lina's CUDA runtime on the CPU, which checks each is device memory
  std::array<const void*, 3> device_pointers() const { return {a, b, out}; }
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

// dst[dv(idx)] (= or +=) src[sv(idx)] for every index idx of `shape`.
//
// Without floating-point atomics: the dimensions of `shape` are split into
// "kept" ones (destination stride ≠ 0) and "reduced" ones (destination
// stride 0, e.g. the summed dimensions of sum_to). Each destination element
// is one kept index k, owned by exactly one thread, which visits its reduced
// indices r = 0 … reduced_n − 1 (row-major over the reduced dimensions) in
// that fixed order:
//   accumulate:  dst[k] += Σ_r src[k, r]
//   copy:        dst[k]  = src[k, reduced_n − 1]   (the last write, as on the CPU)
// So the result has the same bits on every run. When few destination
// elements share a long sum, the sum is cut into fixed chunks of
// kReducedPerChunk indices: pass 1 (copy_strided_chunk_thread) writes each
// chunk's sum to a scratch buffer, pass 2 (copy_strided_finish_thread) adds
// the chunks in order. The chunk count depends only on the shape.
struct CopyStridedArgs {
  const float* src = nullptr;
  float* dst = nullptr;
  int64_t n = 0;  // elements of shape = kept_n · reduced_n
  bool accumulate = false;
  // kept dimensions, in their order in shape
  int kept_ndim = 0;
  int64_t kept_n = 1;  // destination elements written: one thread each
  int64_t kept_shape[kMaxDims] = {};
  int64_t kept_src_strides[kMaxDims] = {};
  int64_t kept_dst_strides[kMaxDims] = {};
  // reduced dimensions (destination stride 0), in their order in shape
  int reduced_ndim = 0;
  int64_t reduced_n = 1;  // source elements per destination element
  int64_t reduced_shape[kMaxDims] = {};
  int64_t reduced_src_strides[kMaxDims] = {};
  std::array<const void*, 2> device_pointers() const { return {src, dst}; }
};

inline CopyStridedArgs make_copy_strided_args(const float* src, const int64_t* src_strides,
                                              float* dst, const int64_t* dst_strides,
                                              const int64_t* shape, int ndim, bool accumulate) {
  CopyStridedArgs args;
  args.src = src;
  args.dst = dst;
  args.accumulate = accumulate;
  for (int d = 0; d < ndim; ++d) {
    if (dst_strides[d] != 0) {
      args.kept_shape[args.kept_ndim] = shape[d];
      args.kept_src_strides[args.kept_ndim] = src_strides[d];
      args.kept_dst_strides[args.kept_ndim] = dst_strides[d];
      args.kept_n *= shape[d];
      ++args.kept_ndim;
    } else {
      args.reduced_shape[args.reduced_ndim] = shape[d];
      args.reduced_src_strides[args.reduced_ndim] = src_strides[d];
      args.reduced_n *= shape[d];
      ++args.reduced_ndim;
    }
  }
  args.n = args.kept_n * args.reduced_n;
  return args;
}

// The offset in src of reduced index r (row-major over the reduced dims).
LINA_HD int64_t reduced_src_offset(int64_t r, const CopyStridedArgs& args) {
  int64_t offset = 0;
  for (int d = args.reduced_ndim - 1; d >= 0; --d) {
    offset += (r % args.reduced_shape[d]) * args.reduced_src_strides[d];
    r /= args.reduced_shape[d];
  }
  return offset;
}

// Σ src[k, r] for r in [r_begin, r_end), in order: part of kept element k's sum.
LINA_HD float copy_strided_sum(int64_t k_src_offset, int64_t r_begin, int64_t r_end,
                               const CopyStridedArgs& args) {
  float s = 0.0f;
  for (int64_t r = r_begin; r < r_end; ++r)
    s += args.src[k_src_offset + reduced_src_offset(r, args)];
  return s;
}

// One pass, thread k = kept index k (k < kept_n): writes or accumulates
// destination element k.
LINA_HD void copy_strided_thread(int64_t k, const CopyStridedArgs& args) {
  int64_t os, od;
  strided_offsets(k, args.kept_ndim, args.kept_shape, args.kept_src_strides,
                  args.kept_dst_strides, os, od);
  if (args.accumulate) args.dst[od] += copy_strided_sum(os, 0, args.reduced_n, args);
  else args.dst[od] = args.src[os + reduced_src_offset(args.reduced_n - 1, args)];
}

// ---- the chunked accumulate (two passes) ----
constexpr int64_t kReducedPerChunk = 256;      // reduced indices per chunk
constexpr int64_t kEnoughThreads = 1 << 16;    // kept elements that fill the GPU alone

// Chunks of the reduced indices the launcher uses: 1 (the one-pass
// copy_strided_thread) unless accumulating few elements over long sums.
LINA_HD int64_t copy_strided_chunks(const CopyStridedArgs& args) {
  if (!args.accumulate || args.kept_n >= kEnoughThreads || args.reduced_n <= kReducedPerChunk)
    return 1;
  return (args.reduced_n + kReducedPerChunk - 1) / kReducedPerChunk;
}

// Pass 1, thread idx = chunk · kept_n + k: partial[chunk, k] = the chunk's
// part of element k's sum; partial [chunks, kept_n].
LINA_HD void copy_strided_chunk_thread(int64_t idx, const CopyStridedArgs& args, float* partial) {
  const int64_t chunk = idx / args.kept_n, k = idx % args.kept_n;
  int64_t os, od;
  strided_offsets(k, args.kept_ndim, args.kept_shape, args.kept_src_strides,
                  args.kept_dst_strides, os, od);
  const int64_t r_begin = chunk * kReducedPerChunk;
  const int64_t r_end =
      r_begin + kReducedPerChunk < args.reduced_n ? r_begin + kReducedPerChunk : args.reduced_n;
  partial[idx] = copy_strided_sum(os, r_begin, r_end, args);
}

// Pass 2, thread k: dst[k] += Σ_chunk partial[chunk, k], in chunk order.
LINA_HD void copy_strided_finish_thread(int64_t k, const CopyStridedArgs& args,
                                        const float* partial, int64_t chunks) {
  int64_t os, od;
  strided_offsets(k, args.kept_ndim, args.kept_shape, args.kept_src_strides,
                  args.kept_dst_strides, os, od);
  float s = 0.0f;
  for (int64_t chunk = 0; chunk < chunks; ++chunk) s += partial[chunk * args.kept_n + k];
  args.dst[od] += s;
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
                                      int64_t inner, bool accumulate) {
  const float sum = sum_middle_partial(column, 0, 1, x, n, inner);
  out[column] = accumulate ? out[column] + sum : sum;
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
