#include "models/parameters.h"

#include <algorithm>

#include "dispatch/dispatch.h"

namespace lina {

Var ParameterStore::add(const std::string& name, const Shape& shape, bool weight_decay) {
  check(!finalized(), "ParameterStore::add: cannot add '" + name + "' after finalize()");
  check(!name.empty(), "ParameterStore::add: a parameter needs a name");
  check(!has(name), "ParameterStore::add: duplicate parameter name '" + name + "'");
  Var var(Tensor::zeros(shape, DType::F64, Device::Cpu), /*requires_grad=*/true, name);
  index_[name] = params_.size();
  params_.push_back({name, var, weight_decay, count_});  // the offset moves if place_together asks
  count_ += var.data().numel();
  return var;
}

void ParameterStore::place_together(const std::vector<std::string>& names) {
  check(!finalized(), "ParameterStore::place_together: cannot move parameters after finalize()");
  std::vector<size_t> group;
  for (const std::string& name : names) {
    check(has(name), "ParameterStore::place_together: no parameter named '" + name + "'");
    const size_t i = index_.at(name);
    for (const std::vector<size_t>& other : together_)
      check(std::find(other.begin(), other.end(), i) == other.end(),
            "ParameterStore::place_together: '" + name + "' is in another group already");
    group.push_back(i);
  }
  together_.push_back(group);
}

// Offsets in registration order, except that a place_together group goes
// whole where its first-registered member would have gone.
void ParameterStore::assign_offsets() {
  std::vector<int> group_of(params_.size(), -1);
  for (size_t g = 0; g < together_.size(); ++g)
    for (size_t i : together_[g]) group_of[i] = int(g);
  std::vector<bool> placed(params_.size(), false);
  int64_t offset = 0;
  auto place = [&](size_t i) {
    params_[i].offset = offset;
    offset += params_[i].var.data().numel();
    placed[i] = true;
  };
  for (size_t i = 0; i < params_.size(); ++i) {
    if (placed[i]) continue;
    if (group_of[i] < 0) place(i);
    else
      for (size_t j : together_[size_t(group_of[i])]) place(j);
  }
}

void ParameterStore::finalize(DType dtype, Device device) {
  check(!finalized(), "ParameterStore::finalize: already finalized");
  assign_offsets();
  check(is_float(dtype), std::string("ParameterStore::finalize: parameters must be float, got ") +
                             dtype_name(dtype));
  data_ = Tensor::empty({count_}, dtype, device);
  grad_ = Tensor::zeros({count_}, dtype, device);
  for (Parameter& p : params_) {
    Tensor view = Tensor::view_of(data_, p.offset, p.var.shape());
    view.copy_from(p.var.data().to(dtype));  // keeps values written before finalize
  }
  point_views();
}

void ParameterStore::point_views() {
  for (Parameter& p : params_) {
    const Shape shape = p.var.shape();
    p.var.data() = Tensor::view_of(data_, p.offset, shape);
    p.var.grad() = Tensor::view_of(grad_, p.offset, shape);
  }
}

void ParameterStore::require_finalized(const char* what) const {
  check(finalized(), std::string("ParameterStore::") + what + ": call finalize() first");
}

// ---- access ---------------------------------------------------------------------------

const Parameter& ParameterStore::info(const std::string& name) const {
  auto it = index_.find(name);
  check(it != index_.end(), "ParameterStore: no parameter named '" + name + "'");
  return params_[it->second];
}

Var ParameterStore::get(const std::string& name) const { return info(name).var; }

Tensor ParameterStore::data() const {
  require_finalized("data");
  return data_;
}
Tensor ParameterStore::grad() const {
  require_finalized("grad");
  return grad_;
}
DType ParameterStore::dtype() const {
  require_finalized("dtype");
  return data_.dtype();
}
Device ParameterStore::device() const {
  require_finalized("device");
  return data_.device();
}

// ---- training -------------------------------------------------------------------------

void ParameterStore::zero_grad() {
  require_finalized("zero_grad");
  dispatch::fill(grad_, 0.0);
  for (Parameter& p : params_) p.var.grad() = Tensor::view_of(grad_, p.offset, p.var.shape());
}

void ParameterStore::check_grads_in_buffer(const char* op) const {
  require_finalized("check_grads_in_buffer");
  for (const Parameter& p : params_)
    check(p.var.grad().defined() && p.var.grad().same_storage(grad_),
          std::string(op) + ": the gradient of '" + p.name +
              "' is not in the gradient buffer (use ParameterStore::zero_grad, not Var::zero_grad)");
}

void ParameterStore::to(Device device) {
  require_finalized("to");
  if (device == data_.device()) return;
  data_ = data_.to(device);
  grad_ = grad_.to(device);
  point_views();
}

}  // namespace lina
