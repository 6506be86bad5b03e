// Devices, memory and the one CUDA context.
//
// All work goes on the context's stream. Memory comes from the stream-ordered
// allocator (cudaMallocAsync), whose pool keeps freed blocks for reuse, so
// the many short-lived tensors of a training step cost no driver calls.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backend_cuda/cuda_context.h"
#include "backend_cuda/cuda_kernels.h"
#include "backend_cuda/softmax_loss_device.h"  // the index error word
#include "core/cuda_status.h"
#include "core/error.h"

namespace lina::cuda {

// core/cuda_status.h names these statuses without including CUDA's headers.
static_assert(cuda_status::kMemoryAllocation == cudaErrorMemoryAllocation);
static_assert(cuda_status::kInitializationError == cudaErrorInitializationError);
static_assert(cuda_status::kDevicesUnavailable == cudaErrorDevicesUnavailable);
static_assert(cuda_status::kNoDevice == cudaErrorNoDevice);
static_assert(cuda_status::kEccUncorrectable == cudaErrorECCUncorrectable);
static_assert(cuda_status::kIllegalAddress == cudaErrorIllegalAddress);
static_assert(cuda_status::kLaunchTimeout == cudaErrorLaunchTimeout);
static_assert(cuda_status::kContextIsDestroyed == cudaErrorContextIsDestroyed);
static_assert(cuda_status::kHardwareStackError == cudaErrorHardwareStackError);
static_assert(cuda_status::kIllegalInstruction == cudaErrorIllegalInstruction);
static_assert(cuda_status::kMisalignedAddress == cudaErrorMisalignedAddress);
static_assert(cuda_status::kLaunchFailure == cudaErrorLaunchFailure);
static_assert(cuda_status::kUnknown == cudaErrorUnknown);

// "cuda::alloc of 64 bytes (memory.cu:120)": the call and where it was made.
static std::string located(const std::string& what, const char* file, int line) {
  std::string name = file;
  size_t slash = name.find_last_of('/');
  if (slash != std::string::npos) name = name.substr(slash + 1);
  return what + " (" + name + ":" + std::to_string(line) + ")";
}

void check_cuda(cudaError_t err, const std::string& what, const char* file, int line) {
  if (err == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error so the next launch check does not report it
  throw_cuda_error(int(err), std::string(cudaGetErrorName(err)) + " (" + cudaGetErrorString(err) + ")",
                   located(what, file, line));
}

static Counters g_counters;

void check_launch(const char* kernel, const char* file, int line) {
  g_counters.launches++;
  check_cuda(cudaGetLastError(), std::string("launching ") + kernel, file, line);
  kernel_times_mark(kernel);
  Context& ctx = context();
  if (ctx.sync_after_launch)
    check_cuda(cudaStreamSynchronize(ctx.stream), std::string(kernel) + " (LINA_CUDA_SYNC=1)", file, line);
}

void check_cublas(cublasStatus_t status, const std::string& what, const char* file, int line) {
  if (status == CUBLAS_STATUS_ALLOC_FAILED)  // cuBLAS could not get its workspace
    throw_cuda_error(cuda_status::kMemoryAllocation, "CUBLAS_STATUS_ALLOC_FAILED", located(what, file, line));
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error(located(what, file, line) + ": " + cublasGetStatusString(status) + " (cuBLAS)");
}

#ifdef LINA_CUDA_SIM
const char* runtime() { return "sim"; }
#else
const char* runtime() { return "cuda"; }
#endif

static Context* create_context() {
#ifdef LINA_CUDA_SIM
  std::fprintf(stderr,
               "lina: --device cuda runs on cuda-sim, lina's CUDA runtime on the CPU: the real CUDA kernels, "
               "thread by thread, no GPU (its timings are not a GPU's)\n");
#endif
  auto* ctx = new Context();
  int device = 0;
  LINA_CUDA_CHECK(cudaGetDevice(&device), "cuda: selecting the device");
  LINA_CUDA_CHECK(cudaStreamCreate(&ctx->stream), "cuda: creating the stream");
  LINA_CUBLAS_CHECK(cublasCreate(&ctx->cublas), "cuda: creating the cuBLAS handle");
  LINA_CUBLAS_CHECK(cublasSetStream(ctx->cublas, ctx->stream), "cuda: binding cuBLAS to the stream");
  // Plain float32 products (no TF32), so results match the CPU to ~1e-6.
  LINA_CUBLAS_CHECK(cublasSetMathMode(ctx->cublas, CUBLAS_DEFAULT_MATH), "cuda: cuBLAS math mode");
  // cuBLAS's workspace, given once: a captured graph may hold no allocation
  // cuBLAS would otherwise make for itself (32 MiB, what it asks on Hopper).
  const size_t workspace_bytes = size_t(32) << 20;
  void* workspace = nullptr;
  LINA_CUDA_CHECK(cudaMalloc(&workspace, workspace_bytes), "cuda: cuBLAS workspace");
  LINA_CUBLAS_CHECK(cublasSetWorkspace(ctx->cublas, workspace, workspace_bytes), "cuda: cuBLAS workspace");
  LINA_CUDA_CHECK(cudaMalloc(&ctx->reduction_scratch, (kMaxReductionBlocks + 1) * sizeof(double)),
             "cuda: reduction buffer");
  LINA_CUDA_CHECK(cudaMalloc(&ctx->blocks_done, sizeof(unsigned)), "cuda: last-block counter");
  LINA_CUDA_CHECK(cudaMemset(ctx->blocks_done, 0, sizeof(unsigned)), "cuda: last-block counter");
  LINA_CUDA_CHECK(cudaMalloc(&ctx->index_error, sizeof(uint64_t)), "cuda: index error word");
  LINA_CUDA_CHECK(cudaMemset(ctx->index_error, 0, sizeof(uint64_t)), "cuda: index error word");

  int pools = 0;
  LINA_CUDA_CHECK(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device),
             "cuda: querying memory pool support");
  ctx->stream_ordered_memory = pools != 0;
  if (ctx->stream_ordered_memory) {
    // Keep every freed block in the pool (the default returns them at each sync).
    cudaMemPool_t pool;
    LINA_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device), "cuda: default memory pool");
    uint64_t keep_all = UINT64_MAX;
    LINA_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all),
               "cuda: memory pool release threshold");
  }

  const char* sync = std::getenv("LINA_CUDA_SYNC");
  ctx->sync_after_launch = sync != nullptr && std::strcmp(sync, "1") == 0;
  return ctx;
}

// TF32 matrix products (10-bit mantissa operands on the tensor cores) or
// plain float32, the default.
void set_tf32(bool on) {
  LINA_CUBLAS_CHECK(cublasSetMathMode(context().cublas, on ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
                    "cuda: cuBLAS math mode");
}

// Created on first use and never destroyed: at process exit the CUDA runtime
// may already be unloaded, and the driver releases everything anyway.
Context& context() {
  static Context* ctx = create_context();
  return *ctx;
}

int device_count() {
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {  // no driver, no device: not an error here
      cudaGetLastError();
      return 0;
    }
    return n;
  }();
  return count;
}

// What a training step asks of the device beyond launching kernels.

Counters counters() {
  Counters c = g_counters;
  Context& ctx = context();
  if (ctx.stream_ordered_memory) {  // memory the pool holds from the driver
    cudaMemPool_t pool;
    int device = 0;
    LINA_CUDA_CHECK(cudaGetDevice(&device), "cuda::counters");
    LINA_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device), "cuda::counters");
    uint64_t reserved = 0;
    LINA_CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved),
                    "cuda::counters");
    c.pool_reserved_bytes = int64_t(reserved);
  }
  return c;
}

void count_graph_launch() { g_counters.graph_launches++; }

// From graph memory while a graph is rehearsed or captured (graph.cu), else
// from the stream-ordered pool.
void* alloc(size_t bytes) {
  Context& ctx = context();
  g_counters.allocations++;
  if (graph_memory_serves()) return graph_memory_alloc(bytes);
  void* ptr = nullptr;
  std::string what = "cuda::alloc of " + std::to_string(bytes) + " bytes";
  if (ctx.stream_ordered_memory) LINA_CUDA_CHECK(cudaMallocAsync(&ptr, bytes, ctx.stream), what.c_str());
  else LINA_CUDA_CHECK(cudaMalloc(&ptr, bytes), what.c_str());
  return ptr;
}

// Called from Storage's destructor, so it must not throw: a failure is
// reported on stderr. Errors at process exit (runtime already unloaded) are
// expected and stay silent.
void free(void* ptr) {
  if (ptr == nullptr) return;
  if (graph_memory_release(ptr)) return;  // graph memory is kept for the graph
  Context& ctx = context();
  cudaError_t err = ctx.stream_ordered_memory ? cudaFreeAsync(ptr, ctx.stream) : cudaFree(ptr);
  if (err == cudaSuccess) return;
  cudaGetLastError();
  if (err != cudaErrorCudartUnloading && err != cudaErrorContextIsDestroyed)
    std::fprintf(stderr, "lina: cuda::free: %s\n", cudaGetErrorString(err));
}

// Reads the index error word in the same synchronisation as `sync`, and
// throws the CPU backend's message when a kernel found an id out of range
// (then clears the word, so the next step starts clean).
static void synchronize_checking_ids(Context& ctx, const std::string& what) {
  uint64_t word = 0;
  LINA_CUDA_CHECK(cudaMemcpyAsync(&word, ctx.index_error, sizeof word, cudaMemcpyDeviceToHost, ctx.stream),
                  what);
  LINA_CUDA_CHECK(cudaStreamSynchronize(ctx.stream), what);
  if (word == 0) return;
  LINA_CUDA_CHECK(cudaMemsetAsync(ctx.index_error, 0, sizeof word, ctx.stream), what);
  const uint64_t kind = word >> 56, limit = (word >> 32) & 0xffffffu;
  const int32_t value = int32_t(uint32_t(word & 0xffffffffu));
  const std::string op = kind == kEmbeddingId ? "embedding: id " : "cross_entropy: target ";
  throw Error(op + std::to_string(value) + " out of range for vocabulary " + std::to_string(limit));
}

void copy(void* dst, const void* src, size_t bytes, CopyKind kind) {
  if (bytes == 0) return;
  Context& ctx = context();
  cudaMemcpyKind cuda_kind = kind == CopyKind::HostToDevice   ? cudaMemcpyHostToDevice
                             : kind == CopyKind::DeviceToHost ? cudaMemcpyDeviceToHost
                                                              : cudaMemcpyDeviceToDevice;
  const char* names[] = {"host to device", "device to host", "device to device"};
  std::string what = "cuda::copy (" + std::string(names[int(kind)]) + ", " +
                     std::to_string(bytes) + " bytes)";
  if (kind == CopyKind::DeviceToHost) g_counters.device_to_host_copies++;
  LINA_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cuda_kind, ctx.stream), what.c_str());
  // The host buffer must be complete (D2H) or reusable (H2D) when we return.
  if (kind != CopyKind::DeviceToDevice) synchronize_checking_ids(ctx, what);
}

void synchronize() {
  if (device_count() <= 0) return;
  synchronize_checking_ids(context(), "cuda::synchronize");
}

}  // namespace lina::cuda
