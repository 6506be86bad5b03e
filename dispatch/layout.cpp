#include "dispatch/layout.h"

#include <numeric>
#include <string>

namespace lina {

using dispatch::StridedView;

Tensor permute(const Tensor& x, const std::vector<int>& perm) {
  int nd = x.ndim();
  check(int(perm.size()) == nd, "permute: " + std::to_string(perm.size()) +
                                    " axes given for " + x.describe());
  std::vector<bool> seen(size_t(nd), false);
  Shape out_shape = Shape(size_t(nd), 0);
  std::vector<int64_t> xs = contiguous_strides(x.shape());
  StridedView sv{0, std::vector<int64_t>(size_t(nd))};
  for (int k = 0; k < nd; ++k) {
    int a = normalize_axis(perm[size_t(k)], nd, "permute");
    check(!seen[size_t(a)], "permute: axis " + std::to_string(a) + " repeated");
    seen[size_t(a)] = true;
    out_shape[size_t(k)] = x.shape()[size_t(a)];
    sv.strides[size_t(k)] = xs[size_t(a)];
  }
  Tensor out = Tensor::empty(out_shape, x.dtype(), x.device());
  dispatch::copy_strided(x, sv, out, StridedView{0, contiguous_strides(out_shape)}, out_shape, false);
  return out;
}

Tensor transpose(const Tensor& x, int axis0, int axis1) {
  std::vector<int> perm(size_t(x.ndim()));
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[size_t(normalize_axis(axis0, x.ndim(), "transpose"))],
            perm[size_t(normalize_axis(axis1, x.ndim(), "transpose"))]);
  return permute(x, perm);
}

// Strides that read `small` as if it had `big`'s shape (0 on broadcast dims).
static std::vector<int64_t> broadcast_view_strides(const Shape& small, const Shape& big,
                                                   const char* op) {
  check(small.size() <= big.size(), std::string(op) + ": cannot broadcast " + shape_str(small) +
                                        " to " + shape_str(big));
  std::vector<int64_t> st(big.size(), 0), cs = contiguous_strides(small);
  size_t lead = big.size() - small.size();
  for (size_t i = 0; i < small.size(); ++i) {
    check(small[i] == big[lead + i] || small[i] == 1,
          std::string(op) + ": cannot broadcast " + shape_str(small) + " to " + shape_str(big));
    st[lead + i] = small[i] == 1 ? 0 : cs[i];
  }
  return st;
}

Tensor expand(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  Tensor out = Tensor::empty(shape, x.dtype(), x.device());
  dispatch::copy_strided(x, StridedView{0, broadcast_view_strides(x.shape(), shape, "expand")}, out,
                        StridedView{0, contiguous_strides(shape)}, shape, false);
  return out;
}

// x's shape ends with `shape`: a sum to `shape` sums leading axes only.
static bool sums_leading_axes(const Shape& x, const Shape& shape) {
  if (shape.size() > x.size()) return false;
  const size_t lead = x.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] != x[lead + i]) return false;
  return true;
}

bool add_sum_to(const Tensor& x, Tensor& into) {
  if (!sums_leading_axes(x.shape(), into.shape())) return false;
  dispatch::sum_middle(x, 1, x.numel() / std::max<int64_t>(into.numel(), 1), into.numel(), into,
                       /*accumulate=*/true);
  return true;
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  // Fast path: summing leading dims only ([.., n] -> [n]) is one sum_middle,
  // which writes every output (no zeros first).
  if (sums_leading_axes(x.shape(), shape)) {
    Tensor out = Tensor::empty(shape, x.dtype(), x.device());
    dispatch::sum_middle(x, 1, x.numel() / std::max<int64_t>(out.numel(), 1), out.numel(), out);
    return out;
  }
  Tensor out = Tensor::zeros(shape, x.dtype(), x.device());
  dispatch::copy_strided(x, StridedView{0, contiguous_strides(x.shape())}, out,
                        StridedView{0, broadcast_view_strides(shape, x.shape(), "sum_to")},
                        x.shape(), true);
  return out;
}

// The strided view of x[.., start:start+length, ..] along `axis`.
static StridedView slice_view(const Shape& shape, int axis, int64_t start) {
  std::vector<int64_t> st = contiguous_strides(shape);
  return StridedView{start * st[size_t(axis)], st};
}

Tensor slice(const Tensor& x, int axis, int64_t start, int64_t length) {
  int a = normalize_axis(axis, x.ndim(), "slice");
  check(start >= 0 && length >= 0 && start + length <= x.shape()[size_t(a)],
        "slice: range [" + std::to_string(start) + ", " + std::to_string(start + length) +
            ") out of bounds for axis " + std::to_string(a) + " of " + x.describe());
  Shape out_shape = x.shape();
  out_shape[size_t(a)] = length;
  Tensor out = Tensor::empty(out_shape, x.dtype(), x.device());
  dispatch::copy_strided(x, slice_view(x.shape(), a, start), out,
                        StridedView{0, contiguous_strides(out_shape)}, out_shape, false);
  return out;
}

void write_slice(Tensor& dst, const Tensor& src, int axis, int64_t start, bool accumulate) {
  int a = normalize_axis(axis, dst.ndim(), "write_slice");
  Shape expect = dst.shape();
  check(src.ndim() == dst.ndim() && start >= 0 &&
            start + src.shape()[size_t(a)] <= dst.shape()[size_t(a)],
        "write_slice: cannot write " + src.describe() + " into " + dst.describe() + " at " +
            std::to_string(start) + " along axis " + std::to_string(a));
  expect[size_t(a)] = src.shape()[size_t(a)];
  check(expect == src.shape(), "write_slice: shape mismatch " + shape_str(src.shape()) + " vs " +
                                   shape_str(expect));
  dispatch::copy_strided(src, StridedView{0, contiguous_strides(src.shape())}, dst,
                        slice_view(dst.shape(), a, start), src.shape(), accumulate);
}

Tensor concat(const std::vector<Tensor>& parts, int axis) {
  check(!parts.empty(), "concat: no tensors given");
  int a = normalize_axis(axis, parts[0].ndim(), "concat");
  Shape out_shape = parts[0].shape();
  out_shape[size_t(a)] = 0;
  for (const Tensor& p : parts) {
    Shape s = p.shape();
    check(p.ndim() == parts[0].ndim(), "concat: " + p.describe() + " vs " + parts[0].describe());
    s[size_t(a)] = 0;
    Shape ref = out_shape;
    ref[size_t(a)] = 0;
    check(s == ref, "concat: shape mismatch " + shape_str(p.shape()) + " vs " +
                        shape_str(parts[0].shape()) + " along axis " + std::to_string(a));
    out_shape[size_t(a)] += p.shape()[size_t(a)];
  }
  Tensor out = Tensor::empty(out_shape, parts[0].dtype(), parts[0].device());
  int64_t at = 0;
  for (const Tensor& p : parts) {
    write_slice(out, p, a, at, false);
    at += p.shape()[size_t(a)];
  }
  return out;
}

Tensor sum_axis(const Tensor& x, int axis, bool keepdim) {
  int a = normalize_axis(axis, x.ndim(), "sum");
  int64_t outer = 1, inner = 1, n = x.shape()[size_t(a)];
  for (int i = 0; i < a; ++i) outer *= x.shape()[size_t(i)];
  for (int i = a + 1; i < x.ndim(); ++i) inner *= x.shape()[size_t(i)];
  Shape out_shape = x.shape();
  if (keepdim) out_shape[size_t(a)] = 1;
  else out_shape.erase(out_shape.begin() + a);
  Tensor out = Tensor::empty(out_shape, x.dtype(), x.device());
  dispatch::sum_middle(x, outer, n, inner, out);
  return out;
}

Tensor sum_all(const Tensor& x) {
  Tensor out = Tensor::empty({}, x.dtype(), x.device());
  dispatch::sum_middle(x, 1, x.numel(), 1, out);
  return out;
}

// op(a) · op(b) into c, c = that (beta 0: c is allocated) or c + that
// (beta 1: c is the caller's, of the product's shape).
static void matmul_to(const Tensor& a, const Tensor& b, bool ta, bool tb, Tensor& c, double beta) {
  check(a.ndim() >= 2 && b.ndim() >= 2,
        "matmul: operands need at least 2 dims, got " + a.describe() + " and " + b.describe());
  int64_t M = ta ? a.dim(-1) : a.dim(-2), Ka = ta ? a.dim(-2) : a.dim(-1);
  int64_t Kb = tb ? b.dim(-1) : b.dim(-2), N = tb ? b.dim(-2) : b.dim(-1);
  std::string pair = shape_str(a.shape()) + (ta ? "ᵀ" : "") + " · " + shape_str(b.shape()) +
                     (tb ? "ᵀ" : "");
  check(Ka == Kb, "matmul: inner dimensions differ in " + pair);
  Shape batch_a(a.shape().begin(), a.shape().end() - 2);
  Shape batch_b(b.shape().begin(), b.shape().end() - 2);
  check(batch_a == batch_b || batch_a.empty() || batch_b.empty(),
        "matmul: batch dimensions differ in " + pair);
  Shape batch = batch_a.empty() ? batch_b : batch_a;
  int64_t nb = numel(batch);
  Shape out_shape = batch;
  out_shape.push_back(M);
  out_shape.push_back(N);
  if (beta == 0.0) c = Tensor::empty(out_shape, a.dtype(), a.device());
  check(c.shape() == out_shape, "matmul: adding " + pair + " into " + c.describe());
  dispatch::GemmShape g;
  g.ta = ta;
  g.tb = tb;
  g.K = Ka;
  g.N = N;
  if (!batch_a.empty() && batch_b.empty() && !ta) {
    // [.., M, K] · W: one tall product, the fastest path (linear layers).
    g.M = nb * M;
  } else {
    g.batch = nb;
    g.M = M;
    g.stride_a = batch_a.empty() ? 0 : M * Ka;
    g.stride_b = batch_b.empty() ? 0 : Kb * N;
    g.stride_c = M * N;
  }
  dispatch::gemm(g, a, b, c, 1.0, beta);
}

Tensor matmul(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  Tensor c;
  matmul_to(a, b, ta, tb, c, 0.0);
  return c;
}

void matmul_add(const Tensor& a, const Tensor& b, bool ta, bool tb, Tensor& c) {
  matmul_to(a, b, ta, tb, c, 1.0);
}

}  // namespace lina
