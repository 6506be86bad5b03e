// Softmax, log-softmax, cross-entropy, embedding and argmax CUDA kernels,
// float32, the GPU twins of backend_cpu/softmax_loss.cpp.
//
// Row kernels take one warp per row (backend_cuda/warp_reduce.cuh): lane l
// owns entries l, l + 32, … of its row; the row's maximum and sums are
// butterfly shuffles, the same order on every run. The cross-entropy
// writes its gradient in the same pass, and its total is the last block
// adding the per-row losses. Embedding is one thread per output element
// (softmax_loss_device.h).
#include <cmath>
#include <cstddef>
#include <limits>

#include "backend_cuda/cuda_context.h"
#include "backend_cuda/cuda_kernels.h"
#include "backend_cuda/last_block.cuh"
#include "backend_cuda/scratch.h"
#include "backend_cuda/softmax_loss_device.h"
#include "backend_cuda/warp_reduce.cuh"

namespace lina::cuda {

namespace {

// ---- the log-sum-exp of a row, shared by softmax, log-softmax, cross-entropy ----

struct RowMaxSum {
  float max;  // m = max_j x[j]
  float sum;  // s = Σ_j exp(x[j] − m)   (subtracting m keeps exp from overflowing)
};

// Over x[0 .. n) of one row, by the warp; with exps, also exps[j] = exp(x[j] − m).
__device__ RowMaxSum row_max_sum(const float* x, int64_t n, float* exps) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t j = lane(); j < n; j += kWarp) m = x[j] > m ? x[j] : m;
  m = warp_max(m);
  float s = 0.0f;
  for (int64_t j = lane(); j < n; j += kWarp) {
    const float e = expf(x[j] - m);
    if (exps) exps[j] = e;
    s += e;
  }
  return RowMaxSum{m, warp_sum(s)};
}

// ---- softmax ----

// y = exp(x − m) / s over the keys row r may see, 0 beyond (never
// exponentiated, so −inf or NaN there cannot leak in).
__global__ void softmax_forward_kernel(const float* x, float* y, int64_t R, int64_t N, int64_t Tq,
                                       bool causal) {
  for (int64_t r = first_row(); r < R; r += row_stride()) {
    const int64_t visible = visible_keys(r, N, Tq, causal);
    const RowMaxSum stats = row_max_sum(x + r * N, visible, y + r * N);  // y = exp(x − m) for now
    const float inv = 1.0f / stats.sum;
    for (int64_t j = lane(); j < N; j += kWarp) y[r * N + j] = j < visible ? y[r * N + j] * inv : 0.0f;
  }
}

// dx = y ⊙ (dy − Σ_j y_j dy_j): the Jacobian of softmax is diag(y) − y yᵀ.
__global__ void softmax_backward_kernel(const float* y, const float* dy, float* dx, int64_t R, int64_t N) {
  for (int64_t r = first_row(); r < R; r += row_stride()) {
    float dot = 0.0f;
    for (int64_t j = lane(); j < N; j += kWarp) dot += y[r * N + j] * dy[r * N + j];
    dot = warp_sum(dot);
    for (int64_t j = lane(); j < N; j += kWarp) dx[r * N + j] = y[r * N + j] * (dy[r * N + j] - dot);
  }
}

// ---- log-softmax ----

// y = x − (m + log s)
__global__ void log_softmax_forward_kernel(const float* x, float* y, int64_t R, int64_t N) {
  for (int64_t r = first_row(); r < R; r += row_stride()) {
    const RowMaxSum stats = row_max_sum(x + r * N, N, nullptr);
    const float shift = stats.max + logf(stats.sum);
    for (int64_t j = lane(); j < N; j += kWarp) y[r * N + j] = x[r * N + j] - shift;
  }
}

// dx = dy − softmax(x) · Σ_j dy_j, with softmax(x) = exp(y).
__global__ void log_softmax_backward_kernel(const float* y, const float* dy, float* dx, int64_t R,
                                            int64_t N) {
  for (int64_t r = first_row(); r < R; r += row_stride()) {
    float total = 0.0f;
    for (int64_t j = lane(); j < N; j += kWarp) total += dy[r * N + j];
    total = warp_sum(total);
    for (int64_t j = lane(); j < N; j += kWarp) dx[r * N + j] = dy[r * N + j] - expf(y[r * N + j]) * total;
  }
}

// ---- cross-entropy ----
// loss = Σ_r mask_r · nll_r / count, nll_r = −log softmax(logits_r)[t_r],
// count = max(Σ_r mask_r, 1) (R when there is no mask), and its gradient
// dlogits_r = mask_r · (p_r − onehot(t_r)) / count (dloss = 1).

// Σ_r mask_r over thread t's share r = t, t + kThreads, …, in double; R
// itself when there is no mask.
__device__ double mask_count_share(const float* mask, int64_t R) {
  if (!mask) return threadIdx.x == 0 ? double(R) : 0.0;
  double s = 0.0;
  for (int64_t r = threadIdx.x; r < R; r += kThreads) s += double(mask[r]);
  return s;
}

__device__ double loss_count(double mask_total) { return mask_total > 1.0 ? mask_total : 1.0; }

// Σ mask by the whole block: the count given (an update plan works it out on
// the host, once per update: one float read here), else the block sums the
// mask (R floats from L2, the same order in every block, so every row gets
// the same factor).
__device__ double mask_total(const float* mask, const float* mask_count, int64_t R, double* partial) {
  if (mask && mask_count) return double(*mask_count);
  return block_total(mask_count_share(mask, R), partial);
}

// By one whole block: loss = Σ row_nll / max(Σ mask, 1).
__device__ void cross_entropy_total(const double* row_nll, const float* mask, const float* mask_count, float* loss,
                                    int64_t R) {
  __shared__ double partial[kRowsPerBlock];
  double nll = 0.0;
  for (int64_t r = threadIdx.x; r < R; r += kThreads) nll += row_nll[r];
  nll = block_total(nll, partial);
  __syncthreads();  // partial is reused below
  const double count = mask_total(mask, mask_count, R, partial);
  if (threadIdx.x == 0) *loss = float(nll / loss_count(count));
}

// 1 / count, by the whole block.
__device__ float inverse_count(const float* mask, const float* mask_count, int64_t R) {
  __shared__ double partial[kRowsPerBlock];
  __shared__ float inverse;
  const double count = mask_total(mask, mask_count, R, partial);
  if (threadIdx.x == 0) inverse = float(1.0 / loss_count(count));
  __syncthreads();
  return inverse;
}

// Per row: p = softmax(logits) into dlogits, row_nll = mask · (log Σ
// exp(logits) − logits[t]), then the row becomes w · (p − onehot(t)), w =
// mask / count; the last block to finish adds the rows' nll into the loss.
__global__ void cross_entropy_forward_kernel(const float* logits, const int32_t* targets, const float* mask,
                                             const float* mask_count, float* dlogits, double* row_nll, float* loss,
                                             int64_t R, int64_t V, uint64_t* index_error, unsigned* blocks_done) {
  const float scale = inverse_count(mask, mask_count, R);
  for (int64_t r = first_row(); r < R; r += row_stride()) {
    const float* x = logits + r * V;
    float* d = dlogits + r * V;
    const RowMaxSum stats = row_max_sum(x, V, d);  // d = exp(x − m) for now
    const float inv = 1.0f / stats.sum;
    const int32_t t = targets[r];
    const float w = mask ? scale * mask[r] : scale;
    for (int64_t j = lane(); j < V; j += kWarp) {
      const float p = d[j] * inv;
      float g = w * p;
      if (j == t) g -= w;  // an out-of-range t matches no j (reported below)
      d[j] = g;
    }
    if (lane() == 0) {
      if (!index_ok(t, V)) *index_error = pack_index_error(kCrossEntropyTarget, t, V);
      const double nll = index_ok(t, V) ? double(stats.max + logf(stats.sum)) - double(x[t]) : double(NAN);
      row_nll[r] = mask ? double(mask[r]) * nll : nll;
    }
  }
  if (last_block_done(blocks_done)) cross_entropy_total(row_nll, mask, mask_count, loss, R);
}

// ---- embedding ----

__global__ void embedding_forward_kernel(const float* weight, const int32_t* ids, float* out, int64_t n,
                                         int64_t V, int64_t C, uint64_t* index_error) {
  for (int64_t i = first_index(); i < n; i += index_stride())
    embedding_forward_thread(i, weight, ids, out, V, C, index_error);
}

__global__ void embedding_backward_kernel(const float* dy, const int32_t* ids, float* dweight,
                                          int64_t n, int64_t N, int64_t C, bool accumulate) {
  for (int64_t i = first_index(); i < n; i += index_stride())
    embedding_backward_thread(i, dy, ids, dweight, N, C, accumulate);
}

// ---- argmax ----

// out[r] = the first j with x[r, j] = max_j x[r, j]. Like std::max_element,
// x[0] is always a candidate and a later entry must be strictly greater to
// replace the best (so NaN after x[0] never wins, a row of −inf gives 0); on
// a tie between lanes the smaller index wins.
__global__ void argmax_last_kernel(const float* x, int32_t* out, int64_t R, int64_t N) {
  for (int64_t r = first_row(); r < R; r += row_stride()) {
    float best = -std::numeric_limits<float>::infinity();
    int64_t at = N;  // N: this lane owns no entry
    for (int64_t j = lane(); j < N; j += kWarp)
      if (j == 0 || x[r * N + j] > best) best = x[r * N + j], at = j;
    for (int lanes = kWarp / 2; lanes > 0; lanes /= 2) {
      const float other = __shfl_xor_sync(kFullWarp, best, lanes);
      const int64_t other_at = __shfl_xor_sync(kFullWarp, at, lanes);
      if (other > best || (other == best && other_at < at) || (at == N && other_at < N))
        best = other, at = other_at;
    }
    if (lane() == 0) out[r] = int32_t(at < N ? at : 0);  // a row with no entries gives 0
  }
}

}  // namespace

// ---- launchers ------------------------------------------------------------------------

void softmax_forward(const float* x, float* y, int64_t R, int64_t N, int64_t Tq, bool causal) {
  if (R == 0) return;
  LINA_LAUNCH(softmax_forward_kernel, row_blocks(R), kThreads, 0, context().stream)(x, y, R, N, Tq, causal);
  LINA_CHECK_LAUNCH("cuda::softmax_forward");
}

void softmax_backward(const float* y, const float* dy, float* dx, int64_t R, int64_t N) {
  if (R == 0) return;
  LINA_LAUNCH(softmax_backward_kernel, row_blocks(R), kThreads, 0, context().stream)(y, dy, dx, R, N);
  LINA_CHECK_LAUNCH("cuda::softmax_backward");
}

void log_softmax_forward(const float* x, float* y, int64_t R, int64_t N) {
  if (R == 0) return;
  LINA_LAUNCH(log_softmax_forward_kernel, row_blocks(R), kThreads, 0, context().stream)(x, y, R, N);
  LINA_CHECK_LAUNCH("cuda::log_softmax_forward");
}

void log_softmax_backward(const float* y, const float* dy, float* dx, int64_t R, int64_t N) {
  if (R == 0) return;
  LINA_LAUNCH(log_softmax_backward_kernel, row_blocks(R), kThreads, 0, context().stream)(y, dy, dx, R, N);
  LINA_CHECK_LAUNCH("cuda::log_softmax_backward");
}

// Per-row nll into a scratch buffer; the launch's last block adds it in a fixed order.
void cross_entropy_forward(const float* logits, const int32_t* targets, const float* mask,
                           const float* mask_count, float* dlogits, float* loss, int64_t R, int64_t V) {
  Scratch<double> row_nll(R > 0 ? R : 1);  // [R]
  LINA_LAUNCH(cross_entropy_forward_kernel, row_blocks(R), kThreads, 0, context().stream)(
      logits, targets, mask, mask_count, dlogits, row_nll.get(), loss, R, V, context().index_error,
      context().blocks_done);
  LINA_CHECK_LAUNCH("cuda::cross_entropy_forward");
}

void embedding_forward(const float* weight, const int32_t* ids, float* out, int64_t N, int64_t V, int64_t C) {
  int64_t n = N * C;
  if (n == 0) return;
  Context& ctx = context();
  LINA_LAUNCH(embedding_forward_kernel, blocks_for(n), kThreads, 0, ctx.stream)(weight, ids, out, n, V, C,
                                                                              ctx.index_error);
  LINA_CHECK_LAUNCH("cuda::embedding_forward");
}

void embedding_backward(const float* dy, const int32_t* ids, float* dweight, int64_t N, int64_t V,
                        int64_t C, bool accumulate) {
  int64_t n = V * C;
  if (n == 0) return;
  LINA_LAUNCH(embedding_backward_kernel, blocks_for(n), kThreads, 0, context().stream)(dy, ids, dweight, n,
                                                                                      N, C, accumulate);
  LINA_CHECK_LAUNCH("cuda::embedding_backward");
}

void argmax_last(const float* x, int32_t* out, int64_t R, int64_t N) {
  if (R == 0) return;
  LINA_LAUNCH(argmax_last_kernel, row_blocks(R), kThreads, 0, context().stream)(x, out, R, N);
  LINA_CHECK_LAUNCH("cuda::argmax_last");
}

}  // namespace lina::cuda
