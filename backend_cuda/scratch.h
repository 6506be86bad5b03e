// Host-side helpers the CUDA launchers share: a scratch buffer from the
// stream-ordered pool, and the opt-in a kernel needs for more than 48 KB of
// dynamic shared memory.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "backend_cuda/cuda_context.h"
#include "backend_cuda/cuda_kernels.h"

namespace lina::cuda {

// `count` elements of T from the stream-ordered pool (none when count is 0),
// returned to it when the scope ends: on the same stream, so after the
// kernels already queued that use it.
template <class T> class Scratch {
 public:
  explicit Scratch(int64_t count)
      : ptr_(count > 0 ? static_cast<T*>(lina::cuda::alloc(size_t(count) * sizeof(T))) : nullptr) {}
  ~Scratch() { lina::cuda::free(ptr_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  T* get() const { return ptr_; }

 private:
  T* ptr_;
};

// Lets `kernel` launch with `bytes` of dynamic shared memory (above 48 KB a
// kernel must ask for it first) and returns bytes; `what` names the call in
// the error.
template <class... P>
size_t with_shared_memory(void (*kernel)(P...), size_t bytes, const std::string& what) {
  if (bytes > 48 * 1024)
    LINA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)),
                    what + ": " + std::to_string(bytes) + " bytes of shared memory per block");
  return bytes;
}

}  // namespace lina::cuda
