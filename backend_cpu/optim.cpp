// Optimiser kernels: the AdamW update and the in-place scale used by
// gradient clipping. Both run once over a whole contiguous run of parameters.
#include <algorithm>
#include <cmath>

#include "backend_cpu/cpu_kernels.h"
#include "backend_cpu/parallel.h"

namespace lina::cpu {

// p, g, m, v: [n]. PyTorch's AdamW, term by term (see cpu_kernels.h):
//   p  ← p − lr·wd·p                         decoupled weight decay
//   m  ← β1 m + (1 − β1) g                   first moment
//   v  ← β2 v + (1 − β2) g²                  second moment
//   p  ← p − lr·m̂ / (√v̂ + eps)               m̂ = m / bc1, v̂ = v / bc2
// The last line is computed as (lr / bc1)·m / (√v / √bc2 + eps), as PyTorch does.
// With max_norm > 0, g is first clipped: g · min(1, max_norm / (‖g‖ + 1e-6)).
template <class T>
void adamw_step(T* p, const T* g, T* m, T* v, const T* weight_decay_mask, int64_t n, T beta1, T beta2,
                T eps, const T* scalars, const int32_t* control, const double* sum_of_squares,
                double max_norm) {
  if (control != nullptr && control[2] != 0) return;  // a refused update (end_update)
  const T decay_factor = scalars[0];           // 1 − lr·wd, where weight_decay_mask is 1 (or null)
  const T step_size = scalars[1];              // lr / bc1
  const T bias_correction2_sqrt = scalars[2];  // √bc2
  const T clip = sum_of_squares ? T(math::clip_factor(*sum_of_squares, max_norm)) : T(1);
  LINA_PARALLEL_FOR_IF(n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    T gi = g[i] * clip;
    m[i] = beta1 * m[i] + (T(1) - beta1) * gi;
    v[i] = beta2 * v[i] + (T(1) - beta2) * gi * gi;
    T denom = std::sqrt(v[i]) / bias_correction2_sqrt + eps;
    T decay = weight_decay_mask == nullptr || weight_decay_mask[i] != T(0) ? decay_factor : T(1);
    p[i] = p[i] * decay - step_size * m[i] / denom;
  }
}

// The update plan's bookkeeping (core/op_list.h): slot s's rows in, the
// loss and Σ g² out. One update's worth of copying, on the host here.
template <class T>
void begin_update(const T* scalar_table, T* scalars, const int32_t* ids_table, int32_t* ids,
                  int64_t ids_per_row, const T* mask_table, T* mask, int64_t mask_per_row,
                  const int32_t* control) {
  const int64_t s = control[0];
  std::copy_n(scalar_table + 3 * s, 3, scalars);
  std::copy_n(ids_table + s * ids_per_row, ids_per_row, ids);
  if (mask != nullptr) std::copy_n(mask_table + s * mask_per_row, mask_per_row, mask);
}

template <class T>
void end_update(const T* loss, const T* grad, int64_t n, double* sum_of_squares, double* log,
                int32_t* control) {
  sum_squares(grad, n, sum_of_squares);
  const int64_t s = control[0];
  log[2 * s] = double(*loss);
  log[2 * s + 1] = *sum_of_squares;
  if (control[2] == 0 && !(std::isfinite(log[2 * s]) && std::isfinite(log[2 * s + 1])))
    control[2] = control[1] + 1;
  control[0] += 1;
  control[1] += 1;
}

template <class T>
void scale_inplace(T* x, int64_t n, T factor) {
  LINA_PARALLEL_FOR_IF(n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) x[i] *= factor;
}

// The clip factor of clip_grad_norm (models/optim.h), from Σ g².
template <class T>
void clip_to_norm(T* x, int64_t n, const double* sum_of_squares, double max_norm) {
  const double factor = math::clip_factor(*sum_of_squares, max_norm);
  if (factor < 1.0) scale_inplace<T>(x, n, T(factor));
}

LINA_INSTANTIATE_CPU_KERNELS(OPTIM)  // float and double, from core/op_list.h

}  // namespace lina::cpu
