// core/device_memory.h: the backends install their devices' memory before
// main; Tensor allocates, copies and fills through it; a device whose
// backend is missing is a one-line error.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/device_memory.h"
#include "core/tensor.h"

using namespace lina;

namespace {

// Puts `memory` in place for `device` for its lifetime, then what was there.
struct Installed {
  Installed(Device device, const DeviceMemory* memory)
      : device(device), previous(install_device_memory(device, memory)) {}
  ~Installed() { install_device_memory(device, previous); }
  Device device;
  const DeviceMemory* previous;
};

// A device in host memory that counts what core/ asks of it.
struct Calls {
  int alloc = 0, free = 0, from_host = 0, to_host = 0, on_device = 0, fill = 0;
};
Calls g_calls;

const DeviceMemory kCountingMemory{
    [] { return true; },
    [] { return std::string(); },
    [](size_t bytes) { ++g_calls.alloc; return std::malloc(bytes); },
    [](void* ptr) { ++g_calls.free; std::free(ptr); },
    [](void* dst, const void* src, size_t bytes) { ++g_calls.from_host; std::memcpy(dst, src, bytes); },
    [](void* dst, const void* src, size_t bytes) { ++g_calls.to_host; std::memcpy(dst, src, bytes); },
    [](void* dst, const void* src, size_t bytes) { ++g_calls.on_device; std::memcpy(dst, src, bytes); },
    [](Tensor& t, double value) {
      ++g_calls.fill;
      float* p = static_cast<float*>(t.raw());
      for (int64_t i = 0; i < t.numel(); ++i) p[i] = float(value);
    },
};

}  // namespace

TEST_CASE("device memory: both backends installed theirs before main") {
  CHECK(device_memory(Device::Cpu).available());
  // installed with or without CUDA; without a GPU it says why it cannot be used
  const DeviceMemory& cuda = device_memory(Device::Cuda);
  if (!cuda.available())
    CHECK(cuda.unavailable_reason().rfind("CUDA was requested but no CUDA GPU is available (", 0) == 0);
}

TEST_CASE("device memory: Tensor allocates, copies and fills through the device's backend") {
  g_calls = {};
  {
    Installed counting(Device::Cuda, &kCountingMemory);
    Tensor t = Tensor::full({3}, 2.5, DType::F32, Device::Cuda);
    CHECK(g_calls.alloc == 1);
    CHECK(g_calls.fill == 1);
    CHECK(t.to_vector<float>() == std::vector<float>{2.5f, 2.5f, 2.5f});
    CHECK(g_calls.to_host == 1);
    Tensor back = Tensor::from_vector(std::vector<float>{1, 2, 3}, {3}).to(Device::Cuda);
    CHECK(g_calls.from_host == 1);
    Tensor copy = back.clone();
    CHECK(g_calls.on_device == 1);
    CHECK(copy.to(Device::Cpu).to_vector<float>() == std::vector<float>{1, 2, 3});
    CHECK(g_calls.alloc == 3);
  }
  CHECK(g_calls.free == 3);  // each buffer freed by the backend that made it
}

TEST_CASE("device memory: a device without a backend is a one-line error") {
  Installed none(Device::Cpu, nullptr);
  CHECK_THROWS_WITH_AS(Tensor::zeros({2}),
                       "no backend for device cpu is linked into this program (lina_backend_cpu "
                       "installs it when linked whole: CMakeLists.txt)",
                       Error);
}
