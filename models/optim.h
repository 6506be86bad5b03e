// Training-loop maths: AdamW over a ParameterStore, global gradient-norm
// clipping, and the learning-rate schedule (linear warm-up, cosine decay).
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "models/parameters.h"

namespace lina {

// PyTorch's defaults (torch.optim.AdamW), the course's optimiser.
struct AdamWConfig {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
  // Weight decay on every parameter (PyTorch's default), or only on those
  // added with weight_decay = true (the matrices: --decay-matrices).
  bool decay_all = true;
};

// AdamW with PyTorch's semantics, for each parameter p with gradient g:
//   p ← p − lr·wd·p            (decoupled weight decay; every parameter, or those marked)
//   m ← β1 m + (1 − β1) g,  v ← β2 v + (1 − β2) g²
//   p ← p − lr·m̂ / (√v̂ + eps),  m̂ = m / (1 − β1^t),  v̂ = v / (1 − β2^t)
// m and v are buffers laid out like the parameter buffer, so a checkpoint
// can save them next to the parameters and slice them by name.
class AdamW {
 public:
  // The store must be finalized (and outlive the optimiser); the moments
  // start at zero, update_count at 0.
  AdamW(ParameterStore& params, AdamWConfig config = {});

  // One update with learning rate `lr` (the schedule's value for this
  // update; config().lr is the peak); update_count() counts it.
  void update(double lr);
  void update() { update(config_.lr); }
  // The same update with its numbers already in the parameters' memory: an
  // update plan's (experiments/update_plan.h) scalars [3] (scalars(), for
  // update update_count() + 1) and control [3] (no update while control[2] ≠ 0),
  // so that nothing is copied from the host and a CUDA graph can replay it.
  // With max_norm > 0 the gradients are clipped on the way by their Σ g²
  // (one float64 there, UpdatePlan::sum_of_squares), as clip_grad_norm would
  // before the update: the same numbers, one pass fewer, the buffer unchanged.
  void update(const Tensor& scalars, const Tensor& control, const Tensor& sum_of_squares = Tensor(),
              double max_norm = 0.0);
  // The numbers of update t (1-based) at learning rate lr (dispatch::adamw_scalars).
  std::array<double, 3> scalars(double lr, int64_t t) const;

  const AdamWConfig& config() const { return config_; }
  int64_t update_count() const { return update_count_; }  // updates done so far (t)
  void set_update_count(int64_t t);
  // [params.count()] each; write into them (copy_from) to restore a checkpoint.
  Tensor& first_moment() { return m_; }
  Tensor& second_moment() { return v_; }
  // The view of a moment buffer that belongs to parameter `name`.
  Tensor first_moment(const std::string& name) const;
  Tensor second_moment(const std::string& name) const;

 private:
  Tensor moment_view(const Tensor& buffer, const std::string& name) const;

  ParameterStore& params_;
  AdamWConfig config_;
  Tensor m_, v_;
  Tensor weight_decay_mask_;  // [params.count()]: 1 where weight decay applies, else 0
  int64_t update_count_ = 0;
};

// Scales every gradient by max_norm / (norm + 1e-6) when that is below 1,
// where norm is the global L2 norm over all gradients (PyTorch's
// clip_grad_norm_); max_norm 0: no clipping. Returns the norm before clipping.
double clip_grad_norm(ParameterStore& params, double max_norm);

// Learning rate of update s (0-based) out of total_updates:
//   s < warmup:  max_lr·(s + 1)/warmup
//   otherwise:   min_lr + ½(max_lr − min_lr)(1 + cos(π·progress)),
//                progress = (s − warmup)/(total_updates − 1 − warmup), clamped to [0, 1],
// so the last update (s = total_updates − 1) gets exactly min_lr. When there
// is no room for the decay (total_updates − 1 ≤ warmup), warm-up updates keep
// the warm-up rate and any later one gets min_lr.
double lr_at(int64_t update, int64_t total_updates, double max_lr, double min_lr, int64_t warmup);

}  // namespace lina
