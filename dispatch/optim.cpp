// Backend dispatch of the optimiser: the AdamW step, gradient clipping and scaling.
#include <cmath>
#include <string>

#include "dispatch/backends.h"
#include "dispatch/dispatch.h"

namespace lina::dispatch {

using detail::on_backend;

void adamw_step(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, double lr, double beta1,
                double beta2, double eps, double weight_decay, int64_t step,
                const Tensor& decay_mask) {
  const Tensor* others[] = {&grad, &m, &v, &decay_mask};
  for (const Tensor* t : others) {
    if (!t->defined()) continue;  // (only the mask may be undefined)
    check_same_shape(param, *t, "adamw_step");
    check_same_dtype_device(param, *t, "adamw_step");
  }
  check(step >= 1, "adamw_step: step counts from 1, got " + std::to_string(step));
  // Bias corrections in double, whatever the parameters' dtype.
  double bias_correction1 = 1.0 - std::pow(beta1, double(step));
  double bias_correction2 = 1.0 - std::pow(beta2, double(step));
  on_backend(param, "adamw_step", [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::adamw_step(param.data<T>(), grad.data<T>(), m.data<T>(), v.data<T>(),
                  decay_mask.defined() ? decay_mask.data<T>() : nullptr, param.numel(),
                  T(lr), T(beta1), T(beta2), T(eps), T(weight_decay), T(bias_correction1),
                  T(bias_correction2));
  });
}

void clip_to_norm(Tensor& x, const Tensor& sum_of_squares, double max_norm) {
  check(sum_of_squares.dtype() == DType::F64 && sum_of_squares.numel() == 1 &&
            sum_of_squares.device() == x.device(),
        "clip_to_norm: the sum of squares must be one float64 on " +
            std::string(device_name(x.device())) + ", got " + sum_of_squares.describe());
  on_backend(x, "clip_to_norm", [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::clip_to_norm(x.data<T>(), x.numel(), sum_of_squares.data<double>(), max_norm);
  });
}

void scale_inplace(Tensor& x, double factor) {
  on_backend(x, "scale_inplace", [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::scale_inplace(x.data<T>(), x.numel(), T(factor));
  });
}

}  // namespace lina::dispatch
