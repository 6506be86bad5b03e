// The backend entry points: everything an op's forward or backward asks of a
// device, on whole Tensors. Each is implemented once in core/dispatch.cpp,
// which checks the arguments and calls the CPU kernel (backend_cpu/) or the
// CUDA kernel (backend_cuda/) for the tensors' device and dtype. Autograd
// code calls only these, so adding a CUDA kernel touches no autograd code.
//
// Rule for every function here: outputs are freshly allocated on the inputs'
// device unless the name says `_inplace` / the argument is a `Tensor&` out.
#pragma once
#include <vector>

#include "core/elementwise_math.h"
#include "core/tensor.h"

namespace lina::kernels {

// ---- memory (used by Storage and Tensor) --------------------------------------
void* device_alloc(size_t bytes, Device device);
void device_free(void* ptr, Device device);
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);
bool cuda_available();    // compiled with CUDA and a GPU is present
void require_device(Device device);  // throws a one-line error if `device` cannot be used

// ---- fill & elementwise -------------------------------------------------------
void fill(Tensor& t, double value);
Tensor unary(UnaryFn f, const Tensor& x, double p = 0.0);
// dx = dy * f'(x); y = f(x) is passed because several derivatives use it.
Tensor unary_backward(UnaryFn f, const Tensor& x, const Tensor& y, const Tensor& dy, double p = 0.0);
// NumPy broadcasting; out has the broadcast shape.
Tensor binary(BinaryFn f, const Tensor& a, const Tensor& b);
// dst += alpha * src (same shape): gradient accumulation.
void add_inplace(Tensor& dst, const Tensor& src, double alpha = 1.0);

// ---- layout: one strided copy serves permute, expand, slice, concat, sum_to ----
struct StridedView {
  int64_t offset = 0;            // in elements, from the tensor's first element
  std::vector<int64_t> strides;  // one per dimension of `extent`, in elements
};
// For every index i of `extent`: dst[dv(i)] = src[sv(i)]  (or += when accumulate).
// With accumulate, zero strides in dv sum over those dimensions.
void copy_strided(const Tensor& src, const StridedView& sv, Tensor& dst, const StridedView& dv,
                  const Shape& extent, bool accumulate);

// ---- reductions ---------------------------------------------------------------
// x viewed as [outer, n, inner]: out[o, i] = Σ_j x[o, j, i].
void sum_middle(const Tensor& x, int64_t outer, int64_t n, int64_t inner, Tensor& out);
double sum_squares(const Tensor& x);  // Σ x², accumulated in double

// ---- matrix products ----------------------------------------------------------
// c[i] = op(a[i]) · op(b[i]) for i over `batch`, op = transpose when ta/tb.
// Raw form: a, b, c are row-major stacks of matrices; a stride of 0 reuses one
// matrix for every batch entry. c = alpha·(…) + beta·c.
struct GemmShape {
  int64_t batch = 1, M = 0, N = 0, K = 0;
  bool ta = false, tb = false;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // elements between batch entries
};
void gemm(const GemmShape& g, const Tensor& a, const Tensor& b, Tensor& c, double alpha = 1.0,
          double beta = 0.0);


// ---- softmax, log-softmax, cross-entropy, embedding ----
// [anchor:SOFTMAX-LOSS]

// ---- rms_norm, l2_norm, causal conv1d, rope ----
// [anchor:NORM-CONV-ROPE]

// ---- optimiser (AdamW step) ----
// [anchor:OPTIM]

// ---- scan: the linear / delta / gated-delta recurrence ----
// [anchor:SCAN]

}  // namespace lina::kernels
