// Elementwise ops: forward and backward of each side by side, one C++ type
// per op (so `break lina::MulOp::backward` or
// `break lina::UnaryOp<lina::math::Silu>::backward` stops in that op alone).
// The per-element maths (shared with CUDA) is in core/elementwise_math.h.
#include "autograd/functions.h"
#include "core/profile.h"
#include "dispatch/dispatch.h"
#include "dispatch/launch.h"
#include "dispatch/layout.h"

namespace lina {

// ---- binary, with broadcasting --------------------------------------------------------
// The forward broadcasts a and b to a common shape; the backward therefore
// sums each gradient back to its input's shape (sum_to).
static std::vector<Tensor> sum_to_inputs(const Node& node, const Tensor& da, const Tensor& db) {
  return {sum_to(da, node.inputs[0].shape()), sum_to(db, node.inputs[1].shape())};
}

struct AddOp : Node {
  AddOp() : Node(OpKind::Add) { adds_into_sums = true; }

  static Var apply(const Var& a, const Var& b) {
    Tensor out = dispatch::binary(BinaryFn::Add, a.data(), b.data());
    if (!needs_grad({a, b})) return Var(out);
    return record(out, std::make_shared<AddOp>(), {a, b});
  }

  // d(a+b) = (dout, dout)
  std::vector<Tensor> backward(const Tensor& dout) override {
    return sum_to_inputs(*this, dout, dout);
  }
  // A broadcast input's summed gradient (a bias's: over every row) goes
  // straight into the sum the walk offers, in the same pass.
  std::vector<Tensor> backward_into(const Tensor& dout, const std::vector<Tensor*>& sums) override {
    std::vector<Tensor> grads(2);
    for (size_t i = 0; i < 2; ++i) {
      if (!inputs[i].requires_grad()) continue;
      const Shape& shape = inputs[i].shape();
      if (shape != dout.shape() && sums[i] && add_sum_to(dout, *sums[i])) continue;  // added
      grads[i] = sum_to(dout, shape);
    }
    return grads;
  }
};

struct SubOp : Node {
  SubOp() : Node(OpKind::Sub) {}

  static Var apply(const Var& a, const Var& b) {
    Tensor out = dispatch::binary(BinaryFn::Sub, a.data(), b.data());
    if (!needs_grad({a, b})) return Var(out);
    return record(out, std::make_shared<SubOp>(), {a, b});
  }

  // d(a−b) = (dout, −dout)
  std::vector<Tensor> backward(const Tensor& dout) override {
    return sum_to_inputs(*this, dout, dispatch::unary(UnaryFn::Neg, dout));
  }
};

struct MulOp : Node {
  MulOp() : Node(OpKind::Mul) {}
  Tensor a, b;  // saved operands
  SavedTensors saved() const override { return {{"a", a}, {"b", b}}; }

  static Var apply(const Var& a, const Var& b) {
    Tensor out = dispatch::binary(BinaryFn::Mul, a.data(), b.data());
    if (!needs_grad({a, b})) return Var(out);
    auto node = std::make_shared<MulOp>();
    node->a = a.data();
    node->b = b.data();
    return record(out, node, {a, b});
  }

  // d(ab) = (dout·b, dout·a)
  std::vector<Tensor> backward(const Tensor& dout) override {
    return sum_to_inputs(*this, dispatch::binary(BinaryFn::Mul, dout, b),
                         dispatch::binary(BinaryFn::Mul, dout, a));
  }
};

struct DivOp : Node {
  DivOp() : Node(OpKind::Div) {}
  Tensor b, out;  // saved: the divisor and the quotient
  SavedTensors saved() const override { return {{"b", b}, {"out", out}}; }

  static Var apply(const Var& a, const Var& b) {
    Tensor out = dispatch::binary(BinaryFn::Div, a.data(), b.data());
    if (!needs_grad({a, b})) return Var(out);
    auto node = std::make_shared<DivOp>();
    node->b = b.data();
    node->out = out;
    return record(out, node, {a, b});
  }

  // d(a/b) = (dout / b, −dout·(a/b) / b)
  std::vector<Tensor> backward(const Tensor& dout) override {
    Tensor da = dispatch::binary(BinaryFn::Div, dout, b);
    Tensor db = dispatch::unary(
        UnaryFn::Neg, dispatch::binary(BinaryFn::Div, dispatch::binary(BinaryFn::Mul, dout, out), b));
    return sum_to_inputs(*this, da, db);
  }
};

Var add(const Var& a, const Var& b) { return AddOp::apply(a, b); }
Var sub(const Var& a, const Var& b) { return SubOp::apply(a, b); }
Var mul(const Var& a, const Var& b) { return MulOp::apply(a, b); }
Var div(const Var& a, const Var& b) { return DivOp::apply(a, b); }

// ---- unary ------------------------------------------------------------------------------
// y = f(x; p). backward: dx = dy · f'(x), from F::backward. F is one of the
// math:: structs (math::Silu, ...); F::kFn says which function it is, and
// op_kind_of (core/ops.h) which OpKind the node records.
template <class F>
struct UnaryOp : Node {
  UnaryOp() : Node(op_kind_of(F::kFn)) {}
  double p = 0.0;
  Tensor x, y;  // saved
  SavedTensors saved() const override { return {{"x", x}, {"y", y}}; }

  static Var apply(const Var& x, double p = 0.0) {
    Tensor y = dispatch::unary(F::kFn, x.data(), p);
    if (!needs_grad({x})) return Var(y);
    auto node = std::make_shared<UnaryOp>();
    node->p = p;
    node->x = x.data();
    node->y = y;
    return record(y, node, {x});
  }

  std::vector<Tensor> backward(const Tensor& dy) override {
    return {dispatch::unary_backward(F::kFn, x, y, dy, p)};
  }
};

Var neg(const Var& x) { return UnaryOp<math::Neg>::apply(x); }
Var add_scalar(const Var& x, double c) { return UnaryOp<math::AddScalar>::apply(x, c); }
Var mul_scalar(const Var& x, double c) { return UnaryOp<math::MulScalar>::apply(x, c); }
Var pow_scalar(const Var& x, double p) { return UnaryOp<math::PowScalar>::apply(x, p); }
Var exp(const Var& x) { return UnaryOp<math::Exp>::apply(x); }
Var log(const Var& x) { return UnaryOp<math::Log>::apply(x); }
Var sqrt(const Var& x) { return UnaryOp<math::Sqrt>::apply(x); }
Var rsqrt(const Var& x) { return UnaryOp<math::Rsqrt>::apply(x); }
Var tanh(const Var& x) { return UnaryOp<math::Tanh>::apply(x); }
Var sigmoid(const Var& x) { return UnaryOp<math::Sigmoid>::apply(x); }
Var log_sigmoid(const Var& x) { return UnaryOp<math::LogSigmoid>::apply(x); }
Var silu(const Var& x) { return UnaryOp<math::Silu>::apply(x); }
Var gelu(const Var& x) { return UnaryOp<math::Gelu>::apply(x); }
Var elu(const Var& x, double alpha) { return UnaryOp<math::Elu>::apply(x, alpha); }
Var relu(const Var& x) { return UnaryOp<math::Relu>::apply(x); }

// ---- dropout -------------------------------------------------------------------------------
// y = x ⊙ M with M fixed by the key (0 or 1/(1 − p) per element, core/philox.h).
// y is linear in x, so dx = dy ⊙ M: the backward regenerates M from the key
// instead of keeping it.
struct DropoutOp : Node {
  DropoutOp() : Node(OpKind::Dropout) {}
  DropoutKey key;

  static Var apply(const Var& x, const DropoutKey& key) {
    if (key.p == 0) return x;
    Tensor y = dispatch::dropout(x.data(), key);
    if (!needs_grad({x})) return Var(y);
    auto node = std::make_shared<DropoutOp>();
    node->key = key;
    return record(y, node, {x});
  }

  std::vector<Tensor> backward(const Tensor& dout) override {
    return {dispatch::dropout(dout, key)};
  }
};

Var dropout(const Var& x, const DropoutKey& key) { return DropoutOp::apply(x, key); }

// ---- residual_dropout: a residual connection's sum with a dropped-out branch ------------------------
// y = residual + x ⊙ M, one kernel instead of dropout, then add. backward:
//   dresidual = dy (passed on as it is),   dx = dy ⊙ M (M regenerated from the key)
struct ResidualDropoutOp : Node {
  ResidualDropoutOp() : Node(OpKind::ResidualDropout) {}
  DropoutKey key;

  static Var apply(const Var& residual, const Var& x, const DropoutKey& key) {
    if (key.p == 0) return add(residual, x);
    Tensor y = dispatch::dropout(x.data(), key, residual.data());
    if (!needs_grad({residual, x})) return Var(y);
    auto node = std::make_shared<ResidualDropoutOp>();
    node->key = key;
    return record(y, node, {residual, x});
  }

  std::vector<Tensor> backward(const Tensor& dy) override {
    return {dy, inputs[1].requires_grad() ? dispatch::dropout(dy, key) : Tensor()};
  }
};

Var residual_dropout(const Var& residual, const Var& x, const DropoutKey& key) {
  return ResidualDropoutOp::apply(residual, x, key);
}

// ---- swiglu: the SwiGLU product ---------------------------------------------------------------
// y = silu(gate) ⊙ up, one kernel each way instead of silu, then mul
// (whose backward would keep silu(gate) and run three kernels). gate, up, y [...].
//   dgate = dy ⊙ up ⊙ silu'(gate),   dup = dy ⊙ silu(gate)
// The halves form, swiglu(z): gate and up are the two halves of z's last
// axis, z [..., 2F] → y [..., F], as one product of x with [W_gate; W_up]
// makes them; the kernels read the halves in place (a row stride of 2F) and
// the backward writes dz [..., 2F] whole.
struct SwigluOp : Node {
  SwigluOp() : Node(OpKind::Swiglu) {}
  Tensor gate, up;  // saved: the two inputs, or z twice (halves form)
  bool halves = false;
  SavedTensors saved() const override {
    if (halves) return {{"z", gate}};
    return {{"gate", gate}, {"up", up}};
  }
  // y's rows and their width, and where gate's and up's rows start
  struct Rows {
    int64_t rows, width, stride;
  };
  Rows rows() const {
    const int64_t last = gate.shape().empty() ? 1 : gate.shape().back();
    if (!halves) return {1, gate.numel(), gate.numel()};
    return {gate.numel() / std::max<int64_t>(last, 1), last / 2, last};
  }
  // up's first element: up itself, or z's second half
  Tensor up_start() const { return halves ? Tensor::view_of(gate, rows().width, {gate.numel() - rows().width}) : up; }

  static Var apply(const Var& gate, const Var& up) {
    check_same_shape(gate.data(), up.data(), "swiglu");
    check_same_dtype_device(gate.data(), up.data(), "swiglu");
    auto node = std::make_shared<SwigluOp>();
    node->gate = gate.data();
    node->up = up.data();
    Tensor y = node->forward(gate.shape());
    if (!needs_grad({gate, up})) return Var(y);
    return record(y, node, {gate, up});
  }
  static Var apply_halves(const Var& z) {
    check(z.ndim() >= 1 && z.shape().back() % 2 == 0,
          "swiglu: the halves form needs an even last axis, got " + z.data().describe());
    auto node = std::make_shared<SwigluOp>();
    node->gate = z.data();
    node->halves = true;
    Shape shape = z.shape();
    shape.back() /= 2;
    Tensor y = node->forward(shape);
    if (!needs_grad({z})) return Var(y);
    return record(y, node, {z});
  }
  Tensor forward(const Shape& y_shape) const {
    Tensor y = Tensor::empty(y_shape, gate.dtype(), gate.device());
    const Rows r = rows();
    profile::add_work(3.0 * double(y.nbytes()), 6.0 * double(y.numel()));  // gate, up read; y written
    dispatch::launch::swiglu_forward({gate, up_start(), y, r.rows, r.width, r.stride});
    return y;
  }

  std::vector<Tensor> backward(const Tensor& dy) override {
    const Rows r = rows();
    Tensor dgate = Tensor::empty(gate.shape(), gate.dtype(), gate.device());
    Tensor dup = halves ? Tensor::view_of(dgate, r.width, {dgate.numel() - r.width})
                        : Tensor::empty(up.shape(), up.dtype(), up.device());
    profile::add_work(5.0 * double(dy.nbytes()), 12.0 * double(dy.numel()));  // gate, up, dy read; dgate, dup written
    dispatch::launch::swiglu_backward({gate, up_start(), dy, dgate, dup, r.rows, r.width, r.stride});
    if (halves) return {dgate};  // dz: both halves written
    return {dgate, dup};
  }
};

Var swiglu(const Var& gate, const Var& up) { return SwigluOp::apply(gate, up); }
Var swiglu(const Var& z) { return SwigluOp::apply_halves(z); }

// ---- beta_log_alpha: the recurrent mixers' gates ----------------------------------------------
// z [B, T, N] = x [W_b; W_a]ᵀ, bias [N], u = z + b. One flat output [B·T·N]
// of two contiguous planes: β = σ(u) [B, T, n_beta] (columns < n_beta), then
// log α = log σ(u) = −softplus(−u) [B, T, N − n_beta] (the rest). One kernel
// each way instead of a bias add, a split into two copies, a sigmoid and a
// log_sigmoid and their backwards. Only the output is saved; backward:
//   β columns:      du = dβ · β (1 − β)
//   log α columns:  du = dlogα · σ(−u) = dlogα · (1 − α) = dlogα · (−expm1(log α))
//   dz = du [B, T, N],   dbias[n] = Σ_rows du[:, n]
// Both are added straight into the sums the walk offers (dbias into the
// bias's .grad, dz into z's pending gradient).
static Tensor sum_or_none(const Tensor* sum) { return sum ? *sum : Tensor(); }

struct BetaLogAlphaOp : Node {
  BetaLogAlphaOp() : Node(OpKind::BetaLogAlpha) { adds_into_sums = true; }
  Tensor out;  // saved: β and log α, the planes the backward reads
  SavedTensors saved() const override { return {{"out", out}}; }
  int64_t n_beta = 0;

  static Var apply(const Var& z, const Var& bias, int64_t n_beta) {
    Tensor out = dispatch::beta_log_alpha_forward(z.data(), bias.data(), n_beta);
    if (!needs_grad({z, bias})) return Var(out);
    auto node = std::make_shared<BetaLogAlphaOp>();
    node->out = out;
    node->n_beta = n_beta;
    return record(out, node, {z, bias});
  }

  std::vector<Tensor> backward(const Tensor& dout) override { return backward_into(dout, {nullptr, nullptr}); }

  std::vector<Tensor> backward_into(const Tensor& dout, const std::vector<Tensor*>& sums) override {
    Tensor dz = sum_or_none(sums[0]), dbias = sum_or_none(sums[1]);
    dispatch::beta_log_alpha_backward(out, dout, inputs[0].shape(), inputs[1].dim(0), n_beta, dz,
                                      dbias);  // += where defined
    return {sums[0] ? Tensor() : dz, sums[1] ? Tensor() : dbias};
  }
};

Var beta_log_alpha(const Var& z, const Var& bias, int64_t n_beta) {
  return BetaLogAlphaOp::apply(z, bias, n_beta);
}

}  // namespace lina
