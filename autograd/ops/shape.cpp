// Shape ops. Each forward copies (lina tensors are contiguous, see
// core/shape.h) except reshape, which shares the buffer.
#include <numeric>

#include "autograd/functions.h"
#include "dispatch/layout.h"

namespace lina {

// reshape: same elements, new shape. backward: reshape dout back.
struct ReshapeOp : Node {
  ReshapeOp() : Node(OpKind::Reshape) {}
  static Var apply(const Var& x, const Shape& shape) {
    Tensor y = x.data().reshape(shape);
    if (!needs_grad({x})) return Var(y);
    return record(y, std::make_shared<ReshapeOp>(), {x});
  }
  std::vector<Tensor> backward(const Tensor& dy) override {
    return {dy.reshape(inputs[0].shape())};
  }
};

// permute: y.shape[k] = x.shape[perm[k]]. backward: the inverse permutation.
struct PermuteOp : Node {
  PermuteOp() : Node(OpKind::Permute) {}
  std::vector<int> perm;
  static Var apply(const Var& x, const std::vector<int>& perm) {
    Tensor y = lina::permute(x.data(), perm);
    if (!needs_grad({x})) return Var(y);
    auto node = std::make_shared<PermuteOp>();
    node->perm = perm;
    return record(y, node, {x});
  }
  std::vector<Tensor> backward(const Tensor& dy) override {
    std::vector<int> inverse(perm.size());
    for (size_t k = 0; k < perm.size(); ++k)
      inverse[size_t(normalize_axis(perm[k], int(perm.size()), "permute"))] = int(k);
    return {lina::permute(dy, inverse)};
  }
};

// expand (broadcast): backward sums over the broadcast dims.
struct ExpandOp : Node {
  ExpandOp() : Node(OpKind::Expand) {}
  static Var apply(const Var& x, const Shape& shape) {
    Tensor y = lina::expand(x.data(), shape);
    if (!needs_grad({x})) return Var(y);
    return record(y, std::make_shared<ExpandOp>(), {x});
  }
  std::vector<Tensor> backward(const Tensor& dy) override {
    return {sum_to(dy, inputs[0].shape())};
  }
};

// slice along an axis: backward writes dy into a zero tensor at the slice.
struct SliceOp : Node {
  SliceOp() : Node(OpKind::Slice) {}
  int axis = 0;
  int64_t start = 0;
  static Var apply(const Var& x, int axis, int64_t start, int64_t length) {
    Tensor y = lina::slice(x.data(), axis, start, length);
    if (!needs_grad({x})) return Var(y);
    auto node = std::make_shared<SliceOp>();
    node->axis = normalize_axis(axis, x.ndim(), "slice");
    node->start = start;
    return record(y, node, {x});
  }
  std::vector<Tensor> backward(const Tensor& dy) override {
    Tensor dx = Tensor::zeros(inputs[0].shape(), dy.dtype(), dy.device());
    write_slice(dx, dy, axis, start, false);
    return {dx};
  }
};

// concat along an axis: backward hands each input its slice of dy.
struct ConcatOp : Node {
  ConcatOp() : Node(OpKind::Concat) {}
  int axis = 0;
  static Var apply(const std::vector<Var>& parts, int axis) {
    std::vector<Tensor> datas;
    for (const Var& p : parts) datas.push_back(p.data());
    Tensor y = lina::concat(datas, axis);
    if (!needs_grad(parts)) return Var(y);
    auto node = std::make_shared<ConcatOp>();
    node->axis = normalize_axis(axis, parts[0].ndim(), "concat");
    return record(y, node, parts);
  }
  std::vector<Tensor> backward(const Tensor& dy) override {
    std::vector<Tensor> grads;
    int64_t at = 0;
    for (const Var& in : inputs) {
      int64_t len = in.shape()[size_t(axis)];
      grads.push_back(lina::slice(dy, axis, at, len));
      at += len;
    }
    return grads;
  }
};

Var reshape(const Var& x, const Shape& shape) { return ReshapeOp::apply(x, shape); }
Var permute(const Var& x, const std::vector<int>& perm) { return PermuteOp::apply(x, perm); }
Var transpose(const Var& x, int axis0, int axis1) {
  std::vector<int> perm(size_t(x.ndim()));
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[size_t(normalize_axis(axis0, x.ndim(), "transpose"))],
            perm[size_t(normalize_axis(axis1, x.ndim(), "transpose"))]);
  return PermuteOp::apply(x, perm);
}
Var expand(const Var& x, const Shape& shape) { return ExpandOp::apply(x, shape); }
Var slice(const Var& x, int axis, int64_t start, int64_t length) {
  return SliceOp::apply(x, axis, start, length);
}
Var concat(const std::vector<Var>& parts, int axis) { return ConcatOp::apply(parts, axis); }

std::vector<Var> split(const Var& x, int axis, const std::vector<int64_t>& sizes) {
  int a = normalize_axis(axis, x.ndim(), "split");
  int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t(0));
  check(total == x.shape()[size_t(a)], "split: sizes add up to " + std::to_string(total) +
                                           " but axis " + std::to_string(a) + " of " +
                                           x.data().describe() + " has " +
                                           std::to_string(x.shape()[size_t(a)]));
  std::vector<Var> parts;
  int64_t at = 0;
  for (int64_t s : sizes) {
    parts.push_back(SliceOp::apply(x, a, at, s));
    at += s;
  }
  return parts;
}

}  // namespace lina
