// Elementwise CPU kernels, and dropout. The per-element maths lives in
// core/elementwise_math.h, shared with the CUDA kernels.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "backend_cpu/cpu_kernels.h"
#include "backend_cpu/parallel.h"
#include "backend_cpu/unary_fast.h"

namespace lina::cpu {

template <class T>
void fill(T* x, int64_t n, T value) {
  LINA_PARALLEL_FOR_IF(n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) x[i] = value;
}

template <class T>
void dropout_apply(const T* x, T* y, int64_t n, const DropoutKey& key) {
  LINA_PARALLEL_FOR_IF(n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * dropout_factor<T>(key, i);
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

template <class T>
void swiglu_forward(const T* gate, const T* up, T* y, int64_t n) {
  const int64_t blocks = (n + kSwigluBlock - 1) / kSwigluBlock;
  LINA_PARALLEL_FOR_IF(n > kParallelMin)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t o = b * kSwigluBlock, m = std::min(kSwigluBlock, n - o);
    silu_block(gate + o, y + o, m);                      // y = silu(gate)
    for (int64_t i = o; i < o + m; ++i) y[i] *= up[i];   // ⊙ up
  }
}

template <class T>
void swiglu_backward(const T* gate, const T* up, const T* dy, T* dgate, T* dup, int64_t n) {
  const int64_t blocks = (n + kSwigluBlock - 1) / kSwigluBlock;
  LINA_PARALLEL_FOR_IF(n > kParallelMin)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t o = b * kSwigluBlock, m = std::min(kSwigluBlock, n - o);
    swiglu_backward_block(gate + o, up + o, dy + o, dgate + o, dup + o, m);
  }
}

LINA_INSTANTIATE_CPU_KERNELS(ELEMENTWISE)  // float and double, from core/op_list.h
template void fill<int32_t>(int32_t*, int64_t, int32_t);

}  // namespace lina::cpu
