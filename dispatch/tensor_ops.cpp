// The backend dispatch: dispatch/*.cpp are the only files that name both
// lina::cpu and lina::cuda. Each dispatch:: function checks its arguments
// (errors name the op and the shapes), then calls the kernel for the
// tensors' device and dtype.
// This file: the devices, elementwise, layout, reductions, matrix products;
// dispatch/nn.cpp and dispatch/scan.cpp hold the rest.
#include <string>

#include "backend_cpu/cpu_kernels.h"
#include "backend_cpu/openblas.h"
#include "backend_cuda/cuda_kernels.h"
#include "dispatch/backends.h"
#include "dispatch/dispatch.h"

namespace lina::dispatch {

using detail::on_backend;

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

// ---- the devices -------------------------------------------------------------------

// Every switch on Device below names each device and has no default: a new
// device is a compile error (-Werror=switch), not a fall-through.

bool cuda_available() { return cuda::device_count() > 0; }

const char* cuda_runtime() { return cuda::runtime(); }

std::string cpu_gemm() { return cpu::cpu_gemm_name(); }

namespace detail {
int64_t* cuda_kernel_call_counts() {
  static int64_t counts[int(KernelId::Count)] = {};
  return counts;
}
}  // namespace detail

std::vector<std::pair<std::string, int64_t>> cuda_kernel_calls() {
  static const char* const names[] = {
#define LINA_KERNEL_NAME(ret, name, params) #name,
      LINA_KERNELS(LINA_KERNEL_NAME, float)
#undef LINA_KERNEL_NAME
  };
  std::vector<std::pair<std::string, int64_t>> calls;
  for (int k = 0; k < int(detail::KernelId::Count); ++k)
    calls.emplace_back(names[k], detail::cuda_kernel_call_counts()[k]);
  return calls;
}

DeviceCounters cuda_counters() {
  if (!cuda_available()) return {};
  cuda::Counters c = cuda::counters();
  return {c.launches, c.allocations, c.device_to_host_copies, c.pool_reserved_bytes, c.graph_launches};
}

void set_cuda_tf32(bool on) { cuda::set_tf32(on); }

// ---- fill & elementwise -------------------------------------------------------------

void fill(Tensor& t, double value) {
  if (t.dtype() == DType::I32) {
    switch (t.device()) {
      case Device::Cpu: cpu::fill<int32_t>(t.data<int32_t>(), t.numel(), int32_t(value)); return;
      case Device::Cuda: cuda::fill_i32(t.data<int32_t>(), t.numel(), int32_t(value)); return;
    }
    return;
  }
  profile::add_work(detail::bytes_of(t), 0);
  on_backend(t, "fill", [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::fill(t.data<T>(), t.numel(), T(value));
  });
}

Tensor unary(UnaryFn f, const Tensor& x, double p) {
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  profile::add_work(detail::bytes_of(x, y), 4.0 * double(x.numel()));
  on_backend(x, "unary", [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::unary_forward(f, x.data<T>(), y.data<T>(), x.numel(), T(p));
  });
  return y;
}

Tensor dropout(const Tensor& x, const DropoutKey& key, const Tensor& residual) {
  check(key.p >= 0 && key.p < 1, "dropout: probability must be in [0, 1), got " + std::to_string(key.p));
  check_float(x, "dropout");
  if (residual.defined()) {
    check_same_shape(residual, x, "dropout (residual)");
    check_same_dtype_device(residual, x, "dropout (residual)");
  }
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  profile::add_work(detail::bytes_of(x, residual, y), 2.0 * double(x.numel()));
  on_backend(x, "dropout", [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::dropout_apply(x.data<T>(), residual.defined() ? residual.data<T>() : nullptr, y.data<T>(),
                     x.numel(), key);
  });
  return y;
}

Tensor unary_backward(UnaryFn f, const Tensor& x, const Tensor& y, const Tensor& dy, double p) {
  check_same_shape(x, dy, "unary_backward");
  check_same_dtype_device(x, dy, "unary_backward");
  Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());
  profile::add_work(detail::bytes_of(x, y, dy, dx), 4.0 * double(x.numel()));
  on_backend(x, "unary_backward", [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::unary_backward(f, x.data<T>(), y.data<T>(), dy.data<T>(), dx.data<T>(), x.numel(), T(p));
  });
  return dx;
}

Tensor binary(BinaryFn f, const Tensor& a, const Tensor& b) {
  const char* op = binary_fn_name(f);
  check_same_dtype_device(a, b, op);
  Shape out_shape = broadcast_shapes(a.shape(), b.shape(), op);
  Tensor out = Tensor::empty(out_shape, a.dtype(), a.device());
  std::vector<int64_t> sa = broadcast_strides(a.shape(), out_shape);
  std::vector<int64_t> sb = broadcast_strides(b.shape(), out_shape);
  profile::add_work(detail::bytes_of(a, b, out), double(out.numel()));
  on_backend(a, op, [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::binary(f, a.data<T>(), sa.data(), b.data<T>(), sb.data(), out.data<T>(),
              out_shape.data(), int(out_shape.size()));
  });
  return out;
}

void add_inplace(Tensor& dst, const Tensor& src, double alpha) {
  check_same_shape(dst, src, "add_inplace");
  check_same_dtype_device(dst, src, "add_inplace");
  profile::add_work(2 * detail::bytes_of(dst) + detail::bytes_of(src), 2.0 * double(dst.numel()));
  on_backend(dst, "add_inplace", [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::add_inplace(dst.data<T>(), src.data<T>(), dst.numel(), T(alpha));
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
  if (src.dtype() == DType::I32) {  // token ids: sliced, concatenated, never summed
    check(!accumulate, "copy_strided: int32 tensors are copied, never accumulated");
    switch (src.device()) {
      case Device::Cpu:
        cpu::copy_strided<int32_t>(src.data<int32_t>() + sv.offset, sv.strides.data(),
                                   dst.data<int32_t>() + dv.offset, dv.strides.data(), extent.data(),
                                   nd, false);
        return;
      case Device::Cuda:
        // A copy only moves 4-byte words, so the float kernel moves int32 bits unchanged.
        cuda::copy_strided(reinterpret_cast<const float*>(src.data<int32_t>() + sv.offset),
                           sv.strides.data(), reinterpret_cast<float*>(dst.data<int32_t>() + dv.offset),
                           dv.strides.data(), extent.data(), nd, false);
        return;
    }
    return;
  }
  profile::add_work(double(numel(extent) * dtype_size(src.dtype())) * (accumulate ? 3 : 2), 0);
  on_backend(src, "copy_strided", [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::copy_strided(src.data<T>() + sv.offset, sv.strides.data(), dst.data<T>() + dv.offset,
                    dv.strides.data(), extent.data(), nd, accumulate);
  });
}

// ---- reductions -------------------------------------------------------------------------

void sum_middle(const Tensor& x, int64_t outer, int64_t n, int64_t inner, Tensor& out, bool accumulate) {
  check(x.numel() == outer * n * inner && out.numel() == outer * inner,
        "sum_middle: " + x.describe() + " is not [" + std::to_string(outer) + ", " +
            std::to_string(n) + ", " + std::to_string(inner) + "]");
  check_same_dtype_device(x, out, "sum_middle");
  profile::add_work(detail::bytes_of(x, out), double(x.numel()));
  on_backend(x, "sum", [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::sum_middle(x.data<T>(), out.data<T>(), outer, n, inner, accumulate);
  });
}

Tensor sum_squares_on_device(const Tensor& x) {
  Tensor out = Tensor::empty({}, DType::F64, x.device());
  profile::add_work(detail::bytes_of(x), 2.0 * double(x.numel()));
  on_backend(x, "sum_squares", [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::sum_squares(x.data<T>(), x.numel(), out.data<double>());
  });
  return out;
}

double sum_squares(const Tensor& x) { return sum_squares_on_device(x).item(); }

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
  // for the profile, this product's shape: "4096x128x128 B^T" (M×N×K, which
  // operands are read transposed, the batch, += for beta ≠ 0)
  std::string shape;
  if (profile::enabled()) {
    shape = std::to_string(g.M) + "x" + std::to_string(g.N) + "x" + std::to_string(g.K);
    if (g.ta) shape += " A^T";
    if (g.tb) shape += " B^T";
    if (g.batch > 1) shape += " batch " + std::to_string(g.batch);
    if (beta != 0) shape += " +=";
  }
  profile::DetailScope detail(shape);
  const double element = double(dtype_size(a.dtype()));
  profile::add_work(element * double(g.batch) * double(g.M * g.K + g.K * g.N + (beta != 0 ? 2 : 1) * g.M * g.N),
                    2.0 * double(g.batch) * double(g.M) * double(g.N) * double(g.K));
  on_backend(a, "matmul", [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::gemm(g.batch, g.M, g.N, g.K, a.data<T>(), g.ta, g.stride_a, b.data<T>(), g.tb,
            g.stride_b, c.data<T>(), g.stride_c, T(alpha), T(beta));
  });
}


}  // namespace lina::dispatch
