// Softmax, log-softmax, cross-entropy, embedding and argmax CPU kernels.
//
// Every kernel sees its input as rows: R = rows (all leading dims flattened),
// N (or V, C) = the last axis. Rows are independent, so the row loops run in
// parallel; every reduction inside a row is serial and therefore
// deterministic. Outputs are written (=), never accumulated.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend_cpu/cpu_kernels.h"
#include "backend_cpu/parallel.h"

namespace lina::cpu {

namespace {

// One row's stable softmax: y[j] = exp(x[j] − m) / s for j < n, with m the
// row maximum and s = Σ exp(x − m). Returns log Σ exp(x) = m + log s (the
// log-normaliser the cross-entropy needs).
template <class T>
T softmax_row(const T* x, T* y, int64_t n) {
  T m = *std::max_element(x, x + n);
  T s = 0;
  for (int64_t j = 0; j < n; ++j) {
    y[j] = std::exp(x[j] - m);
    s += y[j];
  }
  T inv = T(1) / s;
  for (int64_t j = 0; j < n; ++j) y[j] *= inv;
  return m + std::log(s);
}

}  // namespace

// ---- softmax ------------------------------------------------------------------------
// y = exp(x − max) / Σ exp(x − max) over the keys a row may see; the rest get
// y = 0 without ever being exponentiated (so −inf or NaN there cannot leak in).
template <class T>
void softmax_forward(const T* x, T* y, int64_t R, int64_t N, int64_t Tq, bool causal) {
  LINA_PARALLEL_FOR_IF(R * N > kParallelMin)
  for (int64_t r = 0; r < R; ++r) {
    const T* xr = x + r * N;
    T* yr = y + r * N;
    // causal: query i (= r mod Tq) sees keys j <= i + (N − Tq)
    int64_t visible = causal ? std::min(N, r % Tq + (N - Tq) + 1) : N;
    softmax_row(xr, yr, visible);
    for (int64_t j = visible; j < N; ++j) yr[j] = T(0);
  }
}

// dx = y ⊙ (dy − Σ_j y_j dy_j): the Jacobian of softmax is diag(y) − y yᵀ.
template <class T>
void softmax_backward(const T* y, const T* dy, T* dx, int64_t R, int64_t N) {
  LINA_PARALLEL_FOR_IF(R * N > kParallelMin)
  for (int64_t r = 0; r < R; ++r) {
    const T* yr = y + r * N;
    const T* dyr = dy + r * N;
    T* dxr = dx + r * N;
    T dot = 0;  // Σ_j y_j dy_j
    for (int64_t j = 0; j < N; ++j) dot += yr[j] * dyr[j];
    for (int64_t j = 0; j < N; ++j) dxr[j] = yr[j] * (dyr[j] - dot);
  }
}

// ---- log-softmax --------------------------------------------------------------------
// y = x − max − log Σ exp(x − max)
template <class T>
void log_softmax_forward(const T* x, T* y, int64_t R, int64_t N) {
  LINA_PARALLEL_FOR_IF(R * N > kParallelMin)
  for (int64_t r = 0; r < R; ++r) {
    const T* xr = x + r * N;
    T* yr = y + r * N;
    T mx = *std::max_element(xr, xr + N);
    T s = 0;
    for (int64_t j = 0; j < N; ++j) s += std::exp(xr[j] - mx);
    T shift = mx + std::log(s);
    for (int64_t j = 0; j < N; ++j) yr[j] = xr[j] - shift;
  }
}

// dx = dy − softmax(x) · Σ_j dy_j, with softmax(x) = exp(y).
template <class T>
void log_softmax_backward(const T* y, const T* dy, T* dx, int64_t R, int64_t N) {
  LINA_PARALLEL_FOR_IF(R * N > kParallelMin)
  for (int64_t r = 0; r < R; ++r) {
    const T* yr = y + r * N;
    const T* dyr = dy + r * N;
    T* dxr = dx + r * N;
    T total = 0;  // Σ_j dy_j
    for (int64_t j = 0; j < N; ++j) total += dyr[j];
    for (int64_t j = 0; j < N; ++j) dxr[j] = dyr[j] - std::exp(yr[j]) * total;
  }
}

// ---- cross-entropy ------------------------------------------------------------------

// count = max(Σ_n mask_n, 1): the number of positions the loss averages over.
template <class T>
static double cross_entropy_count(const T* mask, const T* mask_count, int64_t R) {
  if (!mask) return double(std::max<int64_t>(R, 1));
  if (mask_count) return std::max(double(*mask_count), 1.0);  // Σ mask, worked out beforehand
  double count = 0;
  for (int64_t n = 0; n < R; ++n) count += double(mask[n]);
  return std::max(count, 1.0);
}

// One pass per row: max, exponentials (written to dlogits) and their sum,
// then normalise to p; −log p_t = log Σ exp(x − max) − (x_t − max). The row
// is then the loss's gradient (dloss = 1): w · (p − onehot(t)), w = mask /
// count, since d(−log p_t)/dx = p − onehot(t).
template <class T>
void cross_entropy_forward(const T* logits, const int32_t* targets, const T* mask, const T* mask_count,
                           T* dlogits, T* loss, int64_t R, int64_t V) {
  const double count = cross_entropy_count(mask, mask_count, R);
  const T scale = T(1.0 / count);
  std::vector<double> row_nll(static_cast<size_t>(R));  // one value per row: summed serially below
  LINA_PARALLEL_FOR_IF(R * V > kParallelMin)
  for (int64_t n = 0; n < R; ++n) {
    const T* xr = logits + n * V;
    T* dr = dlogits + n * V;
    // −log softmax(x)[t] = log Σ exp(x) − x[t]
    double nll = double(softmax_row(xr, dr, V)) - double(xr[targets[n]]);  // dr = p
    row_nll[size_t(n)] = mask ? double(mask[n]) * nll : nll;
    const T w = mask ? scale * mask[n] : scale;
    for (int64_t j = 0; j < V; ++j) dr[j] = w * dr[j];
    dr[targets[n]] -= w;
  }
  double total = 0;
  for (double v : row_nll) total += v;
  *loss = T(total / count);
}

// ---- embedding ----------------------------------------------------------------------
// out[n, :] = weight[ids[n], :]
template <class T>
void embedding_forward(const T* weight, const int32_t* ids, T* out, int64_t N, int64_t /*V: checked by the caller*/,
                       int64_t C) {
  LINA_PARALLEL_FOR_IF(N * C > kParallelMin)
  for (int64_t n = 0; n < N; ++n) std::copy_n(weight + int64_t(ids[n]) * C, C, out + n * C);
}

// dweight = 0, then dweight[ids[n], :] += dy[n, :]. Ids repeat, so threads
// split the columns, not the rows: each owns a block of columns of every row
// of dweight and sums into it in id order (race-free and deterministic).
template <class T>
void embedding_backward(const T* dy, const int32_t* ids, T* dweight, int64_t N, int64_t V,
                        int64_t C, bool accumulate) {
  if (accumulate) {  // dweight += the sum, taken on its own first
    std::vector<T> sum(size_t(V * C));  // [V, C]
    embedding_backward(dy, ids, sum.data(), N, V, C, false);
    for (int64_t i = 0; i < V * C; ++i) dweight[i] += sum[size_t(i)];
    return;
  }
  constexpr int64_t kBlock = 32;  // columns per thread task
  int64_t blocks = (C + kBlock - 1) / kBlock;
  std::fill_n(dweight, V * C, T(0));
  LINA_PARALLEL_FOR_IF(N * C > kParallelMin && blocks > 1)
  for (int64_t b = 0; b < blocks; ++b) {
    int64_t c0 = b * kBlock, c1 = std::min(C, c0 + kBlock);
    for (int64_t n = 0; n < N; ++n) {
      const T* src = dy + n * C;
      T* dst = dweight + int64_t(ids[n]) * C;
      for (int64_t c = c0; c < c1; ++c) dst[c] += src[c];
    }
  }
}

// ---- argmax -------------------------------------------------------------------------
// out[r] = the first j with x[r, j] = max_j x[r, j]
template <class T>
void argmax_last(const T* x, int32_t* out, int64_t R, int64_t N) {
  LINA_PARALLEL_FOR_IF(R * N > kParallelMin)
  for (int64_t r = 0; r < R; ++r) {
    const T* xr = x + r * N;
    out[r] = int32_t(std::max_element(xr, xr + N) - xr);  // first of equal maxima
  }
}

LINA_INSTANTIATE_CPU_KERNELS(SOFTMAX_LOSS)  // float and double, from core/op_list.h

}  // namespace lina::cpu
