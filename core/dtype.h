// Element types and devices.
//   f32 — what models train in, on CPU and CUDA.
//   f64 — CPU only; gradient checks run in it.
//   i32 — token ids and targets (no gradient).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace lina {

enum class DType { F32, F64, I32 };
enum class Device { Cpu, Cuda };

inline size_t dtype_size(DType t) { return t == DType::F64 ? 8 : 4; }
inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "float32";
    case DType::F64: return "float64";
    case DType::I32: return "int32";
  }
  return "?";
}
inline const char* device_name(Device d) {
  switch (d) {
    case Device::Cpu: return "cpu";
    case Device::Cuda: return "cuda";
  }
  return "?";
}
inline bool is_float(DType t) { return t == DType::F32 || t == DType::F64; }

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::F32; }
template <> constexpr DType dtype_of<double>() { return DType::F64; }
template <> constexpr DType dtype_of<int32_t>() { return DType::I32; }

}  // namespace lina
