// Internal to the dispatch/*.cpp files: dtype and device selection.
// dispatch/ is the one layer that sees both backends: it implements the
// entry points of dispatch/dispatch.h by calling backend_cpu/ or
// backend_cuda/; core/ and the backends never include each other, and core/
// reaches a device's memory only through core/device_memory.h.
#pragma once
#include <string>
#include <utility>

#include "backend_cpu/cpu_kernels.h"
#include "backend_cuda/cuda_kernels.h"
#include "core/profile.h"
#include "core/tensor.h"

namespace lina::dispatch::detail {

// Calls fn(float{}) or fn(double{}) for a float tensor; throws otherwise.
template <class Fn>
void with_float_type(const Tensor& t, const char* op, Fn&& fn) {
  switch (t.dtype()) {
    case DType::F32: fn(float{}); return;
    case DType::F64: fn(double{}); return;
    default: throw Error(std::string(op) + ": expected float32 or float64, got " + t.describe());
  }
}

// Throws unless t is float32: the CUDA kernels are.
inline void require_cuda_float(const Tensor& t, const char* op) {
  if (t.dtype() != DType::F32)
    throw Error(std::string(op) + ": the CUDA backend supports float32 only, got " + t.describe());
}

// One id per entry of LINA_KERNELS, in its order.
enum class KernelId {
#define LINA_KERNEL_ID(ret, name, params) name,
  LINA_KERNELS(LINA_KERNEL_ID, float)
#undef LINA_KERNEL_ID
  Count
};
int64_t* cuda_kernel_call_counts();  // [KernelId::Count], dispatch/tensor_ops.cpp

// ---- one call site for both backends ----------------------------------------------
// A backend as a type: B::name(args...) calls that backend's kernel `name`,
// B::type is its element type. on_backend picks B from the tensor, so a
// dispatch function writes each kernel's arguments once:
//   on_backend(x, "softmax", [&](auto backend) {
//     using B = decltype(backend);
//     using T = typename B::type;
//     B::softmax_forward(x.data<T>(), y.data<T>(), R, N, Tq, causal);
//   });
template <class T>
struct CpuBackend {
  using type = T;
#define LINA_FORWARD_TO_CPU(ret, name, params) \
  template <class... A> static ret name(A&&... a) { return cpu::name<T>(std::forward<A>(a)...); }
  LINA_KERNELS(LINA_FORWARD_TO_CPU, T)
#undef LINA_FORWARD_TO_CPU
};

// Every CUDA call of a list entry is counted (dispatch::cuda_kernel_calls),
// so the op × device table can tell which entries it has not run.
struct CudaBackend {
  using type = float;
#define LINA_FORWARD_TO_CUDA(ret, name, params)                  \
  template <class... A> static ret name(A&&... a) {              \
    ++cuda_kernel_call_counts()[int(KernelId::name)];            \
    return cuda::name(std::forward<A>(a)...);                    \
  }
  LINA_KERNELS(LINA_FORWARD_TO_CUDA, float)
#undef LINA_FORWARD_TO_CUDA
};

// Calls call(CpuBackend<float or double>{}) for a CPU tensor, call(CudaBackend{})
// for a CUDA one (float32 only); throws for other dtypes. The switch names every
// Device and has no default, so a new device is a compile error here
// (-Werror=switch), not a silent fall-through to one of these.
template <class Call>
void on_backend_untimed(const Tensor& t, const char* op, Call&& call) {
  switch (t.device()) {
    case Device::Cpu:
      with_float_type(t, op, [&](auto zero) { call(CpuBackend<decltype(zero)>{}); });
      return;
    case Device::Cuda:
      require_cuda_float(t, op);
      call(CudaBackend{});
      return;
  }
}

// The bytes of the given tensors, undefined ones 0: what a call that reads
// or writes each once must move (profile::add_work).
template <class... Ts>
double bytes_of(const Ts&... t) {
  return (0.0 + ... + (t.defined() ? double(t.nbytes()) : 0.0));
}

// on_backend_untimed, timed by op name when profiling is on (core/profile.h).
template <class Call>
void on_backend(const Tensor& t, const char* op, Call&& call) {
  profile::timed(op, [&] { on_backend_untimed(t, op, call); });
}

}  // namespace lina::dispatch::detail
