// Tensor-level helpers built on the backend entry points (dispatch/dispatch.h):
// shape changes that copy, broadcasting and its reverse, matmul, sums.
// Device-agnostic: they run wherever their inputs live. Autograd ops use
// these in both directions (e.g. expand forward, sum_to backward).
#pragma once
#include <vector>

#include "core/tensor.h"
#include "dispatch/dispatch.h"

namespace lina {

// out[i_0..i_n] = x[i_perm[0]..]: out.shape[k] = x.shape[perm[k]].
Tensor permute(const Tensor& x, const std::vector<int>& perm);
Tensor transpose(const Tensor& x, int axis0, int axis1);
// Broadcast x to `shape` (NumPy rules), copying.
Tensor expand(const Tensor& x, const Shape& shape);
// Reverse of expand: sum the broadcast dimensions so the result has `shape`.
Tensor sum_to(const Tensor& x, const Shape& shape);
// into += sum_to(x, into's shape) in one pass, where that sums leading axes
// only ([.., n] -> [n], a bias's gradient); false, with nothing done, otherwise.
bool add_sum_to(const Tensor& x, Tensor& into);
// x[..., start:start+length, ...] along `axis`, copied.
Tensor slice(const Tensor& x, int axis, int64_t start, int64_t length);
// dst[..., start:start+len, ...] = src (or += with accumulate).
void write_slice(Tensor& dst, const Tensor& src, int axis, int64_t start, bool accumulate);
Tensor concat(const std::vector<Tensor>& parts, int axis);
// Sum over one axis (keepdim keeps it as size 1) and over everything.
Tensor sum_axis(const Tensor& x, int axis, bool keepdim);
Tensor sum_all(const Tensor& x);
// Matrix product of the last two dims: op(a) [.., M, K] · op(b) [.., K, N].
// Batch dims must match, or one side is a plain matrix (2-D) shared by every
// batch entry. ta/tb transpose the operand's last two dims.
Tensor matmul(const Tensor& a, const Tensor& b, bool ta = false, bool tb = false);
// c += op(a) · op(b), c already of the product's shape (the GEMM's beta = 1:
// no product tensor, no separate add).
void matmul_add(const Tensor& a, const Tensor& b, bool ta, bool tb, Tensor& c);

}  // namespace lina
