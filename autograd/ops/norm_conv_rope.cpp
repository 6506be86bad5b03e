// RMSNorm, L2 normalisation, causal depthwise conv1d (alone and fused with
// SiLU) and RoPE: forward and backward side by side (docs/recurrence.md §4.1,
// 4.2, 4.5, 4.6).
#include <utility>

#include "autograd/functions.h"
#include "dispatch/dispatch.h"

namespace lina {

// What an op's backward_into hands dispatch as a gradient to add into: the
// sum the walk offers (a pending gradient, a leaf's .grad), else undefined.
static Tensor sum_or_none(const Tensor* sum) { return sum ? *sum : Tensor(); }

// ---- rms_norm, and gated ---------------------------------------------------------------
// x [..., n], weight [n]. ρ = (mean(x²) + ε)^(−1/2) per row, x̂ = ρx, y = w ⊙ x̂.
// backward, with h = dy ⊙ w:
//   dx = ρ (h − x̂ (x̂ᵀh) / n)       (the normalisation removes the radial part of h)
//   dw = Σ_rows dy ⊙ x̂             (over every row: the per-head form shares w across heads)
// Gated (rms_norm_gated), y = silu(g) ⊙ m with m = w ⊙ x̂, the norm's dy is
// dn = dy ⊙ silu(g) in the lines above, and dg = dy ⊙ m ⊙ silu'(g). The gate
// may be columns of a wider product z (the recurrent mixers' one product):
// its backward, run before z's other readers', then returns z's whole
// gradient, 0 outside the gate's columns, for them to add into.
// Each gradient is added straight into the sum the walk offers (dw into w's .grad).
struct RmsNormOp : Node {
  RmsNormOp() : Node(OpKind::RmsNorm) { adds_into_sums = true; }
  Tensor x, weight, gate;  // gate: undefined unless gated (RmsNormGatedOp)
  int64_t gate_column = 0;  // where the gate starts in gate's last dim (dispatch::rms_norm_forward)
  Tensor rstd;  // ρ per row, [rows]; x̂ is recomputed from x
  SavedTensors saved() const override {
    if (gate.defined()) return {{"x", x}, {"weight", weight}, {"gate", gate}, {"rstd", rstd}};
    return {{"x", x}, {"weight", weight}, {"rstd", rstd}};
  }

  // The forward of both types (Op: RmsNormOp, or RmsNormGatedOp with a gate).
  template <class Op>
  static Var apply(const Var& x, const Var& weight, const Var* gate, double eps, int64_t gate_column = 0) {
    Tensor rstd;
    Tensor y = dispatch::rms_norm_forward(x.data(), weight.data(), eps, rstd, gate ? gate->data() : Tensor(),
                                          gate_column);
    if (!needs_grad(gate ? std::vector<Var>{x, weight, *gate} : std::vector<Var>{x, weight})) return Var(y);
    auto node = std::make_shared<Op>();
    node->x = x.data();
    node->weight = weight.data();
    node->rstd = rstd;
    if (!gate) return record(y, node, {x, weight});
    node->gate = gate->data();
    node->gate_column = gate_column;
    return record(y, node, {x, weight, *gate});
  }

  std::vector<Tensor> backward(const Tensor& dy) override { return backward_into(dy, {nullptr, nullptr}); }

  std::vector<Tensor> backward_into(const Tensor& dy, const std::vector<Tensor*>& sums) override {
    Tensor dx = sum_or_none(sums[0]), dweight = sum_or_none(sums[1]);
    dispatch::rms_norm_backward(x, weight, rstd, dy, dx, dweight);  // += where defined
    return {sums[0] ? Tensor() : dx, sums[1] ? Tensor() : dweight};
  }

 protected:
  explicit RmsNormOp(OpKind kind) : Node(kind) { adds_into_sums = true; }
};

// The gated norm: the same fields and forward, a gate input and its gradient.
struct RmsNormGatedOp : RmsNormOp {
  RmsNormGatedOp() : RmsNormOp(OpKind::RmsNormGated) {}

  std::vector<Tensor> backward(const Tensor& dy) override {
    return backward_into(dy, {nullptr, nullptr, nullptr});
  }

  std::vector<Tensor> backward_into(const Tensor& dy, const std::vector<Tensor*>& sums) override {
    Tensor dx = sum_or_none(sums[0]), dweight = sum_or_none(sums[1]), dgate = sum_or_none(sums[2]);
    dispatch::rms_norm_backward(x, weight, rstd, dy, dx, dweight, gate, &dgate, gate_column);  // += where defined
    return {sums[0] ? Tensor() : dx, sums[1] ? Tensor() : dweight, sums[2] ? Tensor() : dgate};
  }
};

Var rms_norm(const Var& x, const Var& weight, double eps) {
  return RmsNormOp::apply<RmsNormOp>(x, weight, nullptr, eps);
}
Var rms_norm_gated(const Var& x, const Var& weight, const Var& gate, double eps, int64_t gate_column) {
  return RmsNormOp::apply<RmsNormGatedOp>(x, weight, &gate, eps, gate_column);
}

// ---- residual_rms_norm: a residual sum and the norm after it, two outputs -------------------
// sum = x + h ⊙ M (M regenerated from the key), y = w ⊙ ρ·sum. The op's Var
// is y; the sum is its second output (second_output), whose gradient dsum
// arrives before this backward runs. backward, as rms_norm's then
// residual_dropout's would run:
//   dx = dsum + ρ (dy ⊙ w − x̂ c)   (rms_norm's dx, added into dsum in place)
//   dh = dx ⊙ M,   dw = Σ_rows dy ⊙ x̂
struct ResidualRmsNormOp : Node {
  ResidualRmsNormOp() : Node(OpKind::ResidualRmsNorm) { adds_into_sums = true; }
  Tensor sum, weight;
  Tensor rstd;  // ρ per row, [rows]
  DropoutKey key;
  SavedTensors saved() const override { return {{"sum", sum}, {"weight", weight}, {"rstd", rstd}}; }

  static ResidualNormed apply(const Var& x, const Var& h, const DropoutKey& key, const Var& weight, double eps,
                              bool keep_sum) {
    Tensor sum, rstd;
    Tensor y = dispatch::residual_rms_norm_forward(x.data(), h.data(), weight.data(), eps, key, sum, rstd);
    if (!needs_grad({x, h, weight})) return {keep_sum ? Var(sum) : Var(), Var(y)};
    auto node = std::make_shared<ResidualRmsNormOp>();
    node->sum = sum;
    node->weight = weight.data();
    node->rstd = rstd;
    node->key = key;
    Var normed = record(y, node, {x, h, weight});
    return {keep_sum ? second_output(sum, normed) : Var(), normed};
  }

  std::vector<Tensor> backward(const Tensor& dy) override { return backward_into(dy, {nullptr, nullptr, nullptr}); }

  // dy is undefined where the norm got no gradient (only the sum was used)
  std::vector<Tensor> backward_into(const Tensor& dy, const std::vector<Tensor*>& sums) override {
    Tensor dsum = std::exchange(second_output_grad, Tensor());
    if (dsum.defined() && !dsum.sole_owner()) dsum = dsum.clone();  // written in place below
    if (!dy.defined()) return {dsum, key.p > 0 ? dispatch::dropout(dsum, key) : dsum, Tensor()};
    Tensor dh, dweight = sum_or_none(sums[2]);
    dispatch::residual_rms_norm_backward(sum, weight, rstd, dy, key, dsum, dh, dweight);  // dsum becomes dx
    return {dsum, dh, sums[2] ? Tensor() : dweight};
  }
};

ResidualNormed residual_rms_norm(const Var& x, const Var& h, const DropoutKey& key, const Var& weight, double eps,
                                 bool keep_sum) {
  return ResidualRmsNormOp::apply(x, h, key, weight, eps, keep_sum);
}

// ---- l2_norm ------------------------------------------------------------------------------
// x [..., n]: y = s · x / max(‖x‖, ε) per row, s = scale. backward, with
// ŷ = x / ‖x‖ (recomputed from x):
//   ‖x‖ > ε:  dx = s (dy − ŷ (ŷᵀdy)) / ‖x‖   (the unit vector's Jacobian, times s)
//   else:     dx = s dy / ε                  (y = s x / ε is linear)
struct L2NormOp : Node {
  L2NormOp() : Node(OpKind::L2Norm) {}
  Tensor x;
  Tensor norm;  // ‖x‖ per row, [rows]
  SavedTensors saved() const override { return {{"x", x}, {"norm", norm}}; }
  double eps = 0.0, scale = 1.0;

  static Var apply(const Var& x, double eps, double scale) {
    Tensor norm;
    Tensor y = dispatch::l2_norm_forward(x.data(), eps, scale, norm);
    if (!needs_grad({x})) return Var(y);
    auto node = std::make_shared<L2NormOp>();
    node->x = x.data();
    node->norm = norm;
    node->eps = eps;
    node->scale = scale;
    return record(y, node, {x});
  }

  std::vector<Tensor> backward(const Tensor& dy) override {
    return {dispatch::l2_norm_backward(x, norm, dy, eps, scale)};
  }
};

Var l2_norm(const Var& x, double eps, double scale) { return L2NormOp::apply(x, eps, scale); }

// ---- causal_conv1d --------------------------------------------------------------------------
// x [B, T, C], weight [C, K]: y_t[c] = Σ_j w[c, j] x_{t−K+1+j}[c] (zero left padding).
// backward, each tap j links input s to output t = s + K − 1 − j:
//   dx_s[c]   = Σ_j w[c, j] dy_{s+K−1−j}[c]          (outputs past T dropped)
//   dw[c, j]  = Σ_b Σ_t dy_t[c] x_{t−K+1+j}[c]       (inputs before 0 dropped)
struct CausalConv1dOp : Node {
  CausalConv1dOp() : Node(OpKind::CausalConv1d) { adds_into_sums = true; }
  Tensor x, weight;
  SavedTensors saved() const override { return {{"x", x}, {"weight", weight}}; }

  static Var apply(const Var& x, const Var& weight) {
    Tensor y = dispatch::causal_conv1d_forward(x.data(), weight.data());
    if (!needs_grad({x, weight})) return Var(y);
    auto node = std::make_shared<CausalConv1dOp>();
    node->x = x.data();
    node->weight = weight.data();
    return record(y, node, {x, weight});
  }

  std::vector<Tensor> backward(const Tensor& dy) override { return backward_into(dy, {nullptr, nullptr}); }

  // dw added straight into the weight's .grad where the walk offers it
  std::vector<Tensor> backward_into(const Tensor& dy, const std::vector<Tensor*>& sums) override {
    Tensor dx, dweight = sum_or_none(sums[1]);
    dispatch::causal_conv1d_backward(x, weight, dy, dx, dweight);
    return {dx, sums[1] ? Tensor() : dweight};
  }
};

Var causal_conv1d(const Var& x, const Var& weight) { return CausalConv1dOp::apply(x, weight); }

// ---- causal_conv1d_silu: causal_conv1d, then SiLU, as one op ----------------------------------------
// z = causal_conv1d(x, w), y = silu(z) = z σ(z). Only x and w are saved (the
// composition would also keep z, one more [B, T, C] per conv). backward:
//   dz = dy ⊙ silu'(z) = dy ⊙ σ(z) (1 + z (1 − σ(z)))   (z recomputed: K taps per element)
//   dx, dw = causal_conv1d's backward of dz (above)
struct CausalConv1dSiluOp : Node {
  CausalConv1dSiluOp() : Node(OpKind::CausalConv1dSilu) { adds_into_sums = true; }
  Tensor x, weight;
  SavedTensors saved() const override { return {{"x", x}, {"weight", weight}}; }

  static Var apply(const Var& x, const Var& weight) {
    Tensor y = dispatch::causal_conv1d_silu_forward(x.data(), weight.data());
    if (!needs_grad({x, weight})) return Var(y);
    auto node = std::make_shared<CausalConv1dSiluOp>();
    node->x = x.data();
    node->weight = weight.data();
    return record(y, node, {x, weight});
  }

  std::vector<Tensor> backward(const Tensor& dy) override { return backward_into(dy, {nullptr, nullptr}); }

  // dw added straight into the weight's .grad where the walk offers it
  std::vector<Tensor> backward_into(const Tensor& dy, const std::vector<Tensor*>& sums) override {
    Tensor dx, dweight = sum_or_none(sums[1]);
    dispatch::causal_conv1d_silu_backward(x, weight, dy, dx, dweight);
    return {dx, sums[1] ? Tensor() : dweight};
  }
};

Var causal_conv1d_silu(const Var& x, const Var& weight) { return CausalConv1dSiluOp::apply(x, weight); }

// ---- causal_conv1d_silu_l2_norm: causal_conv1d_silu, then each head L2-normalised, as one op -------------
// y = causal_conv1d_silu(x, w); q = s · y / max(‖y‖, ε) for each head (group of
// `head` channels): the feature map of q and k (every recurrent mixer but
// linear attention's). With planes (the mixer's [q | k | v] channels): the
// output is [planes, B, T, C/planes], q's, k's and v's planes one after
// another, only the first `normed` planes normalised, so that the scan
// reads each plane as a view and nothing is split. Saved: x, w and one norm
// per normalised head (the composition would also keep z and y, two more
// [B, T, C]). backward: y recomputed, dy = l2_norm's backward of dq (above)
// in the normalised planes, dq itself in the others, then
// causal_conv1d_silu's backward of dy. dx is added into the sum the walk
// offers (z's gradient, begun by the gated norm's backward), else fresh.
struct CausalConv1dSiluL2NormOp : Node {
  CausalConv1dSiluL2NormOp() : Node(OpKind::CausalConv1dSiluL2Norm) { adds_into_sums = true; }
  Tensor x, weight;
  Tensor norm;  // ‖y‖ per normalised head, [B, T, normed heads]
  SavedTensors saved() const override { return {{"x", x}, {"weight", weight}, {"norm", norm}}; }
  dispatch::ConvPlanes planes;
  double eps = 0.0, scale = 1.0;

  static Var apply(const Var& x, const Var& weight, const dispatch::ConvPlanes& planes, double scale,
                   double eps) {
    Tensor norm;
    Tensor q = dispatch::causal_conv1d_silu_l2_norm_forward(x.data(), weight.data(), planes, eps, scale, norm);
    if (!needs_grad({x, weight})) return Var(q);
    auto node = std::make_shared<CausalConv1dSiluL2NormOp>();
    node->x = x.data();
    node->weight = weight.data();
    node->norm = norm;
    node->planes = planes;
    node->eps = eps;
    node->scale = scale;
    return record(q, node, {x, weight});
  }

  std::vector<Tensor> backward(const Tensor& dq) override { return backward_into(dq, {nullptr, nullptr}); }

  // dx and dw added straight into the sums the walk offers (dw: the weight's .grad)
  std::vector<Tensor> backward_into(const Tensor& dq, const std::vector<Tensor*>& sums) override {
    Tensor dx = sum_or_none(sums[0]), dweight = sum_or_none(sums[1]);
    dispatch::causal_conv1d_silu_l2_norm_backward(x, weight, norm, dq, planes, eps, scale, dx, dweight);
    return {sums[0] ? Tensor() : dx, sums[1] ? Tensor() : dweight};
  }
};

Var causal_conv1d_silu_l2_norm(const Var& x, const Var& weight, int64_t head, double scale, double eps) {
  return CausalConv1dSiluL2NormOp::apply(x, weight, {head, 1, 1}, scale, eps);
}

Var causal_conv1d_silu_l2_norm_planes(const Var& x, const Var& weight, int64_t head, int64_t planes,
                                      int64_t normed, double scale, double eps) {
  return CausalConv1dSiluL2NormOp::apply(x, weight, {head, planes, normed}, scale, eps);
}

// ---- rope -----------------------------------------------------------------------------------
// x [B, T, H, D]: each interleaved pair (2j, 2j + 1) is rotated by θ = (pos0 + t) · base^(−2j/D).
// A rotation is orthogonal, so the backward is the inverse rotation (angle −θ):
//   dx_j = dy_j cos θ + dy_{j+D/2} sin θ,   dx_{j+D/2} = dy_{j+D/2} cos θ − dy_j sin θ
struct RopeOp : Node {
  RopeOp() : Node(OpKind::Rope) {}
  int64_t pos0 = 0;
  double base = 10000.0;

  static Var apply(const Var& x, int64_t pos0, double base) {
    Tensor y = dispatch::rope_apply(x.data(), pos0, base, /*inverse=*/false);
    if (!needs_grad({x})) return Var(y);
    auto node = std::make_shared<RopeOp>();
    node->pos0 = pos0;
    node->base = base;
    return record(y, node, {x});
  }

  std::vector<Tensor> backward(const Tensor& dy) override {
    return {dispatch::rope_apply(dy, pos0, base, /*inverse=*/true)};
  }
};

Var rope(const Var& x, int64_t pos0, double base) { return RopeOp::apply(x, pos0, base); }

}  // namespace lina
