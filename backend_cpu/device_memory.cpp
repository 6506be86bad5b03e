// The host's DeviceMemory (core/device_memory.h): the caching allocator
// (host_allocator.h), memcpy and the CPU fill kernel. Installed from the
// static object at the end while the program starts (the library is linked
// whole: CMakeLists.txt).
#include <cstring>
#include <string>

#include "backend_cpu/cpu_kernels.h"
#include "backend_cpu/host_allocator.h"
#include "core/device_memory.h"
#include "core/tensor.h"

namespace lina::cpu {

namespace {

void copy(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }

void fill_tensor(Tensor& t, double value) {
  switch (t.dtype()) {
    case DType::F32: fill<float>(t.data<float>(), t.numel(), float(value)); return;
    case DType::F64: fill<double>(t.data<double>(), t.numel(), value); return;
    case DType::I32: fill<int32_t>(t.data<int32_t>(), t.numel(), int32_t(value)); return;
  }
}

const DeviceMemory kHostMemory{
    [] { return true; },
    [] { return std::string(); },
    host_alloc,
    host_free,
    copy,
    copy,
    copy,
    fill_tensor,
};

struct Install {
  Install() { install_device_memory(Device::Cpu, &kHostMemory); }
} install;

}  // namespace

}  // namespace lina::cpu
