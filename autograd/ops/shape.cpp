// Shape ops. Each forward copies (lina tensors are contiguous, see
// core/shape.h) except reshape, which shares the buffer.
#include <algorithm>
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

// second_output: an op's second output, a Var of its own. Its input is the
// op's first output, so the op runs first in the forward and last in the
// backward; the backward hands dy to the op (Node::second_output_grad), whose
// own backward sends it on, and sends nothing through the first output.
struct SecondOutputOp : Node {
  SecondOutputOp() : Node(OpKind::SecondOutput) {}
  static Var apply(Tensor out, const Var& first) {
    if (!first.grad_fn()) return Var(std::move(out));  // no graph: a plain tensor
    return record(std::move(out), std::make_shared<SecondOutputOp>(), {first});
  }
  std::vector<Tensor> backward(const Tensor& dy) override {
    inputs[0].grad_fn()->second_output_grad = dy;
    return {Tensor()};
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

// slice along an axis: backward writes dy into a zero tensor at the slice,
// or, where x's gradient is pending already (split's other parts sent
// theirs), adds dy into that tensor at the slice (one strided add, no zeros).
struct SliceOp : Node {
  SliceOp() : Node(OpKind::Slice) { adds_into_sums = true; }
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
  std::vector<Tensor> backward_into(const Tensor& dy, const std::vector<Tensor*>& sums) override {
    if (!sums[0]) return backward(dy);
    write_slice(*sums[0], dy, axis, start, /*accumulate=*/true);  // dx[.., start:, ..] += dy
    return {Tensor()};
  }
};

// x[.., at:at+len, ..] along `axis`: a view where those elements are one
// contiguous run (every axis before `axis` has size 1), else a copy.
static Tensor slice_or_view(const Tensor& x, int axis, int64_t at, int64_t len) {
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= x.dim(i);
  for (int i = axis + 1; i < x.ndim(); ++i) inner *= x.dim(i);
  if (outer != 1) return lina::slice(x, axis, at, len);
  Shape shape = x.shape();
  shape[size_t(axis)] = len;
  return Tensor::view_of(x, at * inner, shape);
}

// concat along an axis: backward hands each input its slice of dy (a view
// of dy when the slice is contiguous, as along axis 0).
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
      grads.push_back(slice_or_view(dy, axis, at, len));
      at += len;
    }
    return grads;
  }
};

Var second_output(Tensor out, const Var& first) { return SecondOutputOp::apply(std::move(out), first); }

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

// The tensors are defined and lie one after another in one buffer.
static bool back_to_back(const std::vector<Tensor>& ts) {
  for (size_t i = 0; i < ts.size(); ++i) {
    if (!ts[i].defined()) return false;
    if (i == 0) continue;
    const char* end_of_previous = static_cast<const char*>(ts[i - 1].raw()) + ts[i - 1].nbytes();
    if (!ts[i].same_storage(ts[0]) || ts[i].raw() != end_of_previous) return false;
  }
  return true;
}

// Every part has at least one axis and the same dims after the first.
static bool same_trailing_dims(const std::vector<Var>& parts) {
  const Shape& first = parts.at(0).shape();
  for (const Var& p : parts)
    if (p.ndim() == 0 || p.ndim() != int(first.size()) ||
        !std::equal(p.shape().begin() + 1, p.shape().end(), first.begin() + 1))
      return false;
  return true;
}

Var stacked_rows(const std::vector<Var>& parts) {
  if (!same_trailing_dims(parts)) return concat(parts, 0);  // which says what does not fit
  Shape shape = parts[0].shape();  // [Σ rows, ...]
  shape[0] = 0;
  std::vector<Tensor> datas, grads;
  for (const Var& p : parts) {
    if (p.grad_fn()) return concat(parts, 0);  // not a leaf
    datas.push_back(p.data());
    grads.push_back(p.grad());
    shape[0] += p.dim(0);
  }
  if (!back_to_back(datas)) return concat(parts, 0);
  if (!needs_grad(parts)) return Var(Tensor::view_of(datas[0], 0, shape));
  for (const Var& p : parts)
    if (!p.requires_grad() || p.grad().shape() != p.shape()) return concat(parts, 0);
  if (!back_to_back(grads)) return concat(parts, 0);
  std::string name = "[";  // "[a.weight; b.weight]": the graph and the debugger show what it stacks
  for (const Var& p : parts) name += (name.size() > 1 ? "; " : "") + p.impl()->name;
  Var rows(Tensor::view_of(datas[0], 0, shape), /*requires_grad=*/true, name + "]");
  rows.grad() = Tensor::view_of(grads[0], 0, shape);  // accumulate() adds into the parts' .grad
  return rows;
}

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
