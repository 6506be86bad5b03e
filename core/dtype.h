// Element types and devices.
//   f32 — what models train in, on CPU and CUDA.
//   f64 — CPU only; gradient checks run in it.
//   i32 — token ids and targets (no gradient).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace lina {

enum class DType { f32, f64, i32 };
enum class Device { cpu, cuda };

inline size_t dtype_size(DType t) { return t == DType::f64 ? 8 : 4; }
inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::f64: return "float64";
    case DType::i32: return "int32";
  }
  return "?";
}
inline const char* device_name(Device d) {
  switch (d) {
    case Device::cpu: return "cpu";
    case Device::cuda: return "cuda";
  }
  return "?";
}
inline bool is_float(DType t) { return t == DType::f32 || t == DType::f64; }

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }

}  // namespace lina
