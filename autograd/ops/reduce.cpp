// Sums and means, over one axis or over everything.
// backward: every input element contributed once (sum) or 1/n times (mean)
// to its output element, so dx = expand(dout) · scale.
#include "autograd/functions.h"
#include "dispatch/dispatch.h"
#include "dispatch/layout.h"

namespace lina {

// The forward both ops share: the sum over one axis (or over all), the
// shape with the reduced axes kept as size 1, and how many elements each
// output element summed.
struct AxisSum {
  Tensor out;
  Shape kept_shape;
  int64_t n = 1;
};
static AxisSum axis_sum(const Tensor& x, int axis, bool all, bool keepdim, const char* op) {
  AxisSum r;
  if (all) {
    r.out = sum_all(x);
    r.kept_shape = Shape(size_t(x.ndim()), 1);
    r.n = x.numel();
  } else {
    int a = normalize_axis(axis, x.ndim(), op);
    r.out = sum_axis(x, a, keepdim);
    r.kept_shape = x.shape();
    r.kept_shape[size_t(a)] = 1;
    r.n = x.shape()[size_t(a)];
  }
  return r;
}

struct SumOp : Node {
  SumOp() : Node(OpKind::Sum) {}
  Shape kept_shape;  // the output shape with the reduced axes kept as size 1

  static Var apply(const Var& x, int axis, bool all, bool keepdim) {
    AxisSum s = axis_sum(x.data(), axis, all, keepdim, op_name(OpKind::Sum));
    if (!needs_grad({x})) return Var(s.out);
    auto node = std::make_shared<SumOp>();
    node->kept_shape = s.kept_shape;
    return record(s.out, node, {x});
  }

  std::vector<Tensor> backward(const Tensor& dout) override {
    return {expand(dout.reshape(kept_shape), inputs[0].shape())};
  }
};

struct MeanOp : Node {
  MeanOp() : Node(OpKind::Mean) {}
  Shape kept_shape;    // the output shape with the reduced axes kept as size 1
  double scale = 1.0;  // 1/n

  static Var apply(const Var& x, int axis, bool all, bool keepdim) {
    AxisSum s = axis_sum(x.data(), axis, all, keepdim, op_name(OpKind::Mean));
    double scale = 1.0 / double(std::max<int64_t>(s.n, 1));
    Tensor out = s.out;
    if (scale != 1.0) out = dispatch::unary(UnaryFn::MulScalar, out, scale);
    if (!needs_grad({x})) return Var(out);
    auto node = std::make_shared<MeanOp>();
    node->kept_shape = s.kept_shape;
    node->scale = scale;
    return record(out, node, {x});
  }

  std::vector<Tensor> backward(const Tensor& dout) override {
    Tensor dx = expand(dout.reshape(kept_shape), inputs[0].shape());
    if (scale != 1.0) dx = dispatch::unary(UnaryFn::MulScalar, dx, scale);
    return {dx};
  }
};

Var sum(const Var& x, int axis, bool keepdim) { return SumOp::apply(x, axis, false, keepdim); }
Var mean(const Var& x, int axis, bool keepdim) { return MeanOp::apply(x, axis, false, keepdim); }
Var sum_all(const Var& x) { return SumOp::apply(x, 0, true, false); }
Var mean_all(const Var& x) { return MeanOp::apply(x, 0, true, false); }

}  // namespace lina
