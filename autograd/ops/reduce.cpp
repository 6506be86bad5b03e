// Sums and means, over one axis or over everything.
// backward: every input element contributed once (sum) or 1/n times (mean)
// to its output element, so dx = expand(dout) · scale.
#include "autograd/functions.h"
#include "core/kernels.h"
#include "core/layout.h"

namespace lina {

struct ReduceOp : Node {
  using Node::Node;
  Shape kept_shape;  // the output shape with the reduced axes kept as size 1
  double scale = 1.0;  // 1 for sum, 1/n for mean

  static Var apply(OpKind kind, const Var& x, int axis, bool all, bool keepdim) {
    const Tensor& xd = x.data();
    Tensor out;
    Shape kept;
    int64_t n;
    if (all) {
      out = sum_all(xd);
      kept = Shape(size_t(xd.ndim()), 1);
      n = xd.numel();
    } else {
      int a = normalize_axis(axis, xd.ndim(), op_name(kind));
      out = sum_axis(xd, a, keepdim);
      kept = xd.shape();
      kept[size_t(a)] = 1;
      n = xd.shape()[size_t(a)];
    }
    double scale = kind == OpKind::Mean ? 1.0 / double(std::max<int64_t>(n, 1)) : 1.0;
    if (scale != 1.0) out = kernels::unary(UnaryFn::MulScalar, out, scale);
    if (!needs_grad({x})) return Var(out);
    auto node = std::make_shared<ReduceOp>(kind);
    node->kept_shape = kept;
    node->scale = scale;
    return record(out, node, {x});
  }

  std::vector<Tensor> backward(const Tensor& dout) override {
    Tensor dx = expand(dout.reshape(kept_shape), inputs[0].shape());
    if (scale != 1.0) dx = kernels::unary(UnaryFn::MulScalar, dx, scale);
    return {dx};
  }
};

Var sum(const Var& x, int axis, bool keepdim) {
  return ReduceOp::apply(OpKind::Sum, x, axis, false, keepdim);
}
Var mean(const Var& x, int axis, bool keepdim) {
  return ReduceOp::apply(OpKind::Mean, x, axis, false, keepdim);
}
Var sum_all(const Var& x) { return ReduceOp::apply(OpKind::Sum, x, 0, true, false); }
Var mean_all(const Var& x) { return ReduceOp::apply(OpKind::Mean, x, 0, true, false); }

}  // namespace lina
