// Compiled instead of the .cu files when no CUDA toolkit was found: every
// CUDA entry point exists, and asking for the device gives one clear error.
// (core/dispatch.cpp refuses CUDA tensors before any of these can run.)
#include <string>

#include "backend_cuda/cuda_kernels.h"
#include "core/error.h"

namespace lina::cuda {

[[noreturn]] static void no_cuda(const char* what) {
  throw Error(std::string(what) + ": lina was built without CUDA support (no nvcc found at configure time)");
}

int device_count() { return -1; }
void* alloc(size_t) { no_cuda("cuda::alloc"); }
void free(void* ptr) { if (ptr) no_cuda("cuda::free"); }
void copy(void*, const void*, size_t, CopyKind) { no_cuda("cuda::copy"); }
void synchronize() {}
void fill(float*, int64_t, float) { no_cuda("cuda::fill"); }
void fill_i32(int32_t*, int64_t, int32_t) { no_cuda("cuda::fill_i32"); }
void unary_forward(UnaryFn, const float*, float*, int64_t, float) { no_cuda("cuda::unary_forward"); }
void unary_backward(UnaryFn, const float*, const float*, const float*, float*, int64_t, float) {
  no_cuda("cuda::unary_backward");
}
void binary(BinaryFn, const float*, const int64_t*, const float*, const int64_t*, float*,
            const int64_t*, int) { no_cuda("cuda::binary"); }
void axpy(float*, const float*, int64_t, float) { no_cuda("cuda::axpy"); }
void copy_strided(const float*, const int64_t*, float*, const int64_t*, const int64_t*, int, bool) {
  no_cuda("cuda::copy_strided");
}
void sum_middle(const float*, float*, int64_t, int64_t, int64_t) { no_cuda("cuda::sum_middle"); }
double sum_squares(const float*, int64_t) { no_cuda("cuda::sum_squares"); }
void gemm(int64_t, int64_t, int64_t, int64_t, const float*, bool, int64_t, const float*, bool,
          int64_t, float*, int64_t, float, float) { no_cuda("cuda::gemm"); }

}  // namespace lina::cuda
