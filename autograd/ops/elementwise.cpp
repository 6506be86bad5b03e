// Elementwise ops: forward and backward of each side by side. The
// per-element maths (shared with CUDA) is in core/elementwise_math.h.
#include "autograd/functions.h"
#include "core/kernels.h"
#include "core/layout.h"

namespace lina {

// ---- binary, with broadcasting --------------------------------------------------------
// The forward broadcasts a and b to a common shape; the backward therefore
// sums each gradient back to its input's shape (sum_to).
struct BinaryOp : Node {
  using Node::Node;
  BinaryFn fn = BinaryFn::Add;
  Tensor a, b, out;  // saved: mul needs a, b; div needs b and out

  static Var apply(BinaryFn fn, OpKind kind, const Var& a, const Var& b) {
    Tensor out = kernels::binary(fn, a.data(), b.data());
    if (!needs_grad({a, b})) return Var(out);
    auto node = std::make_shared<BinaryOp>(kind);
    node->fn = fn;
    if (fn == BinaryFn::Mul || fn == BinaryFn::Div) {
      node->a = a.data();
      node->b = b.data();
    }
    if (fn == BinaryFn::Div) node->out = out;
    return record(out, node, {a, b});
  }

  std::vector<Tensor> backward(const Tensor& dout) override {
    const Shape& sa = inputs[0].shape();
    const Shape& sb = inputs[1].shape();
    Tensor da, db;
    switch (fn) {
      case BinaryFn::Add:  // d(a+b) = (dout, dout)
        da = dout;
        db = dout;
        break;
      case BinaryFn::Sub:  // d(a−b) = (dout, −dout)
        da = dout;
        db = kernels::unary(UnaryFn::Neg, dout);
        break;
      case BinaryFn::Mul:  // d(ab) = (dout·b, dout·a)
        da = kernels::binary(BinaryFn::Mul, dout, b);
        db = kernels::binary(BinaryFn::Mul, dout, a);
        break;
      case BinaryFn::Div:  // d(a/b) = (dout / b, −dout·(a/b) / b)
        da = kernels::binary(BinaryFn::Div, dout, b);
        db = kernels::unary(UnaryFn::Neg,
                            kernels::binary(BinaryFn::Div, kernels::binary(BinaryFn::Mul, dout, out), b));
        break;
      case BinaryFn::Count: break;
    }
    return {sum_to(da, sa), sum_to(db, sb)};
  }
};

Var add(const Var& a, const Var& b) { return BinaryOp::apply(BinaryFn::Add, OpKind::Add, a, b); }
Var sub(const Var& a, const Var& b) { return BinaryOp::apply(BinaryFn::Sub, OpKind::Sub, a, b); }
Var mul(const Var& a, const Var& b) { return BinaryOp::apply(BinaryFn::Mul, OpKind::Mul, a, b); }
Var div(const Var& a, const Var& b) { return BinaryOp::apply(BinaryFn::Div, OpKind::Div, a, b); }

// ---- unary ------------------------------------------------------------------------------
// y = f(x; p). backward: dx = dy · f'(x), from math::<Fn>::backward.
struct UnaryOp : Node {
  using Node::Node;
  UnaryFn fn = UnaryFn::Neg;
  double p = 0.0;
  Tensor x, y;  // saved

  static Var apply(UnaryFn fn, const Var& x, double p = 0.0) {
    Tensor y = kernels::unary(fn, x.data(), p);
    if (!needs_grad({x})) return Var(y);
    // UnaryFn and OpKind list the unary ops in the same order, from Neg.
    auto node = std::make_shared<UnaryOp>(OpKind(int(OpKind::Neg) + int(fn)));
    node->fn = fn;
    node->p = p;
    node->x = x.data();
    node->y = y;
    return record(y, node, {x});
  }

  std::vector<Tensor> backward(const Tensor& dy) override {
    return {kernels::unary_backward(fn, x, y, dy, p)};
  }
};
static_assert(int(OpKind::Relu) - int(OpKind::Neg) == int(UnaryFn::Relu),
              "OpKind and UnaryFn must list the unary ops in the same order");

Var neg(const Var& x) { return UnaryOp::apply(UnaryFn::Neg, x); }
Var add_scalar(const Var& x, double c) { return UnaryOp::apply(UnaryFn::AddScalar, x, c); }
Var mul_scalar(const Var& x, double c) { return UnaryOp::apply(UnaryFn::MulScalar, x, c); }
Var pow_scalar(const Var& x, double p) { return UnaryOp::apply(UnaryFn::PowScalar, x, p); }
Var exp(const Var& x) { return UnaryOp::apply(UnaryFn::Exp, x); }
Var log(const Var& x) { return UnaryOp::apply(UnaryFn::Log, x); }
Var sqrt(const Var& x) { return UnaryOp::apply(UnaryFn::Sqrt, x); }
Var rsqrt(const Var& x) { return UnaryOp::apply(UnaryFn::Rsqrt, x); }
Var tanh(const Var& x) { return UnaryOp::apply(UnaryFn::Tanh, x); }
Var sigmoid(const Var& x) { return UnaryOp::apply(UnaryFn::Sigmoid, x); }
Var log_sigmoid(const Var& x) { return UnaryOp::apply(UnaryFn::LogSigmoid, x); }
Var silu(const Var& x) { return UnaryOp::apply(UnaryFn::Silu, x); }
Var gelu(const Var& x) { return UnaryOp::apply(UnaryFn::Gelu, x); }
Var elu(const Var& x, double alpha) { return UnaryOp::apply(UnaryFn::Elu, x, alpha); }
Var relu(const Var& x) { return UnaryOp::apply(UnaryFn::Relu, x); }

}  // namespace lina
