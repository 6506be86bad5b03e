// The CUDA state every kernel launch needs, in one explicit object: the
// stream all work is queued on and the cuBLAS handle bound to it. Included
// by the .cu files only (it names CUDA and cuBLAS types). The one instance is
// defined in memory.cu and created on first use.
//
// Debug switch: LINA_CUDA_SYNC=1 makes every launch synchronise and check for
// errors, so a failing kernel is reported by its own name, not by whatever
// call happens to run next.
#pragma once
#include <cstdint>
#include <string>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "backend_cuda/kernels_device.h"

// One launch spelling for both builds:
//     LINA_LAUNCH(kernel, grid, block, shared_bytes, stream)(arguments...);
// is kernel<<<grid, block, shared_bytes, stream>>>(arguments...) under nvcc,
// and under g++ (the cuda-sim preset) a launch on lina's CUDA runtime on the
// CPU (cuda_sim/), which runs the same kernel code thread by thread.
// LINA_DYNAMIC_SHARED(type, name) declares a kernel's dynamic shared memory
// (extern __shared__ type name[] under nvcc).
#ifdef __CUDACC__
#define LINA_LAUNCH(kernel, grid, block, shared_bytes, stream) kernel<<<grid, block, shared_bytes, stream>>>
#define LINA_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#else
#define LINA_LAUNCH(kernel, grid, block, shared_bytes, stream) \
  ::cuda_sim::Launch(#kernel, kernel, grid, block, shared_bytes, stream)
#define LINA_DYNAMIC_SHARED(type, name) type* name = ::cuda_sim::dynamic_shared<type>()
#endif

namespace lina::cuda {

constexpr int kMaxReductionBlocks = 1024;  // blocks of a whole-tensor reduction

struct Context {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  bool sync_after_launch = false;   // LINA_CUDA_SYNC=1
  double* reduction_scratch = nullptr;  // kMaxReductionBlocks + 1 doubles (grid_sum_of_squares.cuh)
  unsigned* blocks_done = nullptr;      // the last-block counter, 0 between launches (last_block.cuh)
  bool stream_ordered_memory = false;  // cudaMallocAsync available (else cudaMalloc)
  uint64_t* index_error = nullptr;  // 8 bytes, 0 or the first id a kernel found out of range
                                    // (softmax_loss_device.h), read at each synchronisation
};

// The process's context, created on the first call (throws lina::Error when
// the device cannot be initialised).
Context& context();

// Every CUDA and cuBLAS call is checked through these macros, so a failure
// becomes one lina::Error naming the call, the file and the line (and, for
// out of memory or a lost device, what to do: core/cuda_status.h).
#define LINA_CUDA_CHECK(call, what) ::lina::cuda::check_cuda((call), (what), __FILE__, __LINE__)
#define LINA_CUBLAS_CHECK(call, what) ::lina::cuda::check_cublas((call), (what), __FILE__, __LINE__)
// Right after a kernel launch: reports a bad launch, and with
// LINA_CUDA_SYNC=1 waits for the kernel and reports its failure.
#define LINA_CHECK_LAUNCH(kernel) ::lina::cuda::check_launch((kernel), __FILE__, __LINE__)

void check_cuda(cudaError_t err, const std::string& what, const char* file, int line);
void check_cublas(cublasStatus_t status, const std::string& what, const char* file, int line);
void check_launch(const char* kernel, const char* file, int line);

// Grid for a grid-stride loop over n items, kThreads per block.
inline unsigned blocks_for(int64_t n) {
  const int64_t max_blocks = int64_t(1) << 20;  // beyond this the loop strides
  int64_t blocks = (n + kThreads - 1) / kThreads;
  return unsigned(blocks < 1 ? 1 : blocks > max_blocks ? max_blocks : blocks);
}

// A grid-stride loop visits i = first_index(), first_index() + index_stride(), …
__device__ inline int64_t first_index() { return int64_t(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline int64_t index_stride() { return int64_t(gridDim.x) * blockDim.x; }

}  // namespace lina::cuda
