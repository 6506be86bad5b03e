// dispatch::launch (dispatch/launch.h): every kernel of the op list on
// Tensors, generated from the list. One template, call_kernel, turns the
// arguments into the kernel's parameter types; the list's X-macro writes
// one entry point per kernel around it.
#include "dispatch/launch.h"

#include <string>
#include <utility>

#include "dispatch/backends.h"

namespace lina::dispatch {

void KernelArg::fail(const char* kernel, int index, const std::string& why) const {
  throw Error(std::string(kernel) + ": argument " + std::to_string(index + 1) + ": " + why);
}

namespace {

// The first tensor argument: it picks the device and dtype.
const Tensor& first_tensor(const char* kernel, KernelArgs args) {
  for (const KernelArg& a : args)
    if (const Tensor* t = a.tensor(); t && t->defined()) return *t;
  throw Error(std::string(kernel) + ": no defined tensor among the arguments");
}

template <class... P, size_t... I>
void call_with(const char* kernel, void (*fn)(P...), KernelArgs args, const Tensor& on,
               std::index_sequence<I...>) {
  const KernelArg* a = args.begin();
  fn(a[I].template as<std::decay_t<P>>(kernel, int(I), on)...);
}

// fn(each argument as fn's parameter type), after checking the count.
template <class... P>
void call_kernel(const char* kernel, void (*fn)(P...), KernelArgs args, const Tensor& on) {
  check(args.size() == sizeof...(P), std::string(kernel) + ": takes " +
                                         std::to_string(sizeof...(P)) + " arguments, got " +
                                         std::to_string(args.size()));
  call_with(kernel, fn, args, on, std::index_sequence_for<P...>{});
}

}  // namespace

namespace launch {
// The CPU kernel for the tensor's float type, or the CUDA kernel (counted
// like every CUDA call, dispatch/backends.h).
#define LINA_DEFINE_LAUNCH(ret, name, params)                                               \
  void name(KernelArgs args) {                                                              \
    const Tensor& on = first_tensor(#name, args);                                           \
    detail::on_backend(on, #name, [&](auto backend) {                                       \
      using B = decltype(backend);                                                          \
      if constexpr (std::is_same_v<B, detail::CudaBackend>) {                               \
        ++detail::cuda_kernel_call_counts()[int(detail::KernelId::name)];                   \
        call_kernel(#name, &cuda::name, args, on);                                          \
      } else {                                                                              \
        call_kernel(#name, &cpu::name<typename B::type>, args, on);                         \
      }                                                                                     \
    });                                                                                     \
  }
LINA_KERNELS(LINA_DEFINE_LAUNCH, float)
#undef LINA_DEFINE_LAUNCH
}  // namespace launch

}  // namespace lina::dispatch
