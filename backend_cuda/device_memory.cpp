// The CUDA device's DeviceMemory (core/device_memory.h), on the functions of
// memory.cu (or of stub.cpp, built without CUDA, where the device is never
// available). Installed from the static object at the end while the program
// starts (the library is linked whole: CMakeLists.txt).
#include <string>

#include "backend_cuda/cuda_kernels.h"
#include "core/device_memory.h"
#include "core/tensor.h"

namespace lina::cuda {

namespace {

bool available() { return device_count() > 0; }

std::string unavailable_reason() {
  return std::string("CUDA was requested but no CUDA GPU is available (") +
         (device_count() < 0 ? "lina was built without CUDA" : "no device found") + ")";
}

void copy_from_host(void* dst, const void* src, size_t bytes) { copy(dst, src, bytes, CopyKind::HostToDevice); }
void copy_to_host(void* dst, const void* src, size_t bytes) { copy(dst, src, bytes, CopyKind::DeviceToHost); }
void copy_on_device(void* dst, const void* src, size_t bytes) { copy(dst, src, bytes, CopyKind::DeviceToDevice); }

// The CUDA kernels are float32 (token ids: int32).
void fill_tensor(Tensor& t, double value) {
  switch (t.dtype()) {
    case DType::F32: fill(t.data<float>(), t.numel(), float(value)); return;
    case DType::I32: fill_i32(t.data<int32_t>(), t.numel(), int32_t(value)); return;
    case DType::F64: break;
  }
  throw Error("fill: the CUDA backend supports float32 only, got " + t.describe());
}

const DeviceMemory kCudaMemory{
    available,
    unavailable_reason,
    alloc,
    free,
    copy_from_host,
    copy_to_host,
    copy_on_device,
    fill_tensor,
};

struct Install {
  Install() { install_device_memory(Device::Cuda, &kCudaMemory); }
} install;

}  // namespace

}  // namespace lina::cuda
