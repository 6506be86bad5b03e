// Elementwise CPU kernels, and dropout. The per-element maths lives in
// core/elementwise_math.h, shared with the CUDA kernels.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "backend_cpu/cpu_kernels.h"
#include "backend_cpu/dropout_mask.h"
#include "backend_cpu/parallel.h"
#include "backend_cpu/row_chunks.h"
#include "backend_cpu/unary_fast.h"

namespace lina::cpu {

template <class T>
void fill(T* x, int64_t n, T value) {
  LINA_PARALLEL_FOR_IF(n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) x[i] = value;
}

// In blocks of kDropoutBlock elements, each on one thread: the block's
// factors first (dropout_mask.h), on the stack, then y in one vectorised pass.
constexpr int64_t kDropoutBlock = 2048;

template <class T>
void dropout_apply(const T* x, const T* residual, T* y, int64_t n, const DropoutKey& key) {
  const int64_t blocks = (n + kDropoutBlock - 1) / kDropoutBlock;
  LINA_PARALLEL_FOR_IF(n > kParallelMin)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t first = b * kDropoutBlock, m = std::min(kDropoutBlock, n - first);
    T factor[kDropoutBlock];  // M of elements first … first + m − 1
    dropout_factors(key, first, m, factor);
    if (residual) {
      for (int64_t i = 0; i < m; ++i) y[first + i] = residual[first + i] + x[first + i] * factor[i];
    } else {
      for (int64_t i = 0; i < m; ++i) y[first + i] = x[first + i] * factor[i];
    }
  }
}

template <class T>
void unary_forward(UnaryFn f, const T* x, T* y, int64_t n, T p) {
  if constexpr (std::is_same_v<T, float>)
    if (unary_forward_fast(f, x, y, n, p)) return;  // vectorised (unary_fast.h)
  math::visit_unary(f, [&](auto fn) {
    using Fn = decltype(fn);
    LINA_PARALLEL_FOR_IF(n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) y[i] = Fn::forward(x[i], p);
  });
}

template <class T>
void unary_backward(UnaryFn f, const T* x, const T* y, const T* dy, T* dx, int64_t n, T p) {
  if constexpr (std::is_same_v<T, float>)
    if (unary_backward_fast(f, x, y, dy, dx, n, p)) return;  // vectorised (unary_fast.h)
  math::visit_unary(f, [&](auto fn) {
    using Fn = decltype(fn);
    LINA_PARALLEL_FOR_IF(n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) dx[i] = Fn::backward(x[i], y[i], dy[i], p);
  });
}

template <class T>
void binary(BinaryFn f, const T* a, const int64_t* a_strides, const T* b, const int64_t* b_strides,
            T* out, const int64_t* shape, int ndim) {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= shape[d];
  // The innermost dimension is handled by a tight loop; the outer ones by
  // an index counter (no division per element).
  int64_t inner = ndim ? shape[ndim - 1] : 1;
  int64_t sa = ndim ? a_strides[ndim - 1] : 0, sb = ndim ? b_strides[ndim - 1] : 0;
  int64_t rows = inner ? n / inner : 0;
  math::visit_binary(f, [&](auto fn) {
    using Fn = decltype(fn);
    LINA_PARALLEL_FOR_IF(n > kParallelMin)
    for (int64_t r = 0; r < rows; ++r) {
      // offsets of row r in a and b
      int64_t oa = 0, ob = 0, rem = r;
      for (int d = ndim - 2; d >= 0; --d) {
        int64_t i = rem % shape[d];
        rem /= shape[d];
        oa += i * a_strides[d];
        ob += i * b_strides[d];
      }
      T* o = out + r * inner;
      const T* pa = a + oa;
      const T* pb = b + ob;
      if (sa == 1 && sb == 1) {
        for (int64_t j = 0; j < inner; ++j) o[j] = Fn::apply(pa[j], pb[j]);
      } else {
        for (int64_t j = 0; j < inner; ++j) o[j] = Fn::apply(pa[j * sa], pb[j * sb]);
      }
    }
  });
}

template <class T>
void add_inplace(T* dst, const T* src, int64_t n, T alpha) {
  LINA_PARALLEL_FOR_IF(n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) dst[i] += alpha * src[i];
}

// ---- swiglu: y = silu(gate) ⊙ up --------------------------------------------------------
// In blocks of kSwigluBlock elements, each block on one thread: float's SiLU
// runs on Eigen's packet math (backend_cpu/unary_fast.h), double's is the
// scalar reference of core/elementwise_math.h.
namespace {

constexpr int64_t kSwigluBlock = 4096;

void silu_block(const float* x, float* y, int64_t m) { silu_forward_serial(x, y, m); }
void silu_block(const double* x, double* y, int64_t m) {
  for (int64_t i = 0; i < m; ++i) y[i] = math::Silu::forward(x[i], 0.0);
}

// dgate = dy ⊙ up ⊙ silu'(gate), dup = dy ⊙ silu(gate), σ(gate) formed once.
void swiglu_backward_block(const float* gate, const float* up, const float* dy, float* dgate,
                           float* dup, int64_t m) {
  float logistic[kSwigluBlock], dy_up[kSwigluBlock];  // σ(gate), dy ⊙ up
  silu_forward_keep_logistic_serial(gate, dup, logistic, m);  // dup = silu(gate)
  for (int64_t i = 0; i < m; ++i) dy_up[i] = dy[i] * up[i];
  silu_backward_from_logistic_serial(gate, logistic, dy_up, dgate, m);
  for (int64_t i = 0; i < m; ++i) dup[i] *= dy[i];
}

void swiglu_backward_block(const double* gate, const double* up, const double* dy, double* dgate,
                           double* dup, int64_t m) {
  for (int64_t i = 0; i < m; ++i) {
    dgate[i] = math::Silu::backward(gate[i], 0.0, dy[i] * up[i], 0.0);
    dup[i] = dy[i] * math::Silu::forward(gate[i], 0.0);
  }
}

}  // namespace

// Block b of the rows: row r = b / per_row, elements [o, o + m) of it.
struct SwigluBlock {
  int64_t row, o, m;
};
inline SwigluBlock swiglu_block(int64_t b, int64_t per_row, int64_t width) {
  const int64_t row = b / per_row, o = (b % per_row) * kSwigluBlock;
  return {row, o, std::min(kSwigluBlock, width - o)};
}

template <class T>
void swiglu_forward(const T* gate, const T* up, T* y, int64_t rows, int64_t width, int64_t stride) {
  const int64_t per_row = (width + kSwigluBlock - 1) / kSwigluBlock, blocks = rows * per_row;
  LINA_PARALLEL_FOR_IF(rows * width > kParallelMin)
  for (int64_t b = 0; b < blocks; ++b) {
    const SwigluBlock k = swiglu_block(b, per_row, width);
    const int64_t in = k.row * stride + k.o, out = k.row * width + k.o;
    silu_block(gate + in, y + out, k.m);                             // y = silu(gate)
    for (int64_t i = 0; i < k.m; ++i) y[out + i] *= up[in + i];      // ⊙ up
  }
}

template <class T>
void swiglu_backward(const T* gate, const T* up, const T* dy, T* dgate, T* dup, int64_t rows,
                     int64_t width, int64_t stride) {
  const int64_t per_row = (width + kSwigluBlock - 1) / kSwigluBlock, blocks = rows * per_row;
  LINA_PARALLEL_FOR_IF(rows * width > kParallelMin)
  for (int64_t b = 0; b < blocks; ++b) {
    const SwigluBlock k = swiglu_block(b, per_row, width);
    const int64_t in = k.row * stride + k.o, out = k.row * width + k.o;
    swiglu_backward_block(gate + in, up + in, dy + out, dgate + in, dup + in, k.m);
  }
}

// ---- beta_log_alpha: β = σ(z + b), log α = log σ(z + b), into two planes ----------------
// z [rows, ld] (the gates its last N columns), bias [N]; out: β [rows, n_beta], then log α [rows, N − n_beta]
// (math::BetaLogAlpha). The forward adds the bias into the planes, then runs
// σ and log σ over each plane in place: float32 on Eigen's packet math
// (unary_fast.h, the bits sigmoid and log_sigmoid give), float64 the scalar
// reference.
template <class T>
void beta_log_alpha_forward(const T* z, const T* bias, T* out, int64_t rows, int64_t N, int64_t ld,
                            int64_t n_beta) {
  using G = math::BetaLogAlpha;
  const int64_t n_alpha = N - n_beta;
  T* beta = out;                       // [rows, n_beta]
  T* log_alpha = out + rows * n_beta;  // [rows, n_alpha]
  LINA_PARALLEL_FOR_IF(rows * N > kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const T* zr = z + r * ld + (ld - N);  // the row's gates
    for (int64_t n = 0; n < n_beta; ++n) beta[r * n_beta + n] = zr[n] + bias[n];
    for (int64_t n = 0; n < n_alpha; ++n) log_alpha[r * n_alpha + n] = zr[n_beta + n] + bias[n_beta + n];
  }
  if constexpr (std::is_same_v<T, float>) {
    if (unary_forward_fast(UnaryFn::Sigmoid, beta, beta, rows * n_beta) &&
        unary_forward_fast(UnaryFn::LogSigmoid, log_alpha, log_alpha, rows * n_alpha))
      return;
  }
  LINA_PARALLEL_FOR_IF(rows * N > kParallelMin)
  for (int64_t i = 0; i < rows * N; ++i) out[i] = i < rows * n_beta ? G::beta(out[i]) : G::log_alpha(out[i]);
}

// In chunks of kRowsPerChunk rows, each chunk on one thread: dz (= or +=)
// row by row, and the chunk's Σ du per column into its own partial row; the
// partials are then added in chunk order, so dbias does not depend on the
// thread count (backend_cpu/row_chunks.h, as rms_norm's and the conv's dw).
template <class T>
void beta_log_alpha_backward(const T* out, const T* dout, T* dz, T* dbias, int64_t rows, int64_t N,
                             int64_t ld, int64_t n_beta, bool add_dz, bool add_dbias) {
  using G = math::BetaLogAlpha;
  const int64_t n_alpha = N - n_beta;
  const int64_t chunks = chunk_count(rows);
  std::vector<T> partial(size_t(chunks * N), T(0));  // [chunks, N]
  LINA_PARALLEL_FOR_IF(rows * N > kParallelMin)
  for (int64_t ch = 0; ch < chunks; ++ch) {
    T* p = partial.data() + ch * N;
    const int64_t end = std::min(rows, (ch + 1) * kRowsPerChunk);
    for (int64_t r = ch * kRowsPerChunk; r < end; ++r) {
      const T* beta = out + r * n_beta;
      const T* dbeta = dout + r * n_beta;
      const T* log_alpha = out + rows * n_beta + r * n_alpha;
      const T* dlog_alpha = dout + rows * n_beta + r * n_alpha;
      T* dzr = dz + r * ld + (ld - N);  // the row's gates
      for (int64_t n = 0; n < n_beta; ++n) {
        const T du = G::beta_backward(beta[n], dbeta[n]);
        dzr[n] = add_dz ? dzr[n] + du : du;
        p[n] += du;
      }
      for (int64_t n = 0; n < n_alpha; ++n) {
        const T du = G::log_alpha_backward(log_alpha[n], dlog_alpha[n]);
        dzr[n_beta + n] = add_dz ? dzr[n_beta + n] + du : du;
        p[n_beta + n] += du;
      }
    }
  }
  reduce_partials(partial, chunks, N, dbias, add_dbias);  // dbias (+)= Σ_chunk partial
}

LINA_INSTANTIATE_CPU_KERNELS(ELEMENTWISE)  // float and double, from core/op_list.h
template void fill<int32_t>(int32_t*, int64_t, int32_t);

}  // namespace lina::cpu
