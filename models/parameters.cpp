#include "models/parameters.h"

#include "dispatch/dispatch.h"

namespace lina {

Var ParameterStore::add(const std::string& name, const Shape& shape, bool decay) {
  check(!finalized(), "ParameterStore::add: cannot add '" + name + "' after finalize()");
  check(!name.empty(), "ParameterStore::add: a parameter needs a name");
  check(!has(name), "ParameterStore::add: duplicate parameter name '" + name + "'");
  Var var(Tensor::zeros(shape, DType::F64, Device::Cpu), /*requires_grad=*/true, name);
  index_[name] = params_.size();
  params_.push_back({name, var, decay, count_});
  count_ += var.data().numel();
  return var;
}

void ParameterStore::finalize(DType dtype, Device device) {
  check(!finalized(), "ParameterStore::finalize: already finalized");
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
