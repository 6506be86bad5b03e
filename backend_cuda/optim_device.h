// The per-thread work of the CUDA optimiser kernels (backend_cuda/optim.cu):
// the AdamW update and the in-place scale of gradient clipping, one element
// per thread. Same formulas as backend_cpu/optim.cpp, which the op × device
// table compares them with.
#pragma once
#include <array>
#include <cmath>
#include <cstdint>

#include "core/elementwise_math.h"

namespace lina::cuda {

// One AdamW update's arguments. Its per-update numbers stay in device memory
// (scalars, control: core/op_list.h), so that a replayed graph reads each
// update's own.
struct AdamWArgs {
  float* p;        // [n] parameters, updated
  const float* g;  // [n] gradient
  float* m;        // [n] first moment, updated
  float* v;        // [n] second moment, updated
  const float* weight_decay_mask;  // [n] 1 where weight decay applies, 0 where not; null: everywhere
  int64_t n;
  float beta1, beta2, eps;
  const float* scalars;    // [3] 1 − lr·weight_decay, lr / bias_correction1, √bias_correction2
  const int32_t* control;  // null, or an update plan's [3]: no update while control[2] ≠ 0
  const double* sum_of_squares;  // null, or Σ g² [1]: with max_norm > 0, g is clipped on the way
  double max_norm;
  std::array<const void*, 8> device_pointers() const {
    return {p, g, m, v, weight_decay_mask, scalars, control, sum_of_squares};
  }
  // The factor every g is read with: min(1, max_norm / (‖g‖ + 1e-6)), or 1.
  LINA_HD float clip() const {
    return sum_of_squares ? float(math::clip_factor(*sum_of_squares, max_norm)) : 1.0f;
  }
};

// PyTorch's AdamW (single-tensor form) for element i, g clipped by `clip`:
//   m ← β1 m + (1 − β1) g,  v ← β2 v + (1 − β2) g²
//   p ← p·(1 − lr·wd) − (lr / bc1) · m / (√v / √bc2 + eps)
LINA_HD void adamw_thread(int64_t i, const AdamWArgs& a, float clip) {
  const float decay_factor = a.scalars[0], step_size = a.scalars[1], bias_correction2_sqrt = a.scalars[2];
  const float gi = a.g[i] * clip;
  const float mi = a.beta1 * a.m[i] + (1.0f - a.beta1) * gi;
  const float vi = a.beta2 * a.v[i] + (1.0f - a.beta2) * gi * gi;
  a.m[i] = mi;
  a.v[i] = vi;
  const float denom = ::sqrtf(vi) / bias_correction2_sqrt + a.eps;
  const float decay = a.weight_decay_mask == nullptr || a.weight_decay_mask[i] != 0.0f ? decay_factor : 1.0f;
  a.p[i] = a.p[i] * decay - step_size * mi / denom;
}

// x[i] *= factor
LINA_HD void scale_thread(int64_t i, float* x, float factor) { x[i] *= factor; }

// Gradient clipping: every thread computes the factor from Σ g² (read from
// device memory) the way the CPU does, in double, and scales its element
// when the factor is below 1.
LINA_HD void clip_to_norm_thread(int64_t i, float* x, const double* sum_of_squares, double max_norm) {
  const double factor = math::clip_factor(*sum_of_squares, max_norm);
  if (factor < 1.0) x[i] *= float(factor);
}

}  // namespace lina::cuda
