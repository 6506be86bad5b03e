// The one dispatch point: the only file that names both lina::cpu and
// lina::cuda. Each kernels:: function checks its arguments (errors name the
// op and the shapes), then calls the kernel for the tensors' device and dtype.
#include <cstdlib>
#include <cstring>
#include <string>

#include "backend_cpu/cpu_kernels.h"
#include "backend_cuda/cuda_kernels.h"
#include "core/kernels.h"

namespace lina::kernels {

namespace {

// Calls fn(float{}) or fn(double{}) for a float tensor; throws otherwise.
template <class Fn>
void with_float_type(const Tensor& t, const char* op, Fn&& fn) {
  switch (t.dtype()) {
    case DType::f32: fn(float{}); return;
    case DType::f64: fn(double{}); return;
    default: throw Error(std::string(op) + ": expected float32 or float64, got " + t.describe());
  }
}

// CUDA kernels are float32 only.
bool on_cuda(const Tensor& t, const char* op) {
  if (t.device() != Device::cuda) return false;
  check(t.dtype() == DType::f32,
        std::string(op) + ": the CUDA backend supports float32 only, got " + t.describe());
  return true;
}

std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out) {
  std::vector<int64_t> st(out.size(), 0);
  std::vector<int64_t> cs = contiguous_strides(in);
  size_t lead = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) st[lead + i] = in[i] == 1 ? 0 : cs[i];
  return st;
}

}  // namespace

// ---- memory ---------------------------------------------------------------------

void* device_alloc(size_t bytes, Device device) {
  if (device == Device::cuda) return cuda::alloc(bytes);
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  check(p != nullptr, "out of host memory allocating " + std::to_string(bytes) + " bytes");
  return p;
}

void device_free(void* ptr, Device device) {
  if (device == Device::cuda) cuda::free(ptr);
  else std::free(ptr);
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return;
  if (dst_device == Device::cpu && src_device == Device::cpu) {
    std::memcpy(dst, src, bytes);
    return;
  }
  cuda::CopyKind kind = dst_device == Device::cpu   ? cuda::CopyKind::DeviceToHost
                        : src_device == Device::cpu ? cuda::CopyKind::HostToDevice
                                                    : cuda::CopyKind::DeviceToDevice;
  cuda::copy(dst, src, bytes, kind);
}

bool cuda_available() { return cuda::device_count() > 0; }

void require_device(Device device) {
  if (device == Device::cuda)
    check(cuda_available(), "CUDA was requested but no CUDA GPU is available (" +
                                std::string(cuda::device_count() < 0 ? "lina was built without CUDA"
                                                                     : "no device found") + ")");
}

// ---- fill & elementwise -------------------------------------------------------------

void fill(Tensor& t, double value) {
  if (t.dtype() == DType::i32) {
    if (t.device() == Device::cuda) cuda::fill_i32(t.data<int32_t>(), t.numel(), int32_t(value));
    else cpu::fill<int32_t>(t.data<int32_t>(), t.numel(), int32_t(value));
    return;
  }
  if (on_cuda(t, "fill")) return cuda::fill(t.data<float>(), t.numel(), float(value));
  with_float_type(t, "fill", [&](auto z) {
    using T = decltype(z);
    cpu::fill<T>(t.data<T>(), t.numel(), T(value));
  });
}

Tensor unary(UnaryFn f, const Tensor& x, double p) {
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (on_cuda(x, "unary")) {
    cuda::unary_forward(f, x.data<float>(), y.data<float>(), x.numel(), float(p));
    return y;
  }
  with_float_type(x, "unary", [&](auto z) {
    using T = decltype(z);
    cpu::unary_forward<T>(f, x.data<T>(), y.data<T>(), x.numel(), T(p));
  });
  return y;
}

Tensor unary_backward(UnaryFn f, const Tensor& x, const Tensor& y, const Tensor& dy, double p) {
  check_same_shape(x, dy, "unary_backward");
  check_same_dtype_device(x, dy, "unary_backward");
  Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (on_cuda(x, "unary_backward")) {
    cuda::unary_backward(f, x.data<float>(), y.data<float>(), dy.data<float>(), dx.data<float>(),
                         x.numel(), float(p));
    return dx;
  }
  with_float_type(x, "unary_backward", [&](auto z) {
    using T = decltype(z);
    cpu::unary_backward<T>(f, x.data<T>(), y.data<T>(), dy.data<T>(), dx.data<T>(), x.numel(), T(p));
  });
  return dx;
}

Tensor binary(BinaryFn f, const Tensor& a, const Tensor& b) {
  static const char* names[] = {"add", "sub", "mul", "div"};
  const char* op = names[int(f)];
  check_same_dtype_device(a, b, op);
  Shape out_shape = broadcast_shapes(a.shape(), b.shape(), op);
  Tensor out = Tensor::empty(out_shape, a.dtype(), a.device());
  std::vector<int64_t> sa = broadcast_strides(a.shape(), out_shape);
  std::vector<int64_t> sb = broadcast_strides(b.shape(), out_shape);
  if (on_cuda(a, op)) {
    cuda::binary(f, a.data<float>(), sa.data(), b.data<float>(), sb.data(), out.data<float>(),
                 out_shape.data(), int(out_shape.size()));
    return out;
  }
  with_float_type(a, op, [&](auto z) {
    using T = decltype(z);
    cpu::binary<T>(f, a.data<T>(), sa.data(), b.data<T>(), sb.data(), out.data<T>(),
                   out_shape.data(), int(out_shape.size()));
  });
  return out;
}

void add_inplace(Tensor& dst, const Tensor& src, double alpha) {
  check_same_shape(dst, src, "add_inplace");
  check_same_dtype_device(dst, src, "add_inplace");
  if (on_cuda(dst, "add_inplace"))
    return cuda::axpy(dst.data<float>(), src.data<float>(), dst.numel(), float(alpha));
  with_float_type(dst, "add_inplace", [&](auto z) {
    using T = decltype(z);
    cpu::axpy<T>(dst.data<T>(), src.data<T>(), dst.numel(), T(alpha));
  });
}

// ---- layout -------------------------------------------------------------------------

void copy_strided(const Tensor& src, const StridedView& sv, Tensor& dst, const StridedView& dv,
                  const Shape& extent, bool accumulate) {
  check(src.dtype() == dst.dtype() && src.device() == dst.device(),
        "copy_strided: " + src.describe() + " vs " + dst.describe());
  check(sv.strides.size() == extent.size() && dv.strides.size() == extent.size(),
        "copy_strided: strides do not match extent " + shape_str(extent));
  int nd = int(extent.size());
  if (src.dtype() == DType::i32) {
    check(src.device() == Device::cpu && !accumulate, "copy_strided: int32 copies are CPU only");
    cpu::copy_strided<int32_t>(src.data<int32_t>() + sv.offset, sv.strides.data(),
                               dst.data<int32_t>() + dv.offset, dv.strides.data(), extent.data(),
                               nd, false);
    return;
  }
  if (on_cuda(src, "copy_strided"))
    return cuda::copy_strided(src.data<float>() + sv.offset, sv.strides.data(),
                              dst.data<float>() + dv.offset, dv.strides.data(), extent.data(), nd,
                              accumulate);
  with_float_type(src, "copy_strided", [&](auto z) {
    using T = decltype(z);
    cpu::copy_strided<T>(src.data<T>() + sv.offset, sv.strides.data(), dst.data<T>() + dv.offset,
                         dv.strides.data(), extent.data(), nd, accumulate);
  });
}

// ---- reductions -------------------------------------------------------------------------

void sum_middle(const Tensor& x, int64_t outer, int64_t n, int64_t inner, Tensor& out) {
  check(x.numel() == outer * n * inner && out.numel() == outer * inner,
        "sum_middle: " + x.describe() + " is not [" + std::to_string(outer) + ", " +
            std::to_string(n) + ", " + std::to_string(inner) + "]");
  check_same_dtype_device(x, out, "sum_middle");
  if (on_cuda(x, "sum"))
    return cuda::sum_middle(x.data<float>(), out.data<float>(), outer, n, inner);
  with_float_type(x, "sum", [&](auto z) {
    using T = decltype(z);
    cpu::sum_middle<T>(x.data<T>(), out.data<T>(), outer, n, inner);
  });
}

double sum_squares(const Tensor& x) {
  if (on_cuda(x, "sum_squares")) return cuda::sum_squares(x.data<float>(), x.numel());
  double s = 0.0;
  with_float_type(x, "sum_squares", [&](auto z) {
    using T = decltype(z);
    s = cpu::sum_squares<T>(x.data<T>(), x.numel());
  });
  return s;
}

// ---- matrix products ----------------------------------------------------------------------

void gemm(const GemmShape& g, const Tensor& a, const Tensor& b, Tensor& c, double alpha,
          double beta) {
  check_same_dtype_device(a, b, "matmul");
  check_same_dtype_device(a, c, "matmul");
  auto span = [](int64_t batch, int64_t stride, int64_t one) {
    return stride == 0 ? one : (batch - 1) * stride + one;
  };
  check(a.numel() >= span(g.batch, g.stride_a, g.M * g.K) &&
            b.numel() >= span(g.batch, g.stride_b, g.K * g.N) &&
            c.numel() >= span(g.batch, g.stride_c, g.M * g.N),
        "matmul: operands " + a.describe() + ", " + b.describe() + ", " + c.describe() +
            " are too small for the product");
  if (on_cuda(a, "matmul"))
    return cuda::gemm(g.batch, g.M, g.N, g.K, a.data<float>(), g.ta, g.stride_a, b.data<float>(),
                      g.tb, g.stride_b, c.data<float>(), g.stride_c, float(alpha), float(beta));
  with_float_type(a, "matmul", [&](auto z) {
    using T = decltype(z);
    cpu::gemm<T>(g.batch, g.M, g.N, g.K, a.data<T>(), g.ta, g.stride_a, b.data<T>(), g.tb,
                 g.stride_b, c.data<T>(), g.stride_c, T(alpha), T(beta));
  });
}


// ---- softmax, log-softmax, cross-entropy, embedding ----
// [anchor:SOFTMAX-LOSS]

namespace {

// x viewed as [rows, n] over its last axis; the last axis must not be empty.
int64_t rows_of_last_axis(const Tensor& x, const char* op) {
  check_ndim_at_least(x, 1, op);
  int64_t n = x.dim(-1);
  check(n > 0, std::string(op) + ": the last axis is empty in " + x.describe());
  return x.numel() / n;
}

// ids: int32 with every entry in [0, limit); `what` names an entry ("id").
void check_index_range(const Tensor& ids, int64_t limit, const char* op, const char* what) {
  check(ids.dtype() == DType::i32,
        std::string(op) + ": " + what + "s must be int32, got " + ids.describe());
  std::vector<int32_t> host = ids.to_vector<int32_t>();
  for (int32_t id : host)
    check(id >= 0 && id < limit, std::string(op) + ": " + what + " " + std::to_string(id) +
                                     " out of range for vocabulary " + std::to_string(limit));
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
  if (on_cuda(x, "softmax")) throw Error("softmax: not implemented on cuda yet");
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  with_float_type(x, "softmax", [&](auto z) {
    using T = decltype(z);
    cpu::softmax_forward<T>(x.data<T>(), y.data<T>(), R, x.dim(-1), Tq, causal);
  });
  return y;
}

Tensor softmax_backward(const Tensor& y, const Tensor& dy) {
  check_same_shape(y, dy, "softmax_backward");
  check_same_dtype_device(y, dy, "softmax_backward");
  int64_t R = rows_of_last_axis(y, "softmax_backward");
  if (on_cuda(y, "softmax_backward")) throw Error("softmax_backward: not implemented on cuda yet");
  Tensor dx = Tensor::empty(y.shape(), y.dtype(), y.device());
  with_float_type(y, "softmax_backward", [&](auto z) {
    using T = decltype(z);
    cpu::softmax_backward<T>(y.data<T>(), dy.data<T>(), dx.data<T>(), R, y.dim(-1));
  });
  return dx;
}

Tensor log_softmax_forward(const Tensor& x) {
  check_float(x, "log_softmax");
  int64_t R = rows_of_last_axis(x, "log_softmax");
  if (on_cuda(x, "log_softmax")) throw Error("log_softmax: not implemented on cuda yet");
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  with_float_type(x, "log_softmax", [&](auto z) {
    using T = decltype(z);
    cpu::log_softmax_forward<T>(x.data<T>(), y.data<T>(), R, x.dim(-1));
  });
  return y;
}

Tensor log_softmax_backward(const Tensor& y, const Tensor& dy) {
  check_same_shape(y, dy, "log_softmax_backward");
  check_same_dtype_device(y, dy, "log_softmax_backward");
  int64_t R = rows_of_last_axis(y, "log_softmax_backward");
  if (on_cuda(y, "log_softmax_backward"))
    throw Error("log_softmax_backward: not implemented on cuda yet");
  Tensor dx = Tensor::empty(y.shape(), y.dtype(), y.device());
  with_float_type(y, "log_softmax_backward", [&](auto z) {
    using T = decltype(z);
    cpu::log_softmax_backward<T>(y.data<T>(), dy.data<T>(), dx.data<T>(), R, y.dim(-1));
  });
  return dx;
}

Tensor cross_entropy_forward(const Tensor& logits, const Tensor& targets, const Tensor& mask,
                             Tensor& probs_out) {
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
  if (on_cuda(logits, op)) throw Error("cross_entropy: not implemented on cuda yet");
  check_index_range(targets, V, op, "target");
  probs_out = Tensor::empty(logits.shape(), logits.dtype(), logits.device());
  Tensor loss = Tensor::empty({}, logits.dtype(), logits.device());
  with_float_type(logits, op, [&](auto z) {
    using T = decltype(z);
    cpu::cross_entropy_forward<T>(logits.data<T>(), targets.data<int32_t>(),
                                  mask.defined() ? mask.data<T>() : nullptr, probs_out.data<T>(),
                                  loss.data<T>(), R, V);
  });
  return loss;
}

Tensor cross_entropy_backward(const Tensor& probs, const Tensor& targets, const Tensor& mask,
                              const Tensor& dloss) {
  const char* op = "cross_entropy_backward";
  check_float(probs, op);
  int64_t R = rows_of_last_axis(probs, op);
  Shape positions = positions_shape(probs);
  check(targets.dtype() == DType::i32 && targets.shape() == positions,
        std::string(op) + ": targets " + targets.describe() + " do not match probabilities " +
            shape_str(probs.shape()));
  if (mask.defined()) {
    check(mask.shape() == positions, std::string(op) + ": mask " + shape_str(mask.shape()) +
                                         " does not match probabilities " +
                                         shape_str(probs.shape()));
    check_same_dtype_device(probs, mask, op);
  }
  check(dloss.numel() == 1, std::string(op) + ": expected a one-element gradient, got " +
                                dloss.describe());
  check_same_dtype_device(probs, dloss, op);
  if (on_cuda(probs, op)) throw Error("cross_entropy_backward: not implemented on cuda yet");
  Tensor dlogits = Tensor::empty(probs.shape(), probs.dtype(), probs.device());
  with_float_type(probs, op, [&](auto z) {
    using T = decltype(z);
    cpu::cross_entropy_backward<T>(probs.data<T>(), targets.data<int32_t>(),
                                   mask.defined() ? mask.data<T>() : nullptr, dloss.data<T>(),
                                   dlogits.data<T>(), R, probs.dim(-1));
  });
  return dlogits;
}

Tensor embedding_forward(const Tensor& weight, const Tensor& ids) {
  const char* op = "embedding";
  check_float(weight, op);
  check(weight.ndim() == 2, std::string(op) + ": weight must be [V, C], got " + weight.describe());
  check(ids.device() == weight.device(),
        std::string(op) + ": device mismatch " + weight.describe() + " vs " + ids.describe());
  if (on_cuda(weight, op)) throw Error("embedding: not implemented on cuda yet");
  int64_t V = weight.dim(0), C = weight.dim(1);
  check_index_range(ids, V, op, "id");
  Shape out_shape = ids.shape();
  out_shape.push_back(C);
  Tensor out = Tensor::empty(out_shape, weight.dtype(), weight.device());
  with_float_type(weight, op, [&](auto z) {
    using T = decltype(z);
    cpu::embedding_forward<T>(weight.data<T>(), ids.data<int32_t>(), out.data<T>(), ids.numel(), C);
  });
  return out;
}

Tensor embedding_backward(const Tensor& dy, const Tensor& ids, int64_t vocab) {
  const char* op = "embedding_backward";
  check_float(dy, op);
  Shape expected = ids.shape();
  expected.push_back(dy.ndim() ? dy.dim(-1) : 0);
  check(ids.dtype() == DType::i32 && dy.shape() == expected,
        std::string(op) + ": gradient " + shape_str(dy.shape()) + " does not match ids " +
            ids.describe());
  if (on_cuda(dy, op)) throw Error("embedding_backward: not implemented on cuda yet");
  int64_t C = dy.dim(-1);
  Tensor dweight = Tensor::empty({vocab, C}, dy.dtype(), dy.device());
  with_float_type(dy, op, [&](auto z) {
    using T = decltype(z);
    cpu::embedding_backward<T>(dy.data<T>(), ids.data<int32_t>(), dweight.data<T>(), ids.numel(),
                               vocab, C);
  });
  return dweight;
}

Tensor argmax_last(const Tensor& x) {
  const char* op = "argmax_last";
  check_float(x, op);
  int64_t R = rows_of_last_axis(x, op);
  if (on_cuda(x, op)) throw Error("argmax_last: not implemented on cuda yet");
  Tensor out = Tensor::empty(positions_shape(x), DType::i32, x.device());
  with_float_type(x, op, [&](auto z) {
    using T = decltype(z);
    cpu::argmax_rows<T>(x.data<T>(), out.data<int32_t>(), R, x.dim(-1));
  });
  return out;
}

// ---- rms_norm, l2_norm, causal conv1d, rope ----
// [anchor:NORM-CONV-ROPE]

namespace {

// Rows of a [..., n] tensor: numel / n.
int64_t row_count(const Tensor& x) { return x.dim(-1) == 0 ? 0 : x.numel() / x.dim(-1); }

void throw_if_cuda(const Tensor& x, const char* op) {
  if (on_cuda(x, op)) throw Error(std::string(op) + ": not implemented on cuda yet");
}

// x [..., n] and weight [n].
void check_row_weight(const Tensor& x, const Tensor& weight, const char* op) {
  check_ndim_at_least(x, 1, op);
  check_same_dtype_device(x, weight, op);
  check(weight.ndim() == 1 && weight.dim(0) == x.dim(-1),
        std::string(op) + ": weight " + shape_str(weight.shape()) + " does not match last dim of " +
            shape_str(x.shape()));
}

// x [B, T, C] and weight [C, K].
void check_conv(const Tensor& x, const Tensor& weight) {
  check(x.ndim() == 3, "causal_conv1d: expected x [B, T, C], got " + shape_str(x.shape()));
  check_same_dtype_device(x, weight, "causal_conv1d");
  check(weight.ndim() == 2 && weight.dim(0) == x.dim(2) && weight.dim(1) >= 1,
        "causal_conv1d: weight " + shape_str(weight.shape()) + " is not [C, K] with C = " +
            std::to_string(x.dim(2)) + " channels of x " + shape_str(x.shape()));
}

}  // namespace

Tensor rms_norm_forward(const Tensor& x, const Tensor& weight, double eps, Tensor& rstd_out) {
  check_row_weight(x, weight, "rms_norm");
  throw_if_cuda(x, "rms_norm");
  const int64_t rows = row_count(x), n = x.dim(-1);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  rstd_out = Tensor::empty({rows}, x.dtype(), x.device());
  with_float_type(x, "rms_norm", [&](auto z) {
    using T = decltype(z);
    cpu::rms_norm_forward<T>(x.data<T>(), weight.data<T>(), y.data<T>(), rstd_out.data<T>(), rows,
                             n, T(eps));
  });
  return y;
}

void rms_norm_backward(const Tensor& x, const Tensor& weight, const Tensor& rstd, const Tensor& dy,
                       Tensor& dx, Tensor& dweight) {
  check_row_weight(x, weight, "rms_norm_backward");
  check_same_shape(x, dy, "rms_norm_backward");
  check_same_dtype_device(x, dy, "rms_norm_backward");
  const int64_t rows = row_count(x), n = x.dim(-1);
  check(rstd.numel() == rows, "rms_norm_backward: rstd " + shape_str(rstd.shape()) +
                                  " does not hold one value per row of " + shape_str(x.shape()));
  throw_if_cuda(x, "rms_norm_backward");
  dx = Tensor::empty(x.shape(), x.dtype(), x.device());
  dweight = Tensor::empty(weight.shape(), x.dtype(), x.device());
  with_float_type(x, "rms_norm_backward", [&](auto z) {
    using T = decltype(z);
    cpu::rms_norm_backward<T>(x.data<T>(), weight.data<T>(), rstd.data<T>(), dy.data<T>(),
                              dx.data<T>(), dweight.data<T>(), rows, n);
  });
}

Tensor l2_norm_forward(const Tensor& x, double eps, Tensor& norm_out) {
  check_ndim_at_least(x, 1, "l2_norm");
  throw_if_cuda(x, "l2_norm");
  const int64_t rows = row_count(x), n = x.dim(-1);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  norm_out = Tensor::empty({rows}, x.dtype(), x.device());
  with_float_type(x, "l2_norm", [&](auto z) {
    using T = decltype(z);
    cpu::l2_norm_forward<T>(x.data<T>(), y.data<T>(), norm_out.data<T>(), rows, n, T(eps));
  });
  return y;
}

Tensor l2_norm_backward(const Tensor& x, const Tensor& norm, const Tensor& dy, double eps) {
  check_ndim_at_least(x, 1, "l2_norm_backward");
  check_same_shape(x, dy, "l2_norm_backward");
  check_same_dtype_device(x, dy, "l2_norm_backward");
  const int64_t rows = row_count(x), n = x.dim(-1);
  check(norm.numel() == rows, "l2_norm_backward: norm " + shape_str(norm.shape()) +
                                  " does not hold one value per row of " + shape_str(x.shape()));
  throw_if_cuda(x, "l2_norm_backward");
  Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());
  with_float_type(x, "l2_norm_backward", [&](auto z) {
    using T = decltype(z);
    cpu::l2_norm_backward<T>(x.data<T>(), norm.data<T>(), dy.data<T>(), dx.data<T>(), rows, n,
                             T(eps));
  });
  return dx;
}

Tensor causal_conv1d_forward(const Tensor& x, const Tensor& weight) {
  check_conv(x, weight);
  throw_if_cuda(x, "causal_conv1d");
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  with_float_type(x, "causal_conv1d", [&](auto z) {
    using T = decltype(z);
    cpu::causal_conv1d_forward<T>(x.data<T>(), weight.data<T>(), y.data<T>(), x.dim(0), x.dim(1),
                                  x.dim(2), weight.dim(1));
  });
  return y;
}

void causal_conv1d_backward(const Tensor& x, const Tensor& weight, const Tensor& dy, Tensor& dx,
                            Tensor& dweight) {
  check_conv(x, weight);
  check_same_shape(x, dy, "causal_conv1d_backward");
  check_same_dtype_device(x, dy, "causal_conv1d_backward");
  throw_if_cuda(x, "causal_conv1d_backward");
  dx = Tensor::empty(x.shape(), x.dtype(), x.device());
  dweight = Tensor::empty(weight.shape(), x.dtype(), x.device());
  with_float_type(x, "causal_conv1d_backward", [&](auto z) {
    using T = decltype(z);
    cpu::causal_conv1d_backward<T>(x.data<T>(), weight.data<T>(), dy.data<T>(), dx.data<T>(),
                                   dweight.data<T>(), x.dim(0), x.dim(1), x.dim(2), weight.dim(1));
  });
}

Tensor rope_apply(const Tensor& x, int64_t pos0, double base, bool inverse) {
  check(x.ndim() == 4, "rope: expected x [B, T, H, D], got " + shape_str(x.shape()));
  check(x.dim(3) % 2 == 0,
        "rope: head dim D = " + std::to_string(x.dim(3)) + " of " + shape_str(x.shape()) +
            " must be even");
  throw_if_cuda(x, "rope");
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  with_float_type(x, "rope", [&](auto z) {
    using T = decltype(z);
    cpu::rope_apply<T>(x.data<T>(), y.data<T>(), x.dim(0), x.dim(1), x.dim(2), x.dim(3), pos0,
                       base, inverse);
  });
  return y;
}

// ---- optimiser (AdamW step) ----
// [anchor:OPTIM]

void adamw_step(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, double lr, double beta1,
                double beta2, double eps, double weight_decay, int64_t step) {
  const Tensor* others[] = {&grad, &m, &v};
  for (const Tensor* t : others) {
    check_same_shape(param, *t, "adamw_step");
    check_same_dtype_device(param, *t, "adamw_step");
  }
  check(step >= 1, "adamw_step: step counts from 1, got " + std::to_string(step));
  if (on_cuda(param, "adamw_step")) throw Error("adamw_step: not implemented on cuda yet");
  // Bias corrections in double, whatever the parameters' dtype.
  double bias_correction1 = 1.0 - std::pow(beta1, double(step));
  double bias_correction2 = 1.0 - std::pow(beta2, double(step));
  with_float_type(param, "adamw_step", [&](auto z) {
    using T = decltype(z);
    cpu::adamw_step<T>(param.data<T>(), grad.data<T>(), m.data<T>(), v.data<T>(), param.numel(),
                       T(lr), T(beta1), T(beta2), T(eps), T(weight_decay), T(bias_correction1),
                       T(bias_correction2));
  });
}

void scale_inplace(Tensor& x, double factor) {
  if (on_cuda(x, "scale_inplace")) throw Error("scale_inplace: not implemented on cuda yet");
  with_float_type(x, "scale_inplace", [&](auto z) {
    using T = decltype(z);
    cpu::scale<T>(x.data<T>(), x.numel(), T(factor));
  });
}

// ---- scan: the linear / delta / gated-delta recurrence ----
// [anchor:SCAN]

namespace {

std::string scan_rule_name(const ScanConfig& c) {
  return c.gated ? "gated delta rule" : c.delta ? "delta rule" : "linear rule";
}

// Checks q, k, v [B, T, H, d] and the gates [B, T, H] the rule uses (the
// others must be undefined); returns the dimensions.
cpu::ScanShape check_scan_inputs(const ScanConfig& c, const Tensor& q, const Tensor& k,
                                 const Tensor& v, const Tensor& beta, const Tensor& log_alpha) {
  check(q.defined() && k.defined() && v.defined(), "scan: q, k and v are required");
  if (q.device() == Device::cuda) throw Error("scan: not implemented on cuda yet");
  check(q.ndim() == 4 && q.numel() > 0,
        "scan: q must be a non-empty [B, T, H, d], got " + shape_str(q.shape()));
  check(k.shape() == q.shape() && v.shape() == q.shape(),
        "scan: q, k, v must share one shape [B, T, H, d], got q " + shape_str(q.shape()) + ", k " +
            shape_str(k.shape()) + ", v " + shape_str(v.shape()));
  check_same_dtype_device(q, k, "scan");
  check_same_dtype_device(q, v, "scan");
  check(!c.gated || c.delta, "scan: a gated rule must also be a delta rule");
  check(!c.chunked || c.chunk > 0,
        "scan: chunk length must be positive, got " + std::to_string(c.chunk));
  const Shape gate_shape{q.dim(0), q.dim(1), q.dim(2)};
  auto check_gate = [&](const Tensor& x, bool used, const char* name) {
    if (!used) {
      check(!x.defined(), "scan: the " + scan_rule_name(c) + " takes no " + name);
      return;
    }
    check(x.defined() && x.shape() == gate_shape,
          "scan: " + scan_rule_name(c) + " needs " + name + " [B, T, H] = " +
              shape_str(gate_shape) + (x.defined() ? ", got " + shape_str(x.shape()) : ""));
    check_same_dtype_device(q, x, "scan");
  };
  check_gate(beta, c.delta, "beta");
  check_gate(log_alpha, c.gated, "log_alpha");
  cpu::ScanShape s;
  s.B = q.dim(0), s.T = q.dim(1), s.H = q.dim(2), s.d = q.dim(3);
  s.delta = c.delta;
  s.gated = c.gated;
  return s;
}

// A state-shaped argument ([B, H, d, d], or [B, H, steps, d, d] for the saved states).
void check_scan_state(const Tensor& x, const Tensor& q, const Shape& expected, const char* name) {
  check(x.shape() == expected, std::string("scan: ") + name + " must be " +
                                   shape_str(expected) + ", got " + shape_str(x.shape()));
  check_same_dtype_device(q, x, "scan");
}

// States kept for the backward: one per token, or one per chunk.
int64_t scan_saved_steps(const ScanConfig& c, int64_t T) {
  return c.chunked ? (T + c.chunk - 1) / c.chunk : T;
}

template <class T>
cpu::ScanInputs<T> scan_inputs(const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& beta, const Tensor& log_alpha) {
  return {q.data<T>(), k.data<T>(), v.data<T>(), beta.defined() ? beta.data<T>() : nullptr,
          log_alpha.defined() ? log_alpha.data<T>() : nullptr};
}

}  // namespace

Tensor scan_forward(const ScanConfig& config, const Tensor& q, const Tensor& k, const Tensor& v,
                    const Tensor& beta, const Tensor& log_alpha, const Tensor& initial_state,
                    Tensor& final_state, Tensor* saved_states) {
  const cpu::ScanShape s = check_scan_inputs(config, q, k, v, beta, log_alpha);
  const Shape state_shape{s.B, s.H, s.d, s.d};
  if (initial_state.defined()) check_scan_state(initial_state, q, state_shape, "initial_state");
  Tensor o = Tensor::empty(q.shape(), q.dtype(), q.device());
  final_state = Tensor::empty(state_shape, q.dtype(), q.device());
  if (saved_states)
    *saved_states = Tensor::empty({s.B, s.H, scan_saved_steps(config, s.T), s.d, s.d}, q.dtype(),
                                  q.device());
  with_float_type(q, "scan", [&](auto z) {
    using T = decltype(z);
    const cpu::ScanInputs<T> in = scan_inputs<T>(q, k, v, beta, log_alpha);
    const T* s0 = initial_state.defined() ? initial_state.data<T>() : nullptr;
    T* saved = saved_states ? saved_states->data<T>() : nullptr;
    if (config.chunked)
      cpu::scan_chunked_forward<T>(s, config.chunk, in, s0, o.data<T>(), final_state.data<T>(),
                                   saved);
    else
      cpu::scan_sequential_forward<T>(s, in, s0, o.data<T>(), final_state.data<T>(), saved);
  });
  return o;
}

ScanGrads scan_backward(const ScanConfig& config, const Tensor& q, const Tensor& k,
                        const Tensor& v, const Tensor& beta, const Tensor& log_alpha,
                        const Tensor& saved_states, const Tensor& dout,
                        const Tensor& dfinal_state) {
  const cpu::ScanShape s = check_scan_inputs(config, q, k, v, beta, log_alpha);
  const Shape state_shape{s.B, s.H, s.d, s.d};
  check_scan_state(saved_states, q, {s.B, s.H, scan_saved_steps(config, s.T), s.d, s.d},
                   "saved states");
  check_scan_state(dout, q, q.shape(), "dout");
  if (dfinal_state.defined()) check_scan_state(dfinal_state, q, state_shape, "dfinal_state");
  ScanGrads g;
  g.dq = Tensor::empty(q.shape(), q.dtype(), q.device());
  g.dk = Tensor::empty(q.shape(), q.dtype(), q.device());
  g.dv = Tensor::empty(q.shape(), q.dtype(), q.device());
  if (s.delta) g.dbeta = Tensor::empty(beta.shape(), q.dtype(), q.device());
  if (s.gated) g.dlog_alpha = Tensor::empty(log_alpha.shape(), q.dtype(), q.device());
  g.dinitial_state = Tensor::empty(state_shape, q.dtype(), q.device());
  with_float_type(q, "scan", [&](auto z) {
    using T = decltype(z);
    const cpu::ScanInputs<T> in = scan_inputs<T>(q, k, v, beta, log_alpha);
    const cpu::ScanInputGrads<T> out{g.dq.data<T>(), g.dk.data<T>(), g.dv.data<T>(),
                                     s.delta ? g.dbeta.data<T>() : nullptr,
                                     s.gated ? g.dlog_alpha.data<T>() : nullptr,
                                     g.dinitial_state.data<T>()};
    const T* ds_final = dfinal_state.defined() ? dfinal_state.data<T>() : nullptr;
    if (config.chunked)
      cpu::scan_chunked_backward<T>(s, config.chunk, in, saved_states.data<T>(), dout.data<T>(),
                                    ds_final, out);
    else
      cpu::scan_sequential_backward<T>(s, in, saved_states.data<T>(), dout.data<T>(), ds_final,
                                       out);
  });
  return g;
}

}  // namespace lina::kernels
