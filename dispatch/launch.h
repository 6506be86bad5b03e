// dispatch::launch::<kernel>({arguments}): any kernel of the op list
// (core/op_list.h) called on Tensors, generated from the list, so that an op
// needs no hand-written entry point of its own. The kernel runs on the first
// tensor argument's device, in its dtype (float32 or float64 on the CPU,
// float32 on CUDA). The arguments are the kernel's own, in its order:
//   a Tensor for a pointer parameter — passed as its data pointer, null when
//     the tensor is undefined; it must be on the same device, its dtype
//     the parameter's (a one-line lina::Error names the argument otherwise);
//   a number for a number parameter, a const int64_t* for a host array of
//     sizes or strides;
//   an argument struct (DropoutKey, AttentionShape, ScanShape) for one.
// Example, from autograd/ops/elementwise.cpp:
//   dispatch::launch::swiglu_forward({gate, up, y, rows, width, stride});
// The autograd node that calls it checks shapes and allocates the outputs.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include <string>
#include <typeinfo>

#include "core/op_list.h"
#include "core/tensor.h"

namespace lina::dispatch {

class KernelArg {
 public:
  KernelArg(const Tensor& t) : kind_(Kind::Tensor), tensor_(&t) {}  // NOLINT: implicit by design
  template <class N, std::enable_if_t<std::is_integral_v<N>, int> = 0>
  KernelArg(N n) : kind_(Kind::Integer), integer_(int64_t(n)) {}  // NOLINT
  template <class N, std::enable_if_t<std::is_floating_point_v<N>, int> = 0>
  KernelArg(N x) : kind_(Kind::Real), real_(double(x)) {}  // NOLINT
  KernelArg(const int64_t* array) : kind_(Kind::Int64Array), struct_(array) {}  // NOLINT
  template <class S, std::enable_if_t<std::is_class_v<S> && !std::is_same_v<S, Tensor>, int> = 0>
  KernelArg(const S& s) : kind_(Kind::Struct), struct_(&s), type_(&typeid(S)) {}  // NOLINT

  const Tensor* tensor() const { return kind_ == Kind::Tensor ? tensor_ : nullptr; }
  // This argument as the kernel's parameter type P, for a kernel on `on`'s device.
  template <class P> P as(const char* kernel, int index, const Tensor& on) const;

 private:
  enum class Kind { Tensor, Integer, Real, Struct, Int64Array };
  [[noreturn]] void fail(const char* kernel, int index, const std::string& why) const;
  Kind kind_;
  const Tensor* tensor_ = nullptr;
  int64_t integer_ = 0;
  double real_ = 0.0;
  const void* struct_ = nullptr;
  const std::type_info* type_ = nullptr;
};
using KernelArgs = std::initializer_list<KernelArg>;

namespace launch {
#define LINA_DECLARE_LAUNCH(ret, name, params) void name(KernelArgs args);
LINA_KERNELS(LINA_DECLARE_LAUNCH, float)
#undef LINA_DECLARE_LAUNCH
}  // namespace launch

// ---- KernelArg::as --------------------------------------------------------------------------
template <class P>
P KernelArg::as(const char* kernel, int index, const Tensor& on) const {
  if constexpr (std::is_pointer_v<P> && std::is_same_v<std::remove_cv_t<std::remove_pointer_t<P>>, int64_t>) {
    if (kind_ != Kind::Int64Array) fail(kernel, index, "a const int64_t* is expected");
    return static_cast<P>(struct_);
  } else if constexpr (std::is_pointer_v<P>) {
    using Element = std::remove_cv_t<std::remove_pointer_t<P>>;
    if (kind_ != Kind::Tensor) fail(kernel, index, "a tensor is expected");
    if (!tensor_->defined()) return nullptr;
    if (tensor_->device() != on.device())
      fail(kernel, index, tensor_->describe() + ", expected on " + device_name(on.device()));
    if (tensor_->dtype() != dtype_of<Element>())
      fail(kernel, index, tensor_->describe() + ", expected " + dtype_name(dtype_of<Element>()));
    return tensor_->data<Element>();
  } else if constexpr (std::is_arithmetic_v<P>) {
    if (kind_ == Kind::Integer) return P(integer_);
    if (kind_ == Kind::Real && std::is_floating_point_v<P>) return P(real_);
    fail(kernel, index, std::is_floating_point_v<P> ? "a number is expected" : "an integer is expected");
  } else {
    if (kind_ != Kind::Struct || *type_ != typeid(P))
      fail(kernel, index, std::string("a ") + typeid(P).name() + " is expected");
    return *static_cast<const P*>(struct_);
  }
}

}  // namespace lina::dispatch
