// CUDA kernels, float32 only, on raw device pointers. Same names and
// argument order as backend_cpu/cpu_kernels.h. Compiled from the .cu files
// beside this header when a CUDA toolkit is found; otherwise stub.cpp
// defines every function to throw "lina was built without CUDA support".
// core/dispatch.cpp is the only caller.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/elementwise_math.h"

namespace lina::cuda {

// ---- memory & device (memory.cu) ----
int device_count();  // GPUs present: 0 when none or no driver, -1 when built without CUDA
void* alloc(size_t bytes);
void free(void* ptr);
enum class CopyKind { HostToDevice, DeviceToHost, DeviceToDevice };
void copy(void* dst, const void* src, size_t bytes, CopyKind kind);
void synchronize();

// ---- elementwise (elementwise.cu) ----
void fill(float* x, int64_t n, float value);
void fill_i32(int32_t* x, int64_t n, int32_t value);
void unary_forward(UnaryFn f, const float* x, float* y, int64_t n, float p);
void unary_backward(UnaryFn f, const float* x, const float* y, const float* dy, float* dx,
                    int64_t n, float p);
void binary(BinaryFn f, const float* a, const int64_t* a_strides, const float* b,
            const int64_t* b_strides, float* out, const int64_t* shape, int ndim);
void axpy(float* dst, const float* src, int64_t n, float alpha);

// ---- layout & reductions (layout.cu) ----
void copy_strided(const float* src, const int64_t* src_strides, float* dst,
                  const int64_t* dst_strides, const int64_t* shape, int ndim, bool accumulate);
void sum_middle(const float* x, float* out, int64_t outer, int64_t n, int64_t inner);
double sum_squares(const float* x, int64_t n);

// ---- matrix products (matmul.cu, cuBLAS) ----
void gemm(int64_t batch, int64_t M, int64_t N, int64_t K, const float* a, bool ta, int64_t stride_a,
          const float* b, bool tb, int64_t stride_b, float* c, int64_t stride_c, float alpha,
          float beta);

}  // namespace lina::cuda
