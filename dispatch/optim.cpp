// Backend dispatch of the optimiser: the AdamW step, gradient clipping and scaling.
#include <array>
#include <cmath>
#include <vector>
#include <string>

#include "dispatch/backends.h"
#include "dispatch/dispatch.h"
#include "dispatch/launch.h"

namespace lina::dispatch {

using detail::on_backend;

// The numbers in T, as the CPU and CUDA kernels computed them before they
// moved to a table (bit for bit the same).
template <class T>
static std::array<double, 3> adamw_scalars_in(double lr, double beta1, double beta2, double weight_decay,
                                              int64_t step) {
  // Bias corrections in double, whatever the parameters' dtype.
  const double bias_correction1 = 1.0 - std::pow(beta1, double(step));
  const double bias_correction2 = 1.0 - std::pow(beta2, double(step));
  const T decay_factor = T(1) - T(lr) * T(weight_decay);
  const T step_size = T(lr) / T(bias_correction1);
  const T bias_correction2_sqrt = std::sqrt(T(bias_correction2));
  return {double(decay_factor), double(step_size), double(bias_correction2_sqrt)};
}

std::array<double, 3> adamw_scalars(double lr, double beta1, double beta2, double weight_decay,
                                    int64_t step, DType dtype) {
  check(step >= 1, "adamw_step: step counts from 1, got " + std::to_string(step));
  if (dtype == DType::F64) return adamw_scalars_in<double>(lr, beta1, beta2, weight_decay, step);
  return adamw_scalars_in<float>(lr, beta1, beta2, weight_decay, step);
}

void adamw_step(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, double lr, double beta1,
                double beta2, double eps, double weight_decay, int64_t step,
                const Tensor& weight_decay_mask) {
  const Tensor* others[] = {&grad, &m, &v, &weight_decay_mask};
  for (const Tensor* t : others) {
    if (!t->defined()) continue;  // (only the mask may be undefined)
    check_same_shape(param, *t, "adamw_step");
    check_same_dtype_device(param, *t, "adamw_step");
  }
  std::array<double, 3> numbers = adamw_scalars(lr, beta1, beta2, weight_decay, step, param.dtype());
  Tensor scalars = Tensor::from_vector(std::vector<double>(numbers.begin(), numbers.end()), {3})
                       .to(param.dtype())
                       .to(param.device());
  // param, m, v read and written, grad read; a dozen operations an element
  profile::add_work(2 * detail::bytes_of(param, m, v) + detail::bytes_of(grad, weight_decay_mask), 12.0 * double(param.numel()));
  launch::adamw_step(
      {param, grad, m, v, weight_decay_mask, param.numel(), beta1, beta2, eps, scalars, Tensor(), Tensor(), 0.0});
}

void clip_to_norm(Tensor& x, const Tensor& sum_of_squares, double max_norm) {
  check(sum_of_squares.dtype() == DType::F64 && sum_of_squares.numel() == 1 &&
            sum_of_squares.device() == x.device(),
        "clip_to_norm: the sum of squares must be one float64 on " +
            std::string(device_name(x.device())) + ", got " + sum_of_squares.describe());
  // must read the one sum only: x is scaled where its norm is over max_norm
  profile::add_work(double(sum_of_squares.nbytes()), 0);
  on_backend(x, "clip_to_norm", [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::clip_to_norm(x.data<T>(), x.numel(), sum_of_squares.data<double>(), max_norm);
  });
}

void scale_inplace(Tensor& x, double factor) {
  profile::add_work(2 * detail::bytes_of(x), double(x.numel()));
  on_backend(x, "scale_inplace", [&](auto backend) {
    using B = decltype(backend);
    using T = typename B::type;
    B::scale_inplace(x.data<T>(), x.numel(), T(factor));
  });
}

}  // namespace lina::dispatch
