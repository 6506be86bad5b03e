// The simulator's host API: errors, the device and its properties, streams
// and events, copies, and the queue that holds all of it until the host
// synchronises.
//
// One FIFO holds the work of every stream. That is one valid order of
// CUDA's semantics (work on one stream runs in order; nothing is promised
// between streams), and it makes a stream-ordered free safe at once: all
// later work is queued after it.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cuda_sim/control.h"
#include "cuda_sim/runtime.h"

namespace cuda_sim {

namespace {

// ---- errors ----
cudaError_t g_last = cudaSuccess;    // non-sticky: cleared by cudaGetLastError
cudaError_t g_sticky = cudaSuccess;  // a failed kernel: stays
std::map<int, std::string>& details() {  // the latest explanation of each error code
  static auto* d = new std::map<int, std::string>();
  return *d;
}

// ---- the device: an H200's numbers ----
constexpr int kSMs = 132;
constexpr int kSharedDefault = 48 * 1024;
constexpr int kSharedOptin = 227 * 1024;
constexpr int kMaxThreads = 1024;

std::map<const void*, int>& dynamic_shared_limits() {  // cudaFuncSetAttribute, per kernel
  static auto* m = new std::map<const void*, int>();
  return *m;
}

// ---- the queue ----
std::deque<std::function<void()>>& queue() {
  static auto* q = new std::deque<std::function<void()>>();
  return *q;
}
bool g_flushing = false;

Counters g_counters;

bool launch_blocking() {
  static const bool on = [] {
    const char* env = std::getenv("CUDA_LAUNCH_BLOCKING");
    return env && std::strcmp(env, "1") == 0;
  }();
  return on;
}

}  // namespace

}  // namespace cuda_sim

struct CUevent_st {
  std::chrono::steady_clock::time_point when{};
  bool recorded = false;
};
struct CUmemPool_st {
  uint64_t release_threshold = 0;
};

namespace cuda_sim {

void set_launch_error(cudaError_t err, const std::string& detail) {
  if (g_last == cudaSuccess) g_last = err;
  details()[int(err)] = detail;
  if (std::getenv("LINA_CUDA_SIM_VERBOSE")) std::fprintf(stderr, "cuda-sim: %s\n", detail.c_str());
}

void set_sticky_error(cudaError_t err, const std::string& detail) {
  if (g_sticky == cudaSuccess) g_sticky = err;
  details()[int(err)] = detail;
  std::fprintf(stderr, "cuda-sim: %s\n", detail.c_str());
}

cudaError_t sticky_error() { return g_sticky; }

void enqueue(std::function<void()> work) {
  queue().push_back(std::move(work));
  if (launch_blocking()) flush();
}

void submit(CUstream_st* stream, Work work) {
  if (capturing(stream)) return record(stream, std::move(work));
  if (work.on_queue) work.on_queue();
  if (work.type == cudaGraphNodeTypeKernel) g_counters.kernel_launches++;
  if (work.device_to_host) g_counters.device_to_host_copies++;
  enqueue(std::move(work.run));
}

void count_allocation() { g_counters.allocations++; }
void count_graph_launch() { g_counters.graph_launches++; }
Counters counters() { return g_counters; }

void flush() {
  if (g_flushing) return;
  g_flushing = true;
  set_device_access(true);
  while (!queue().empty()) {
    std::function<void()> work = std::move(queue().front());
    queue().pop_front();
    if (g_sticky == cudaSuccess) work();  // after a failed kernel the rest is dropped
  }
  set_device_access(false);
  g_flushing = false;
}

bool check_pointer_argument(const char* kernel, int index, const void* ptr) {
  if (ptr == nullptr) return true;
  const Allocation* a = find_allocation(ptr);
  if (a != nullptr && a->live) return true;
  char address[32];
  std::snprintf(address, sizeof address, "%p", ptr);
  set_launch_error(cudaErrorInvalidValue,
                   std::string("kernel '") + kernel + "', argument " + std::to_string(index) + ": " +
                       address +
                       (a != nullptr ? " is device memory that was already freed"
                                     : " is not device memory (a host pointer?)"));
  return false;
}

void enqueue_launch(const char* kernel, const void* func, dim3 grid, dim3 block, size_t shared_bytes,
                    CUstream_st* stream, KernelBody* body) {
  std::unique_ptr<KernelBody> owned(body);
  const std::string name = std::string("kernel '") + kernel + "'";
  const uint64_t threads = uint64_t(block.x) * block.y * block.z;
  if (grid.x == 0 || grid.y == 0 || grid.z == 0)
    return set_launch_error(cudaErrorInvalidConfiguration, name + ": an empty grid (" +
                                                               std::to_string(grid.x) + " × " +
                                                               std::to_string(grid.y) + " × " +
                                                               std::to_string(grid.z) + " blocks)");
  if (threads == 0 || threads > uint64_t(kMaxThreads) || block.z > 64)
    return set_launch_error(cudaErrorInvalidConfiguration,
                            name + ": " + std::to_string(threads) + " threads per block, at most " +
                                std::to_string(kMaxThreads));
  if (grid.y > 65535 || grid.z > 65535 || grid.x > 2147483647u)
    return set_launch_error(cudaErrorInvalidConfiguration, name + ": grid too large");
  auto limit = dynamic_shared_limits().find(func);
  const size_t allowed = limit != dynamic_shared_limits().end() ? size_t(limit->second) : kSharedDefault;
  if (shared_bytes > allowed)
    return set_launch_error(cudaErrorInvalidValue,
                            name + ": " + std::to_string(shared_bytes) + " bytes of dynamic shared memory, " +
                                std::to_string(allowed) +
                                (allowed == size_t(kSharedDefault)
                                     ? " without cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize)"
                                     : " allowed by cudaFuncSetAttribute"));
  if (g_sticky != cudaSuccess) return;
  std::shared_ptr<KernelBody> shared(owned.release());
  Work work;
  work.run = [kernel, grid, block, shared_bytes, shared] { run_grid(kernel, grid, block, shared_bytes, *shared); };
  work.check = [kernel, shared] { return shared->check_arguments(kernel) ? cudaSuccess : cudaErrorInvalidValue; };
  submit(stream, std::move(work));
}

cudaError_t func_set_attribute(const void* func, cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 || value > kSharedOptin) {
    set_launch_error(cudaErrorInvalidValue, "cudaFuncSetAttribute: " + std::to_string(value) +
                                                " bytes of dynamic shared memory, at most " +
                                                std::to_string(kSharedOptin));
    return cudaErrorInvalidValue;
  }
  dynamic_shared_limits()[func] = value;
  return cudaSuccess;
}

}  // namespace cuda_sim

using namespace cuda_sim;

// ---- errors ----
const char* cudaGetErrorName(cudaError_t err) {
  switch (err) {
#define CUDA_SIM_NAME(e) case e: return #e;
    CUDA_SIM_NAME(cudaSuccess)
    CUDA_SIM_NAME(cudaErrorInvalidValue)
    CUDA_SIM_NAME(cudaErrorMemoryAllocation)
    CUDA_SIM_NAME(cudaErrorInitializationError)
    CUDA_SIM_NAME(cudaErrorCudartUnloading)
    CUDA_SIM_NAME(cudaErrorInvalidConfiguration)
    CUDA_SIM_NAME(cudaErrorInvalidDevicePointer)
    CUDA_SIM_NAME(cudaErrorInvalidResourceHandle)
    CUDA_SIM_NAME(cudaErrorDevicesUnavailable)
    CUDA_SIM_NAME(cudaErrorNoDevice)
    CUDA_SIM_NAME(cudaErrorInvalidDevice)
    CUDA_SIM_NAME(cudaErrorECCUncorrectable)
    CUDA_SIM_NAME(cudaErrorNotReady)
    CUDA_SIM_NAME(cudaErrorIllegalAddress)
    CUDA_SIM_NAME(cudaErrorLaunchOutOfResources)
    CUDA_SIM_NAME(cudaErrorLaunchTimeout)
    CUDA_SIM_NAME(cudaErrorContextIsDestroyed)
    CUDA_SIM_NAME(cudaErrorHardwareStackError)
    CUDA_SIM_NAME(cudaErrorIllegalInstruction)
    CUDA_SIM_NAME(cudaErrorMisalignedAddress)
    CUDA_SIM_NAME(cudaErrorLaunchFailure)
    CUDA_SIM_NAME(cudaErrorIllegalState)
    CUDA_SIM_NAME(cudaErrorStreamCaptureUnsupported)
    CUDA_SIM_NAME(cudaErrorStreamCaptureInvalidated)
    CUDA_SIM_NAME(cudaErrorUnknown)
#undef CUDA_SIM_NAME
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t err) {
  auto it = details().find(int(err));
  if (it != details().end()) return it->second.c_str();
  switch (err) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    default: return cudaGetErrorName(err);
  }
}

cudaError_t cudaGetLastError() {
  if (g_sticky != cudaSuccess) return g_sticky;
  cudaError_t err = g_last;
  g_last = cudaSuccess;
  return err;
}

cudaError_t cudaPeekAtLastError() { return g_sticky != cudaSuccess ? g_sticky : g_last; }

// ---- the device ----
cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudaErrorInvalidDevice; }

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return cudaErrorInvalidDevice;
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "NVIDIA H200 (lina cuda-sim, on the CPU)");
  prop->totalGlobalMem = size_t(141) << 30;
  prop->sharedMemPerBlock = kSharedDefault;
  prop->sharedMemPerBlockOptin = kSharedOptin;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = kMaxThreads;
  prop->maxThreadsDim[0] = 1024, prop->maxThreadsDim[1] = 1024, prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 2147483647, prop->maxGridSize[1] = 65535, prop->maxGridSize[2] = 65535;
  prop->multiProcessorCount = kSMs;
  prop->major = 9, prop->minor = 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (device != 0) return cudaErrorInvalidDevice;
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = kMaxThreads; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = kSharedDefault; return cudaSuccess;
    case cudaDevAttrWarpSize: *value = 32; return cudaSuccess;
    case cudaDevAttrMultiProcessorCount: *value = kSMs; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = kSharedOptin; return cudaSuccess;
    case cudaDevAttrMemoryPoolsSupported: *value = 1; return cudaSuccess;
  }
  return cudaErrorInvalidValue;
}

cudaError_t cudaDeviceSynchronize() {
  if (cudaError_t err = refuse_during_capture(CaptureRule::WaitsForDevice, nullptr, "cudaDeviceSynchronize"))
    return err;
  flush();
  return g_sticky;
}

cudaError_t cudaDeviceReset() {
  queue().clear();
  end_all_captures();
  release_all_memory();
  dynamic_shared_limits().clear();
  g_sticky = g_last = cudaSuccess;
  details().clear();
  return cudaSuccess;
}

// ---- streams and events ----
cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  static int next = 1;
  *stream = new CUstream_st{next++};
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (cudaError_t err = refuse_during_capture(CaptureRule::OnCapturingStream, stream, "cudaStreamDestroy"))
    return err;
  flush();
  delete stream;
  return g_sticky;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (cudaError_t err = refuse_during_capture(CaptureRule::OnCapturingStream, stream, "cudaStreamSynchronize"))
    return err;
  flush();
  return g_sticky;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  *event = new CUevent_st();
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (g_sticky) return g_sticky;
  if (cudaError_t err = refuse_during_capture(CaptureRule::OnCapturingStream, stream,
                                              "cudaEventRecord (captured events are not simulated)"))
    return err;
  event->recorded = false;
  Work work;
  work.type = cudaGraphNodeTypeEventRecord;
  work.run = [event] {
    event->when = std::chrono::steady_clock::now();
    event->recorded = true;
  };
  submit(stream, std::move(work));
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t) {
  flush();
  return g_sticky;
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!start->recorded || !end->recorded) return cudaErrorNotReady;
  *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
  return cudaSuccess;
}

// ---- copies ----
namespace {

// A device range the copy touches must lie inside one live allocation.
cudaError_t check_device_range(const void* ptr, size_t bytes, const char* what) {
  const Allocation* a = find_allocation(ptr);
  if (a != nullptr && a->live && static_cast<const char*>(ptr) + bytes <= a->base + a->bytes)
    return cudaSuccess;
  char address[32];
  std::snprintf(address, sizeof address, "%p", ptr);
  details()[int(cudaErrorInvalidValue)] =
                   std::string(what) + ": " + std::to_string(bytes) + " bytes at " + address +
                       (a == nullptr ? " are not device memory"
                        : !a->live   ? " are in freed device memory"
                                     : " run past the end of a " + std::to_string(a->bytes) +
                                           "-byte allocation");
  return cudaErrorInvalidValue;
}

// The work of one copy whose ranges have been checked.
Work copy_work(CUstream_st* stream, void* dst, const void* src, size_t bytes, bool src_device, bool dst_device) {
  Work work;
  work.type = cudaGraphNodeTypeMemcpy;
  work.check = [=] {
    if (src_device)
      if (cudaError_t err = check_device_range(src, bytes, "cudaMemcpy source")) return err;
    return dst_device ? check_device_range(dst, bytes, "cudaMemcpy destination") : cudaSuccess;
  };
  if (!src_device && !capturing(stream)) {
    // From the host: the data is taken now (the host may reuse its buffer).
    auto staged = std::make_shared<std::vector<char>>(static_cast<const char*>(src),
                                                      static_cast<const char*>(src) + bytes);
    work.run = [dst, staged] { std::memcpy(dst, staged->data(), staged->size()); };
  } else {
    // A captured copy from the host keeps the pointer, as CUDA's graph node
    // does: each replay reads the buffer as it is when the copy runs.
    work.run = [dst, src, bytes] { std::memmove(dst, src, bytes); };
  }
  if (src_device && !dst_device) {
    // To the host: written when the stream runs. Until then the host buffer
    // holds NaN bytes, so a read before the synchronisation is visibly wrong.
    work.on_queue = [dst, bytes] { std::memset(dst, 0xFF, bytes); };
    work.device_to_host = true;
  }
  return work;
}

cudaError_t queue_copy(CUstream_st* stream, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (g_sticky) return g_sticky;
  if (bytes == 0) return cudaSuccess;
  if (kind == cudaMemcpyDefault)
    kind = find_allocation(src) ? (find_allocation(dst) ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
                                : (find_allocation(dst) ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
  const bool src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  const bool dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  if (src_device) {
    if (cudaError_t err = check_device_range(src, bytes, "cudaMemcpy source")) return err;
  } else if (find_allocation(src)) {
    return cudaErrorInvalidValue;  // a device pointer where the kind says host
  }
  if (dst_device) {
    if (cudaError_t err = check_device_range(dst, bytes, "cudaMemcpy destination")) return err;
  } else if (find_allocation(dst)) {
    return cudaErrorInvalidValue;
  }
  submit(stream, copy_work(stream, dst, src, bytes, src_device, dst_device));
  return cudaSuccess;
}

}  // namespace

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  return queue_copy(stream, dst, src, bytes, kind);
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (cudaError_t err = refuse_during_capture(CaptureRule::WaitsForDevice, nullptr, "cudaMemcpy (synchronous)"))
    return err;
  if (cudaError_t err = queue_copy(nullptr, dst, src, bytes, kind)) return err;
  flush();
  return g_sticky;
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
  if (g_sticky) return g_sticky;
  if (bytes == 0) return cudaSuccess;
  if (cudaError_t err = check_device_range(ptr, bytes, "cudaMemset")) return err;
  Work work;
  work.type = cudaGraphNodeTypeMemset;
  work.run = [ptr, value, bytes] { std::memset(ptr, value, bytes); };
  work.check = [ptr, bytes] { return check_device_range(ptr, bytes, "cudaMemset"); };
  submit(stream, std::move(work));
  return cudaSuccess;
}

cudaError_t cudaMemset(void* ptr, int value, size_t bytes) {
  if (cudaError_t err = refuse_during_capture(CaptureRule::WaitsForDevice, nullptr, "cudaMemset (synchronous)"))
    return err;
  if (cudaError_t err = cudaMemsetAsync(ptr, value, bytes, nullptr)) return err;
  flush();
  return g_sticky;
}

// ---- the pool ----
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) {
  static CUmemPool_st the_pool;
  if (device != 0) return cudaErrorInvalidDevice;
  *pool = &the_pool;
  return cudaSuccess;
}
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) {
  if (attr != cudaMemPoolAttrReleaseThreshold) return cudaErrorInvalidValue;
  pool->release_threshold = *static_cast<uint64_t*>(value);
  return cudaSuccess;
}
cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) {
  switch (attr) {
    case cudaMemPoolAttrReleaseThreshold: *static_cast<uint64_t*>(value) = pool->release_threshold; break;
    case cudaMemPoolAttrReservedMemCurrent: *static_cast<uint64_t*>(value) = pool_reserved_bytes(); break;
    case cudaMemPoolAttrUsedMemCurrent: *static_cast<uint64_t*>(value) = pool_used_bytes(); break;
  }
  return cudaSuccess;
}
