// How core/ reaches a device: allocate, free, copy, fill, and whether the
// device can be used at all. core/ knows no backend. Each backend library
// fills one DeviceMemory for its device (backend_cpu/device_memory.cpp,
// backend_cuda/device_memory.cpp) and installs it from a static object when
// the program starts, before main; CMakeLists.txt links the backend libraries
// whole, so that object is in every program that links them. Storage and
// Tensor (core/tensor.cpp) go through these functions only.
//
// A device whose backend is not linked in is a one-line lina::Error at the
// first tensor made on it ("no backend for device cpu is linked into this
// program"), never a null call.
#pragma once
#include <cstddef>
#include <string>

#include "core/dtype.h"

namespace lina {

class Tensor;

// One device's memory, as its backend provides it. Every pointer is set.
struct DeviceMemory {
  // Whether the device can be used in this process; when not, why (one line:
  // "CUDA was requested but no CUDA GPU is available (...)").
  bool (*available)();
  std::string (*unavailable_reason)();
  // `bytes` > 0; never returns null: throws a lina::Error when out of memory.
  void* (*alloc)(size_t bytes);
  void (*free)(void* ptr);  // ptr from alloc
  // Bytes between this device and the host, and within this device.
  void (*copy_from_host)(void* dst, const void* src, size_t bytes);
  void (*copy_to_host)(void* dst, const void* src, size_t bytes);
  void (*copy_on_device)(void* dst, const void* src, size_t bytes);
  // Sets every element of t (a tensor on this device, any dtype) to value,
  // or throws a one-line error naming t when the device has no such fill.
  void (*fill)(Tensor& t, double value);
};

// Makes `memory` the one `device` uses (nullptr: none) and returns the one
// it used before. The backends call it while the program starts.
const DeviceMemory* install_device_memory(Device device, const DeviceMemory* memory);
// The memory installed for `device`; throws when no backend installed one.
const DeviceMemory& device_memory(Device device);
// Throws a one-line error unless tensors can be made on `device` here.
void require_device(Device device);
// Copies `bytes` from src on src_device to dst on dst_device.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);

}  // namespace lina
