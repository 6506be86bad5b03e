// The backend dispatch: core/dispatch*.cpp are the only files that name both
// lina::cpu and lina::cuda. Each kernels:: function checks its arguments
// (errors name the op and the shapes), then calls the kernel for the
// tensors' device and dtype.
// This file: memory, elementwise, layout, reductions, matrix products;
// core/dispatch_nn.cpp and core/dispatch_train.cpp hold the rest.
#include <cstdlib>
#include <cstring>
#include <string>

#include "backend_cpu/cpu_kernels.h"
#include "backend_cpu/host_allocator.h"
#include "backend_cuda/cuda_kernels.h"
#include "core/dispatch_util.h"
#include "core/kernels.h"

namespace lina::kernels {

using detail::on_cuda;
using detail::with_float_type;

namespace {

// Strides that read a tensor of shape `in` as the broadcast shape `out`.
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
  return cpu::host_alloc(bytes);  // cached: see backend_cpu/host_allocator.h
}

void device_free(void* ptr, Device device) {
  if (device == Device::cuda) cuda::free(ptr);
  else cpu::host_free(ptr);
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


}  // namespace lina::kernels
