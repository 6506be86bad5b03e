#include "models/optim.h"

#include <algorithm>
#include <cmath>

#include "core/profile.h"
#include "dispatch/dispatch.h"
#include "dispatch/launch.h"

namespace lina {

// ---- AdamW ------------------------------------------------------------------------------

AdamW::AdamW(ParameterStore& params, AdamWConfig config) : params_(params), config_(config) {
  check(params.finalized(), "AdamW: the parameter store must be finalized first");
  m_ = Tensor::zeros({params.count()}, params.dtype(), params.device());
  v_ = Tensor::zeros({params.count()}, params.dtype(), params.device());
  if (config.decay_all) return;  // no mask: weight decay applies everywhere
  // One update over the whole flat buffer: the mask says where weight decay applies.
  std::vector<double> mask(size_t(params.count()), 0.0);
  for (const Parameter& p : params.parameters())
    if (p.weight_decay) std::fill_n(mask.begin() + p.offset, p.var.data().numel(), 1.0);
  weight_decay_mask_ = Tensor::from_vector(mask, {params.count()}).to(params.dtype()).to(params.device());
}

// The moments live where the parameters do, and every gradient is in the buffer.
static void check_ready(const ParameterStore& params, const Tensor& moments) {
  check(params.device() == moments.device(),
        std::string("AdamW::update: parameters are on ") + device_name(params.device()) +
            " but the moments on " + device_name(moments.device()) +
            " (create the optimiser after moving the parameters)");
  params.check_grads_in_buffer("AdamW::update");
}

void AdamW::update(double lr) {
  check_ready(params_, m_);
  int64_t t = update_count_ + 1;  // bias corrections use the count including this update
  Tensor p = params_.data(), g = params_.grad();
  dispatch::adamw_step(p, g, m_, v_, lr, config_.beta1, config_.beta2, config_.eps,
                      config_.weight_decay, t, weight_decay_mask_);
  update_count_ = t;
}

void AdamW::update(const Tensor& scalars, const Tensor& control, const Tensor& sum_of_squares, double max_norm) {
  check_ready(params_, m_);
  check(scalars.defined() && scalars.numel() == 3 && scalars.device() == m_.device(),
        "AdamW::update: the update's numbers must be 3 values on " + std::string(device_name(m_.device())) +
            " (1 − lr·wd, lr / bc1, √bc2: AdamW::scalars), got " +
            (scalars.defined() ? scalars.describe() : std::string("none")));
  Tensor p = params_.data(), g = params_.grad();
  // p, m, v read and written, g read; a dozen operations an element (lina bench --profile)
  profile::add_work(2.0 * double(p.nbytes() + m_.nbytes() + v_.nbytes()) + double(g.nbytes()), 12.0 * double(p.numel()));
  dispatch::launch::adamw_step({p, g, m_, v_, weight_decay_mask_, p.numel(), config_.beta1, config_.beta2,
                                config_.eps, scalars, control, sum_of_squares, max_norm});
  update_count_ += 1;
}

std::array<double, 3> AdamW::scalars(double lr, int64_t t) const {
  return dispatch::adamw_scalars(lr, config_.beta1, config_.beta2, config_.weight_decay, t, params_.dtype());
}

void AdamW::set_update_count(int64_t t) {
  check(t >= 0, "AdamW::set_update_count: negative update count " + std::to_string(t));
  update_count_ = t;
}

Tensor AdamW::moment_view(const Tensor& buffer, const std::string& name) const {
  const Parameter& p = params_.info(name);
  return Tensor::view_of(buffer, p.offset, p.var.shape());
}
Tensor AdamW::first_moment(const std::string& name) const { return moment_view(m_, name); }
Tensor AdamW::second_moment(const std::string& name) const { return moment_view(v_, name); }

// ---- gradient clipping --------------------------------------------------------------------

double clip_grad_norm(ParameterStore& params, double max_norm) {
  check(max_norm >= 0, "clip_grad_norm: max_norm must not be negative, got " + std::to_string(max_norm));
  params.check_grads_in_buffer("clip_grad_norm");
  Tensor grad = params.grad();  // the whole gradient buffer
  // Σ g² stays on the gradients' device and the clip factor is computed
  // there; only the norm returned is read back.
  Tensor sum_of_squares = dispatch::sum_squares_on_device(grad);
  if (max_norm > 0) dispatch::clip_to_norm(grad, sum_of_squares, max_norm);
  return std::sqrt(sum_of_squares.item());  // on CUDA: a read back
}

// ---- learning-rate schedule -----------------------------------------------------------------

double lr_at(int64_t update, int64_t total_updates, double max_lr, double min_lr, int64_t warmup) {
  check(update >= 0 && total_updates >= 1 && warmup >= 0,
        "lr_at: need update >= 0, total_updates >= 1, warmup >= 0; got update " +
            std::to_string(update) + ", total " + std::to_string(total_updates) + ", warmup " +
            std::to_string(warmup));
  if (update < warmup) return max_lr * (double(update + 1) / double(warmup));
  int64_t decay_updates = total_updates - 1 - warmup;
  if (decay_updates <= 0) return min_lr;
  double progress = double(update - warmup) / double(decay_updates);
  if (progress >= 1.0) return min_lr;  // exactly, at and after the last update
  const double pi = std::acos(-1.0);
  return min_lr + 0.5 * (max_lr - min_lr) * (1.0 + std::cos(pi * progress));
}

}  // namespace lina
