// Backend dispatch for the neural-network ops: softmax, log-softmax,
// cross-entropy, embedding, RMSNorm, L2 norm, causal conv1d, RoPE, the
// recurrent mixers' gates (beta_log_alpha).
#include <cstdlib>
#include <cstring>
#include <string>

#include "backend_cpu/cpu_kernels.h"
#include "backend_cuda/cuda_kernels.h"
#include "dispatch/backends.h"
#include "dispatch/dispatch.h"

namespace lina::dispatch {

using detail::on_backend;

// ---- softmax, log-softmax, cross-entropy, embedding ----

namespace {

// x viewed as [rows, n] over its last axis; the last axis must not be empty.
int64_t rows_of_last_axis(const Tensor& x, const char* op) {
  check_ndim_at_least(x, 1, op);
  int64_t n = x.dim(-1);
  check(n > 0, std::string(op) + ": the last axis is empty in " + x.describe());
  return x.numel() / n;
}

// ids: int32 with every entry in [0, limit); `what` names an entry ("id").
// CUDA ids are not read back here (that would stop the GPU every step): the
// kernels check each id they read, and the first bad one is reported at the
// next read of device memory with this same message (backend_cuda/memory.cu).
void check_index_range(const Tensor& ids, int64_t limit, const char* op, const char* what) {
  check(ids.dtype() == DType::I32,
        std::string(op) + ": " + what + "s must be int32, got " + ids.describe());
  switch (ids.device()) {
    case Device::Cpu:
      for (int32_t id : ids.to_vector<int32_t>())
        check(id >= 0 && id < limit, std::string(op) + ": " + what + " " + std::to_string(id) +
                                         " out of range for vocabulary " + std::to_string(limit));
      return;
    case Device::Cuda: return;
  }
}

// logits [..., V] without the last axis: the shape of targets and mask.
Shape positions_shape(const Tensor& logits) {
  return Shape(logits.shape().begin(), logits.shape().end() - 1);
}

}  // namespace

Tensor softmax_forward(const Tensor& x, bool causal) {
  check_float(x, "softmax");
  int64_t R = rows_of_last_axis(x, "softmax");
  int64_t Tq = 1;
  if (causal) {
    check_ndim_at_least(x, 2, "softmax");
    Tq = x.dim(-2);
    check(x.dim(-1) >= Tq, "softmax: causal needs [..., Tq, Tk] with Tk >= Tq, got " +
                               shape_str(x.shape()));
  }
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  profile::add_work(detail::bytes_of(x, y), 4.0 * double(x.numel()));
  on_backend(x, "softmax", [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::softmax_forward(x.data<T>(), y.data<T>(), R, x.dim(-1), Tq, causal);
  });
  return y;
}

Tensor softmax_backward(const Tensor& y, const Tensor& dy) {
  check_same_shape(y, dy, "softmax_backward");
  check_same_dtype_device(y, dy, "softmax_backward");
  int64_t R = rows_of_last_axis(y, "softmax_backward");
  Tensor dx = Tensor::empty(y.shape(), y.dtype(), y.device());
  profile::add_work(detail::bytes_of(y, dy, dx), 4.0 * double(y.numel()));
  on_backend(y, "softmax_backward", [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::softmax_backward(y.data<T>(), dy.data<T>(), dx.data<T>(), R, y.dim(-1));
  });
  return dx;
}

Tensor log_softmax_forward(const Tensor& x) {
  check_float(x, "log_softmax");
  int64_t R = rows_of_last_axis(x, "log_softmax");
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  profile::add_work(detail::bytes_of(x, y), 4.0 * double(x.numel()));
  on_backend(x, "log_softmax", [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::log_softmax_forward(x.data<T>(), y.data<T>(), R, x.dim(-1));
  });
  return y;
}

Tensor log_softmax_backward(const Tensor& y, const Tensor& dy) {
  check_same_shape(y, dy, "log_softmax_backward");
  check_same_dtype_device(y, dy, "log_softmax_backward");
  int64_t R = rows_of_last_axis(y, "log_softmax_backward");
  Tensor dx = Tensor::empty(y.shape(), y.dtype(), y.device());
  profile::add_work(detail::bytes_of(y, dy, dx), 4.0 * double(y.numel()));
  on_backend(y, "log_softmax_backward", [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::log_softmax_backward(y.data<T>(), dy.data<T>(), dx.data<T>(), R, y.dim(-1));
  });
  return dx;
}

Tensor cross_entropy_forward(const Tensor& logits, const Tensor& targets, const Tensor& mask,
                             Tensor& dlogits_out, const Tensor& mask_count) {
  const char* op = "cross_entropy";
  check_float(logits, op);
  int64_t R = rows_of_last_axis(logits, op);
  int64_t V = logits.dim(-1);
  Shape positions = positions_shape(logits);
  check(targets.defined() && targets.shape() == positions,
        std::string(op) + ": targets " + (targets.defined() ? shape_str(targets.shape()) : "(none)") +
            " do not match logits " + shape_str(logits.shape()) + " (expected " +
            shape_str(positions) + ")");
  check(targets.device() == logits.device(),
        std::string(op) + ": device mismatch " + logits.describe() + " vs " + targets.describe());
  if (mask.defined()) {
    check(mask.shape() == positions, std::string(op) + ": mask " + shape_str(mask.shape()) +
                                         " does not match logits " + shape_str(logits.shape()) +
                                         " (expected " + shape_str(positions) + ")");
    check_same_dtype_device(logits, mask, op);
  }
  if (mask_count.defined()) {
    check(mask.defined() && mask_count.numel() == 1,
          std::string(op) + ": a mask count needs a mask and is one number, got " + mask_count.describe());
    check_same_dtype_device(logits, mask_count, op);
  }
  check_index_range(targets, V, op, "target");
  dlogits_out = Tensor::empty(logits.shape(), logits.dtype(), logits.device());
  Tensor loss = Tensor::empty({}, logits.dtype(), logits.device());
  profile::add_work(detail::bytes_of(logits, targets, mask, dlogits_out), 6.0 * double(logits.numel()));
  on_backend(logits, op, [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::cross_entropy_forward(logits.data<T>(), targets.data<int32_t>(),
                             mask.defined() ? mask.data<T>() : nullptr,
                             mask_count.defined() ? mask_count.data<T>() : nullptr, dlogits_out.data<T>(),
                             loss.data<T>(), R, V);
  });
  return loss;
}

Tensor embedding_forward(const Tensor& weight, const Tensor& ids) {
  const char* op = "embedding";
  check_float(weight, op);
  check(weight.ndim() == 2, std::string(op) + ": weight must be [V, C], got " + weight.describe());
  check(ids.device() == weight.device(),
        std::string(op) + ": device mismatch " + weight.describe() + " vs " + ids.describe());
  int64_t V = weight.dim(0), C = weight.dim(1);
  check_index_range(ids, V, op, "id");
  Shape out_shape = ids.shape();
  out_shape.push_back(C);
  Tensor out = Tensor::empty(out_shape, weight.dtype(), weight.device());
  profile::add_work(detail::bytes_of(ids) + 2 * detail::bytes_of(out), 0);
  on_backend(weight, op, [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::embedding_forward(weight.data<T>(), ids.data<int32_t>(), out.data<T>(), ids.numel(), V, C);
  });
  return out;
}

// dweight [vocab, C] = (or += with accumulate) Σ dy[n] over the n with ids[n] = v.
static void embedding_backward_into(const Tensor& dy, const Tensor& ids, Tensor& dweight, bool accumulate) {
  const char* op = "embedding_backward";
  check_float(dy, op);
  Shape expected = ids.shape();
  expected.push_back(dy.ndim() ? dy.dim(-1) : 0);
  check(ids.dtype() == DType::I32 && dy.shape() == expected,
        std::string(op) + ": gradient " + shape_str(dy.shape()) + " does not match ids " +
            ids.describe());
  const int64_t vocab = dweight.dim(0), C = dy.dim(-1);
  check(dweight.shape() == Shape{vocab, C}, std::string(op) + ": the weight's gradient " + dweight.describe() +
                                                " is not [vocab, " + std::to_string(C) + "]");
  check_same_dtype_device(dy, dweight, op);
  profile::add_work(detail::bytes_of(dy, ids, dweight), double(dy.numel()));
  on_backend(dy, op, [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::embedding_backward(dy.data<T>(), ids.data<int32_t>(), dweight.data<T>(), ids.numel(), vocab, C,
                          accumulate);
  });
}

Tensor embedding_backward(const Tensor& dy, const Tensor& ids, int64_t vocab) {
  Tensor dweight = Tensor::empty({vocab, dy.ndim() ? dy.dim(-1) : 0}, dy.dtype(), dy.device());
  embedding_backward_into(dy, ids, dweight, false);
  return dweight;
}

void embedding_backward_add(const Tensor& dy, const Tensor& ids, Tensor& dweight) {
  embedding_backward_into(dy, ids, dweight, true);
}

Tensor argmax_last(const Tensor& x) {
  const char* op = "argmax_last";
  check_float(x, op);
  int64_t R = rows_of_last_axis(x, op);
  Tensor out = Tensor::empty(positions_shape(x), DType::I32, x.device());
  on_backend(x, op, [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::argmax_last(x.data<T>(), out.data<int32_t>(), R, x.dim(-1));
  });
  return out;
}

// ---- rms_norm, l2_norm, causal conv1d, rope ----

namespace {

// Rows of a [..., n] tensor: numel / n.
int64_t row_count(const Tensor& x) { return x.dim(-1) == 0 ? 0 : x.numel() / x.dim(-1); }

// x [..., n] and weight [n].
void check_row_weight(const Tensor& x, const Tensor& weight, const char* op) {
  check_ndim_at_least(x, 1, op);
  check_same_dtype_device(x, weight, op);
  check(weight.ndim() == 1 && weight.dim(0) == x.dim(-1),
        std::string(op) + ": weight " + shape_str(weight.shape()) + " does not match last dim of " +
            shape_str(x.shape()));
}

// An output gradient the caller may hand in to be added into: true where
// `grad` is defined (checked to have `like`'s shape and x's dtype and
// device), else false, `grad` then a fresh tensor of that shape and type.
bool add_into_or_fresh(Tensor& grad, const Tensor& like, const Tensor& x, const char* what) {
  if (!grad.defined()) {
    grad = Tensor::empty(like.shape(), x.dtype(), x.device());
    return false;
  }
  check_same_shape(grad, like, what);
  check_same_dtype_device(grad, x, what);
  return true;
}

// The same for a gradient of shape `shape` (an input the backward does not keep).
bool add_into_or_fresh(Tensor& grad, const Shape& shape, const Tensor& x, const char* what) {
  if (!grad.defined()) {
    grad = Tensor::empty(shape, x.dtype(), x.device());
    return false;
  }
  check(grad.shape() == shape,
        std::string(what) + ": shape mismatch " + shape_str(grad.shape()) + " vs " + shape_str(shape));
  check_same_dtype_device(grad, x, what);
  return true;
}

// x [B, T, C] and weight [C, K]; with wider_x, x [B, T, ld ≥ C] whose first
// C columns the conv reads.
void check_conv(const Tensor& x, const Tensor& weight, const char* op = "causal_conv1d", bool wider_x = false) {
  check(x.ndim() == 3, std::string(op) + ": expected x [B, T, C], got " + shape_str(x.shape()));
  check_same_dtype_device(x, weight, op);
  const bool channels_fit = wider_x ? weight.dim(0) <= x.dim(2) : weight.dim(0) == x.dim(2);
  check(weight.ndim() == 2 && channels_fit && weight.dim(1) >= 1,
        std::string(op) + ": weight " + shape_str(weight.shape()) + " is not [C, K] with C " +
            (wider_x ? "≤ " : "= ") + std::to_string(x.dim(2)) + " channels of x " + shape_str(x.shape()));
}

// x [B, T, C], weight [C, K] and dy like x.
void check_conv_backward(const Tensor& x, const Tensor& weight, const Tensor& dy, const char* op) {
  check_conv(x, weight, op);
  check_same_shape(x, dy, op);
  check_same_dtype_device(x, dy, op);
}

}  // namespace

// Where a gate lies (GateColumns), after checking it: x's shape, or a wider
// product [..., ld] whose leading dims are x's first ones, the gate taking
// its columns [column, column + cols), cols the numel of x's other dims.
// x's dtype and device. (No gate: any columns, unread.)
static GateColumns check_gate(const Tensor& x, const Tensor& gate, int64_t column, const char* op) {
  if (!gate.defined()) return {};
  check_same_dtype_device(x, gate, op);
  const int64_t lead = gate.ndim() - 1;  // the dims the gate shares with x
  bool fits = lead >= 0 && lead < x.ndim();
  for (int64_t i = 0; fits && i < lead; ++i) fits = gate.dim(i) == x.dim(i);
  int64_t cols = 1;
  for (int64_t i = lead; fits && i < x.ndim(); ++i) cols *= x.dim(i);
  fits = fits && column >= 0 && column + cols <= gate.dim(-1);
  check(fits, std::string(op) + ": gate " + shape_str(gate.shape()) + " from column " + std::to_string(column) +
                  " is neither x's shape " + shape_str(x.shape()) + " nor a wider product holding x's gates");
  return {cols > 0 ? cols : 1, gate.dim(-1), column};  // an empty x reads no gate
}

Tensor rms_norm_forward(const Tensor& x, const Tensor& weight, double eps, Tensor& rstd_out,
                        const Tensor& gate, int64_t gate_column) {
  check_row_weight(x, weight, "rms_norm");
  const GateColumns columns = check_gate(x, gate, gate_column, "rms_norm_gated");
  const int64_t rows = row_count(x), n = x.dim(-1);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  rstd_out = Tensor::empty({rows}, x.dtype(), x.device());
  profile::add_work(detail::bytes_of(x, weight, gate, y, rstd_out), (gate.defined() ? 10.0 : 4.0) * double(x.numel()));
  on_backend(x, "rms_norm", [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::rms_norm_forward(x.data<T>(), weight.data<T>(), gate.defined() ? gate.data<T>() : nullptr, columns,
                        y.data<T>(), rstd_out.data<T>(), rows, n, T(eps));
  });
  return y;
}

void rms_norm_backward(const Tensor& x, const Tensor& weight, const Tensor& rstd, const Tensor& dy,
                       Tensor& dx, Tensor& dweight, const Tensor& gate, Tensor* dgate, int64_t gate_column) {
  check_row_weight(x, weight, "rms_norm_backward");
  check_same_shape(x, dy, "rms_norm_backward");
  check_same_dtype_device(x, dy, "rms_norm_backward");
  const GateColumns columns = check_gate(x, gate, gate_column, "rms_norm_gated_backward");
  check(gate.defined() == (dgate != nullptr), "rms_norm_backward: a gate needs its gradient's tensor, and only a gate");
  const int64_t rows = row_count(x), n = x.dim(-1);
  check(rstd.numel() == rows, "rms_norm_backward: rstd " + shape_str(rstd.shape()) +
                                  " does not hold one value per row of " + shape_str(x.shape()));
  const bool add_dx = add_into_or_fresh(dx, x, x, "rms_norm_backward: dx");
  const bool add_dw = add_into_or_fresh(dweight, weight, x, "rms_norm_backward: dweight");
  const bool add_dgate = dgate && add_into_or_fresh(*dgate, gate.shape(), x, "rms_norm_backward: dgate");
  profile::add_work(detail::bytes_of(x, weight, gate, rstd, dy, dx, dweight) + (dgate ? detail::bytes_of(*dgate) : 0.0),
                    (gate.defined() ? 18.0 : 8.0) * double(x.numel()));
  on_backend(x, "rms_norm_backward", [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::rms_norm_backward(x.data<T>(), weight.data<T>(), gate.defined() ? gate.data<T>() : nullptr, columns,
                         rstd.data<T>(), dy.data<T>(), dx.data<T>(), dweight.data<T>(),
                         dgate ? dgate->data<T>() : nullptr, rows, n, add_dx, add_dw, add_dgate);
  });
}

Tensor residual_rms_norm_forward(const Tensor& x, const Tensor& h, const Tensor& weight, double eps,
                                 const DropoutKey& key, Tensor& sum_out, Tensor& rstd_out) {
  check_row_weight(x, weight, "residual_rms_norm");
  check_same_shape(x, h, "residual_rms_norm");
  check_same_dtype_device(x, h, "residual_rms_norm");
  check(key.p >= 0 && key.p < 1, "residual_rms_norm: dropout probability must be in [0, 1), got " +
                                     std::to_string(key.p));
  const int64_t rows = row_count(x), n = x.dim(-1);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  sum_out = Tensor::empty(x.shape(), x.dtype(), x.device());
  rstd_out = Tensor::empty({rows}, x.dtype(), x.device());
  profile::add_work(detail::bytes_of(x, h, weight, sum_out, y, rstd_out), 6.0 * double(x.numel()));
  on_backend(x, "residual_rms_norm", [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::residual_rms_norm_forward(x.data<T>(), h.data<T>(), weight.data<T>(), sum_out.data<T>(), y.data<T>(),
                                 rstd_out.data<T>(), rows, n, T(eps), key);
  });
  return y;
}

void residual_rms_norm_backward(const Tensor& sum, const Tensor& weight, const Tensor& rstd, const Tensor& dy,
                                const DropoutKey& key, Tensor& dsum, Tensor& dh, Tensor& dweight) {
  check_row_weight(sum, weight, "residual_rms_norm_backward");
  check_same_shape(sum, dy, "residual_rms_norm_backward");
  check_same_dtype_device(sum, dy, "residual_rms_norm_backward");
  const int64_t rows = row_count(sum), n = sum.dim(-1);
  check(rstd.numel() == rows, "residual_rms_norm_backward: rstd " + shape_str(rstd.shape()) +
                                  " does not hold one value per row of " + shape_str(sum.shape()));
  const bool add_dsum = add_into_or_fresh(dsum, sum, sum, "residual_rms_norm_backward: dsum");
  const bool add_dw = add_into_or_fresh(dweight, weight, sum, "residual_rms_norm_backward: dweight");
  dh = key.p > 0 ? Tensor::empty(sum.shape(), sum.dtype(), sum.device()) : dsum;  // dh = dx where M = 1
  profile::add_work(detail::bytes_of(sum, weight, rstd, dy, dsum) + (key.p > 0 ? detail::bytes_of(dh) : 0.0),
                    9.0 * double(sum.numel()));
  on_backend(sum, "residual_rms_norm_backward", [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::residual_rms_norm_backward(sum.data<T>(), weight.data<T>(), rstd.data<T>(), dy.data<T>(), dsum.data<T>(),
                                  key.p > 0 ? dh.data<T>() : nullptr, dweight.data<T>(), rows, n, add_dsum,
                                  add_dw, key);
  });
}

Tensor l2_norm_forward(const Tensor& x, double eps, double scale, Tensor& norm_out) {
  check_ndim_at_least(x, 1, "l2_norm");
  const int64_t rows = row_count(x), n = x.dim(-1);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  norm_out = Tensor::empty({rows}, x.dtype(), x.device());
  profile::add_work(detail::bytes_of(x, y, norm_out), 3.0 * double(x.numel()));
  on_backend(x, "l2_norm", [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::l2_norm_forward(x.data<T>(), y.data<T>(), norm_out.data<T>(), rows, n, T(eps), T(scale));
  });
  return y;
}

Tensor l2_norm_backward(const Tensor& x, const Tensor& norm, const Tensor& dy, double eps,
                        double scale) {
  check_ndim_at_least(x, 1, "l2_norm_backward");
  check_same_shape(x, dy, "l2_norm_backward");
  check_same_dtype_device(x, dy, "l2_norm_backward");
  const int64_t rows = row_count(x), n = x.dim(-1);
  check(norm.numel() == rows, "l2_norm_backward: norm " + shape_str(norm.shape()) +
                                  " does not hold one value per row of " + shape_str(x.shape()));
  Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());
  profile::add_work(detail::bytes_of(x, norm, dy, dx), 6.0 * double(x.numel()));
  on_backend(x, "l2_norm_backward", [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::l2_norm_backward(x.data<T>(), norm.data<T>(), dy.data<T>(), dx.data<T>(), rows, n,
                        T(eps), T(scale));
  });
  return dx;
}

Tensor causal_conv1d_forward(const Tensor& x, const Tensor& weight) {
  check_conv(x, weight);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  profile::add_work(detail::bytes_of(x, weight, y), 2.0 * double(weight.dim(1) * y.numel()));
  on_backend(x, "causal_conv1d", [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::causal_conv1d_forward(x.data<T>(), weight.data<T>(), y.data<T>(), x.dim(0), x.dim(1),
                             x.dim(2), weight.dim(1));
  });
  return y;
}

void causal_conv1d_backward(const Tensor& x, const Tensor& weight, const Tensor& dy, Tensor& dx,
                            Tensor& dweight) {
  check_conv_backward(x, weight, dy, "causal_conv1d_backward");
  dx = Tensor::empty(x.shape(), x.dtype(), x.device());
  const bool add_dw = add_into_or_fresh(dweight, weight, x, "causal_conv1d_backward: dweight");
  profile::add_work(detail::bytes_of(x, weight, dy, dx, dweight), 4.0 * double(weight.dim(1) * x.numel()));
  on_backend(x, "causal_conv1d_backward", [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::causal_conv1d_backward(x.data<T>(), weight.data<T>(), dy.data<T>(), dx.data<T>(),
                              dweight.data<T>(), x.dim(0), x.dim(1), x.dim(2), weight.dim(1), add_dw);
  });
}

Tensor causal_conv1d_silu_forward(const Tensor& x, const Tensor& weight) {
  check_conv(x, weight, "causal_conv1d_silu");
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  profile::add_work(detail::bytes_of(x, weight, y), double((2 * weight.dim(1) + 4) * y.numel()));
  on_backend(x, "causal_conv1d_silu", [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::causal_conv1d_silu_forward(x.data<T>(), weight.data<T>(), y.data<T>(), x.dim(0), x.dim(1),
                                  x.dim(2), weight.dim(1));
  });
  return y;
}

void causal_conv1d_silu_backward(const Tensor& x, const Tensor& weight, const Tensor& dy,
                                 Tensor& dx, Tensor& dweight) {
  check_conv_backward(x, weight, dy, "causal_conv1d_silu_backward");
  dx = Tensor::empty(x.shape(), x.dtype(), x.device());
  const bool add_dw = add_into_or_fresh(dweight, weight, x, "causal_conv1d_silu_backward: dweight");
  profile::add_work(detail::bytes_of(x, weight, dy, dx, dweight), double((6 * weight.dim(1) + 10) * x.numel()));
  on_backend(x, "causal_conv1d_silu_backward", [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::causal_conv1d_silu_backward(x.data<T>(), weight.data<T>(), dy.data<T>(), dx.data<T>(),
                                   dweight.data<T>(), x.dim(0), x.dim(1), x.dim(2),
                                   weight.dim(1), add_dw);
  });
}

// C splits into `planes` planes, each into whole heads of `head` channels,
// the first `normed` of them normalised.
static void check_heads(const Tensor& x, const Tensor& weight, const ConvPlanes& planes, const char* op) {
  const int64_t C = weight.dim(0);
  check(planes.count >= 1 && C % planes.count == 0 && planes.normed >= 0 && planes.normed <= planes.count,
        std::string(op) + ": " + std::to_string(C) + " channels of x " + shape_str(x.shape()) +
            " do not form " + std::to_string(planes.count) + " planes with " +
            std::to_string(planes.normed) + " of them normalised");
  check(planes.head >= 1 && (C / planes.count) % planes.head == 0,
        std::string(op) + ": " + std::to_string(C) + " channels of x " + shape_str(x.shape()) +
            " do not split into heads of " + std::to_string(planes.head));
}

// The output's shape, C = weight.dim(0) channels (x's first C columns):
// [B, T, C] for one plane, else [planes, B, T, C/planes].
static Shape planes_shape(const Tensor& x, const Tensor& weight, const ConvPlanes& planes) {
  const int64_t C = weight.dim(0);
  if (planes.count == 1) return {x.dim(0), x.dim(1), C};
  return {planes.count, x.dim(0), x.dim(1), C / planes.count};
}

static int64_t normed_heads(const Tensor& weight, const ConvPlanes& planes) {
  return planes.normed * (weight.dim(0) / planes.count) / planes.head;
}

Tensor causal_conv1d_silu_l2_norm_forward(const Tensor& x, const Tensor& weight, const ConvPlanes& planes,
                                     double eps, double scale, Tensor& norm_out) {
  check_conv(x, weight, "causal_conv1d_silu_l2_norm", /*wider_x=*/true);
  check_heads(x, weight, planes, "causal_conv1d_silu_l2_norm");
  Tensor q = Tensor::empty(planes_shape(x, weight, planes), x.dtype(), x.device());
  norm_out = Tensor::empty({x.dim(0), x.dim(1), normed_heads(weight, planes)}, x.dtype(), x.device());
  profile::add_work(2 * detail::bytes_of(q) + detail::bytes_of(weight, norm_out), double((2 * weight.dim(1) + 7) * q.numel()));
  on_backend(x, "causal_conv1d_silu_l2_norm", [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::causal_conv1d_silu_l2_norm_forward(x.data<T>(), weight.data<T>(), q.data<T>(),
                                     norm_out.data<T>(), x.dim(0), x.dim(1), weight.dim(0), x.dim(2),
                                     weight.dim(1), planes.head, planes.count, planes.normed,
                                     T(eps), T(scale));
  });
  return q;
}

void causal_conv1d_silu_l2_norm_backward(const Tensor& x, const Tensor& weight, const Tensor& norm,
                                    const Tensor& dq, const ConvPlanes& planes, double eps,
                                    double scale, Tensor& dx, Tensor& dweight) {
  const char* op = "causal_conv1d_silu_l2_norm_backward";
  check_conv(x, weight, op, /*wider_x=*/true);
  check_heads(x, weight, planes, op);
  check(dq.shape() == planes_shape(x, weight, planes),
        std::string(op) + ": dq " + shape_str(dq.shape()) + " is not the output's shape " +
            shape_str(planes_shape(x, weight, planes)));
  check_same_dtype_device(x, dq, op);
  check(norm.numel() == x.dim(0) * x.dim(1) * normed_heads(weight, planes),
        std::string(op) + ": norm " + shape_str(norm.shape()) + " is not one per normalised head of " +
            shape_str(x.shape()));
  check_same_dtype_device(x, norm, op);
  const bool add_dx = add_into_or_fresh(dx, x, x, "causal_conv1d_silu_l2_norm_backward: dx");
  const bool add_dw =
      add_into_or_fresh(dweight, weight, x, "causal_conv1d_silu_l2_norm_backward: dweight");
  // x's C columns (as many as dq) and dq read, dx written whole (and read, to add into)
  profile::add_work(2 * detail::bytes_of(dq) + (add_dx ? 2 : 1) * detail::bytes_of(dx) + detail::bytes_of(weight, dweight, norm),
                    double((6 * weight.dim(1) + 16) * dq.numel()));
  on_backend(x, op, [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::causal_conv1d_silu_l2_norm_backward(x.data<T>(), weight.data<T>(), norm.data<T>(), dq.data<T>(),
                                      dx.data<T>(), dweight.data<T>(), x.dim(0), x.dim(1),
                                      weight.dim(0), x.dim(2), weight.dim(1), planes.head, planes.count,
                                      planes.normed, T(eps), T(scale), add_dx, add_dw);
  });
}

Tensor rope_apply(const Tensor& x, int64_t pos0, double base, bool inverse) {
  check(x.ndim() == 4, "rope: expected x [B, T, H, D], got " + shape_str(x.shape()));
  check(x.dim(3) % 2 == 0,
        "rope: head dim D = " + std::to_string(x.dim(3)) + " of " + shape_str(x.shape()) +
            " must be even");
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  profile::add_work(detail::bytes_of(x, y), 3.0 * double(x.numel()));
  on_backend(x, "rope", [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::rope_apply(x.data<T>(), y.data<T>(), x.dim(0), x.dim(1), x.dim(2), x.dim(3), pos0,
                  base, inverse);
  });
  return y;
}

// ---- beta_log_alpha: the recurrent mixers' gates ----

// z [..., ld] (the mixers' [B, T, ld]) whose last N ≤ ld columns are the
// gates, and 0 ≤ n_beta ≤ N: the rows B·T.
static int64_t check_gates(const Shape& z_shape, int64_t N, int64_t n_beta, const char* op) {
  check(!z_shape.empty(), std::string(op) + ": expected z [B, T, N], got a scalar");
  const int64_t ld = z_shape.back();
  check(N <= ld, std::string(op) + ": " + std::to_string(N) + " gates do not fit in the last dim of z " +
                     shape_str(z_shape));
  check(n_beta >= 0 && n_beta <= N, std::string(op) + ": n_beta = " + std::to_string(n_beta) +
                                        " is out of range [0, " + std::to_string(N) + "] for z " +
                                        shape_str(z_shape));
  return ld == 0 ? 0 : numel(z_shape) / ld;
}

Tensor beta_log_alpha_forward(const Tensor& z, const Tensor& bias, int64_t n_beta) {
  const char* op = "beta_log_alpha";
  check_same_dtype_device(z, bias, op);
  check(bias.ndim() == 1, std::string(op) + ": bias " + shape_str(bias.shape()) + " is not [N]");
  const int64_t N = bias.dim(0), rows = check_gates(z.shape(), N, n_beta, op);
  Tensor out = Tensor::empty({rows * N}, z.dtype(), z.device());
  // the gates' columns of z read, both planes written
  profile::add_work(2 * detail::bytes_of(out) + detail::bytes_of(bias), 5.0 * double(out.numel()));
  on_backend(z, op, [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::beta_log_alpha_forward(z.data<T>(), bias.data<T>(), out.data<T>(), rows, N, z.dim(-1), n_beta);
  });
  return out;
}

void beta_log_alpha_backward(const Tensor& out, const Tensor& dout, const Shape& z_shape, int64_t N,
                             int64_t n_beta, Tensor& dz, Tensor& dbias) {
  const char* op = "beta_log_alpha_backward";
  const int64_t rows = check_gates(z_shape, N, n_beta, op), ld = z_shape.back();
  check(out.shape() == Shape{rows * N}, std::string(op) + ": out " + shape_str(out.shape()) +
                                            " is not the forward's [" + std::to_string(rows * N) + "] for z " +
                                            shape_str(z_shape));
  check_same_shape(out, dout, op);
  check_same_dtype_device(out, dout, op);
  bool add_dz = add_into_or_fresh(dz, z_shape, out, "beta_log_alpha_backward: dz");
  if (!add_dz && ld > N) {  // a fresh dz of a wider z: 0 in the other op's columns
    fill(dz, 0.0);
    add_dz = true;
  }
  const bool add_dbias = add_into_or_fresh(dbias, Shape{N}, out, "beta_log_alpha_backward: dbias");
  // out and dout read, dz written whole (a wider dz: its other columns were filled above)
  profile::add_work(detail::bytes_of(out, dout, dbias) + double(rows * N * int64_t(dtype_size(out.dtype()))), 5.0 * double(out.numel()));
  on_backend(out, op, [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::beta_log_alpha_backward(out.data<T>(), dout.data<T>(), dz.data<T>(), dbias.data<T>(), rows, N, ld, n_beta,
                               add_dz, add_dbias);
  });
}

}  // namespace lina::dispatch
