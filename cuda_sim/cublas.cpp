// cuBLAS's strided batched float product on Eigen, queued on the handle's
// stream like any launch. Column-major, as cuBLAS: a matrix of `rows` rows
// with leading dimension ld has element (i, j) at ptr[i + j·ld].
#include <cstring>
#include <Eigen/Core>
#include <string>

#include "cuda_sim/include/cublas_v2.h"
#include "cuda_sim/runtime.h"

struct cublasContext {
  cudaStream_t stream = nullptr;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
};

using namespace cuda_sim;

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  *handle = new cublasContext();
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->math = mode;
  return CUBLAS_STATUS_SUCCESS;
}

// The simulated cuBLAS needs no workspace; the call is accepted and checked.
cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace, size_t bytes) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (workspace == nullptr && bytes != 0) return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "the operation completed successfully";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    default: return "cuBLAS error (lina cuda-sim)";
  }
}

namespace {

using Matrix = Eigen::Map<Eigen::MatrixXf, 0, Eigen::OuterStride<>>;
using ConstMatrix = Eigen::Map<const Eigen::MatrixXf, 0, Eigen::OuterStride<>>;
using Operand = Eigen::Ref<const Eigen::MatrixXf, 0, Eigen::OuterStride<>>;  // a ConstMatrix or a copy

// TF32 (CUBLAS_TF32_TENSOR_OP_MATH): the tensor cores read each operand with
// a 10-bit mantissa, float32's 23 rounded to nearest (ties to even); the
// products and sums stay float32. Inf and NaN pass unchanged.
float round_to_tf32(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7f800000u) == 0x7f800000u) return x;
  bits += 0xfffu + ((bits >> 13) & 1u);
  bits &= ~0x1fffu;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

// The batch's span of one operand lies in one live device allocation.
bool operand_ok(const float* p, long long stride, int batch, long long rows, long long cols, int ld) {
  if (rows == 0 || cols == 0) return true;
  const Allocation* a = find_allocation(p);
  if (a == nullptr || !a->live) return false;
  const long long last = (batch - 1) * stride + (cols - 1) * ld + rows;  // one past the last element read
  return reinterpret_cast<const char*>(p + last) <= a->base + a->bytes;
}

}  // namespace

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const float* alpha, const float* A, int lda,
                                         long long strideA, const float* B, int ldb,
                                         long long strideB, const float* beta, float* C, int ldc,
                                         long long strideC, int batch) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (m < 0 || n < 0 || k < 0 || batch < 0 || transa == CUBLAS_OP_C || transb == CUBLAS_OP_C)
    return CUBLAS_STATUS_INVALID_VALUE;
  const long long a_rows = transa == CUBLAS_OP_N ? m : k, a_cols = transa == CUBLAS_OP_N ? k : m;
  const long long b_rows = transb == CUBLAS_OP_N ? k : n, b_cols = transb == CUBLAS_OP_N ? n : k;
  if (lda < (a_rows > 1 ? a_rows : 1) || ldb < (b_rows > 1 ? b_rows : 1) || ldc < (m > 1 ? m : 1))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (m == 0 || n == 0 || batch == 0) return CUBLAS_STATUS_SUCCESS;
  if (sticky_error()) return CUBLAS_STATUS_EXECUTION_FAILED;
  auto operands_ok = [=] {
    return operand_ok(A, strideA, batch, a_rows, a_cols, lda) && operand_ok(B, strideB, batch, b_rows, b_cols, ldb) &&
           operand_ok(C, strideC, batch, m, n, ldc);
  };
  if (!operands_ok()) return CUBLAS_STATUS_INVALID_VALUE;  // not device memory, or past an allocation's end
  const float a_scale = *alpha, c_scale = *beta;  // host scalars, read at the call as cuBLAS does
  const bool tf32 = handle->math == CUBLAS_TF32_TENSOR_OP_MATH;
  Work work;  // a kernel, as cuBLAS's own
  work.check = [operands_ok] { return operands_ok() ? cudaSuccess : cudaErrorInvalidValue; };
  work.run = [=] {
    for (int i = 0; i < batch; ++i) {
      ConstMatrix a_in(A + i * strideA, a_rows, a_cols, Eigen::OuterStride<>(lda));
      ConstMatrix b_in(B + i * strideB, b_rows, b_cols, Eigen::OuterStride<>(ldb));
      Eigen::MatrixXf a_tf32, b_tf32;  // the operands as TF32 reads them
      if (tf32) {
        a_tf32 = a_in.unaryExpr(&round_to_tf32);
        b_tf32 = b_in.unaryExpr(&round_to_tf32);
      }
      const Operand a = tf32 ? Operand(a_tf32) : Operand(a_in), b = tf32 ? Operand(b_tf32) : Operand(b_in);
      Matrix c(C + i * strideC, m, n, Eigen::OuterStride<>(ldc));
      Eigen::MatrixXf product(m, n);
      if (k == 0) product.setZero();
      else if (transa == CUBLAS_OP_N && transb == CUBLAS_OP_N) product.noalias() = a * b;
      else if (transa == CUBLAS_OP_N) product.noalias() = a * b.transpose();
      else if (transb == CUBLAS_OP_N) product.noalias() = a.transpose() * b;
      else product.noalias() = a.transpose() * b.transpose();
      if (c_scale == 0.0f) c = a_scale * product;  // C is not read: NaN there does not survive
      else c = a_scale * product + c_scale * c;
    }
  };
  submit(handle->stream, std::move(work));
  return CUBLAS_STATUS_SUCCESS;
}
