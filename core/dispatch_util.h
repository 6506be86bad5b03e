// Internal to the core/dispatch*.cpp files: dtype and device selection.
#pragma once
#include <string>

#include "core/tensor.h"

namespace lina::kernels::detail {

// Calls fn(float{}) or fn(double{}) for a float tensor; throws otherwise.
template <class Fn>
void with_float_type(const Tensor& t, const char* op, Fn&& fn) {
  switch (t.dtype()) {
    case DType::f32: fn(float{}); return;
    case DType::f64: fn(double{}); return;
    default: throw Error(std::string(op) + ": expected float32 or float64, got " + t.describe());
  }
}

// True for a CUDA tensor (which must be float32: the CUDA kernels are).
inline bool on_cuda(const Tensor& t, const char* op) {
  if (t.device() != Device::cuda) return false;
  if (t.dtype() != DType::f32)
    throw Error(std::string(op) + ": the CUDA backend supports float32 only, got " + t.describe());
  return true;
}

}  // namespace lina::kernels::detail
