#include "core/device_memory.h"

#include <vector>

#include "core/error.h"

namespace lina {

namespace {

// Zero-initialised before any static object's constructor runs, so a
// backend may install itself from one in any order.
const DeviceMemory* g_installed[2] = {};

// The switch names every Device and has no default: a new device is a
// compile error (-Werror=switch) until it has a slot here.
const DeviceMemory*& slot(Device device) {
  switch (device) {
    case Device::Cpu: return g_installed[0];
    case Device::Cuda: return g_installed[1];
  }
  throw Error("device_memory: not a device");  // not reached
}

}  // namespace

const DeviceMemory* install_device_memory(Device device, const DeviceMemory* memory) {
  const DeviceMemory* previous = slot(device);
  slot(device) = memory;
  return previous;
}

const DeviceMemory& device_memory(Device device) {
  const DeviceMemory* memory = slot(device);
  if (memory == nullptr)
    throw Error(std::string("no backend for device ") + device_name(device) +
                " is linked into this program (lina_backend_" + device_name(device) +
                " installs it when linked whole: CMakeLists.txt)");
  return *memory;
}

void require_device(Device device) {
  const DeviceMemory& memory = device_memory(device);
  if (!memory.available()) throw Error(memory.unavailable_reason());
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return;
  if (dst_device == src_device) {
    device_memory(dst_device).copy_on_device(dst, src, bytes);
  } else if (src_device == Device::Cpu) {
    device_memory(dst_device).copy_from_host(dst, src, bytes);
  } else if (dst_device == Device::Cpu) {
    device_memory(src_device).copy_to_host(dst, src, bytes);
  } else {  // between two devices, neither the host: through the host
    std::vector<unsigned char> host(bytes);
    device_memory(src_device).copy_to_host(host.data(), src, bytes);
    device_memory(dst_device).copy_from_host(dst, host.data(), bytes);
  }
}

}  // namespace lina
