#include "experiments/update_plan.h"

#include "dispatch/launch.h"

namespace lina {

UpdatePlan::UpdatePlan(int window, int64_t batch, int64_t context, bool masked, DType dtype, Device device)
    : window_(window), tokens_(batch * context) {
  check(window >= 1, "UpdatePlan: a window holds at least one update");
  ids_table_ = Tensor::zeros({window, 2 * tokens_}, DType::I32, device);
  scalar_table_ = Tensor::zeros({window, 3}, dtype, device);
  ids_ = Tensor::zeros({2 * tokens_}, DType::I32, device);
  x_ = Tensor::view_of(ids_, 0, {batch, context});
  y_ = Tensor::view_of(ids_, tokens_, {batch, context});
  if (masked) {  // each row: the mask, then its count
    mask_table_ = Tensor::zeros({window, tokens_ + 1}, dtype, device);
    mask_row_ = Tensor::zeros({tokens_ + 1}, dtype, device);
    mask_ = Tensor::view_of(mask_row_, 0, {batch, context});
    mask_count_ = Tensor::view_of(mask_row_, tokens_, {1});
  }
  scalars_ = Tensor::zeros({3}, dtype, device);
  control_ = Tensor::zeros({3}, DType::I32, device);
  sum_of_squares_ = Tensor::empty({1}, DType::F64, device);  // written by each update's end()
  log_ = Tensor::empty({window, 2}, DType::F64, device);  // each row written by its update before it is read
}

void UpdatePlan::load(const std::vector<Batch>& batches, const std::vector<std::array<double, 3>>& adamw,
                      int first_update) {
  const int n = int(batches.size());
  check(n >= 1 && n <= window_ && int(adamw.size()) == n, "UpdatePlan::load: 1 to window updates, one AdamW row each");
  std::vector<int32_t> ids(size_t(n * 2 * tokens_), 0);     // [n, 2 · tokens]
  std::vector<float> mask(mask_.defined() ? size_t(n * (tokens_ + 1)) : 0, 0.0f);  // [n, tokens + 1]
  std::vector<double> numbers(size_t(n * 3), 0.0);           // [n, 3]
  for (int u = 0; u < n; ++u) {
    std::vector<int32_t> x = batches[u].x.to_vector<int32_t>(), y = batches[u].y.to_vector<int32_t>();
    check(int64_t(x.size()) == tokens_ && int64_t(y.size()) == tokens_, "UpdatePlan::load: a batch of another shape");
    std::copy(x.begin(), x.end(), ids.begin() + u * 2 * tokens_);
    std::copy(y.begin(), y.end(), ids.begin() + u * 2 * tokens_ + tokens_);
    if (mask_.defined()) {
      std::vector<float> m = batches[u].mask.to_vector<float>();
      check(int64_t(m.size()) == tokens_, "UpdatePlan::load: a mask of another shape");
      double count = 0;  // Σ mask, once here rather than by every block of the loss's kernel
      for (float value : m) count += double(value);
      std::copy(m.begin(), m.end(), mask.begin() + u * (tokens_ + 1));
      mask[size_t(u * (tokens_ + 1) + tokens_)] = float(count);
    }
    std::copy(adamw[u].begin(), adamw[u].end(), numbers.begin() + u * 3);
  }
  // only the window's first n rows: a short window (before an evaluation) copies no more
  auto first_rows = [n](const Tensor& table) {
    Shape shape = table.shape();
    shape[0] = n;
    return Tensor::view_of(table, 0, shape);
  };
  first_rows(ids_table_).copy_from(Tensor::from_vector(ids, first_rows(ids_table_).shape()));
  if (mask_.defined())
    first_rows(mask_table_).copy_from(Tensor::from_vector(mask, first_rows(mask_table_).shape()).to(mask_table_.dtype()));
  first_rows(scalar_table_).copy_from(Tensor::from_vector(numbers, first_rows(scalar_table_).shape()).to(scalar_table_.dtype()));
  control_.copy_from(Tensor::from_vector(std::vector<int32_t>{0, first_update, 0}, {3}));
}

void UpdatePlan::begin() {
  dispatch::launch::begin_update(
      {scalar_table_, scalars_, ids_table_, ids_, 2 * tokens_, mask_table_, mask_row_, tokens_ + 1, control_});
}

void UpdatePlan::end(const Tensor& loss, const Tensor& grad) {
  dispatch::launch::end_update({loss, grad, grad.numel(), sum_of_squares_, log_, control_});
}

UpdatePlan::Log UpdatePlan::read(int updates) const {
  std::vector<double> all = log_.to_vector<double>();  // the one read back
  Log log;
  for (int u = 0; u < updates; ++u) {
    log.loss.push_back(all[size_t(2 * u)]);
    log.sum_of_squares.push_back(all[size_t(2 * u + 1)]);
  }
  return log;
}

}  // namespace lina
