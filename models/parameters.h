// ParameterStore: every parameter of a model in ONE contiguous buffer, each
// a named view into it, and every gradient in a second buffer laid out the
// same way. AdamW and the gradient norm then run once over whole buffers,
// while checkpoints and tests address tensors by name
// ("blocks.2.mix.q_proj.weight").
//
// Life cycle:
//   ParameterStore params;
//   Var w = params.add("mlp.fc.weight", {512, 128}, /*weight_decay=*/true);  // while building layers
//   params.finalize(DType::F32, Device::Cpu);  // one buffer; w now views it
//   init(w);                                   // write initial values (before or after finalize)
//   loss.backward();                           // accumulates into params.grad()
//   params.zero_grad();
//
// Before finalize() each parameter owns a standalone float64 CPU tensor of
// zeros, so shapes are known and values may already be written; finalize()
// allocates the two buffers, copies (and casts) those values in, and
// re-points every parameter's data at its view. Var copies share their
// VarImpl, so layers that kept a Var see the new data. After finalize() no
// parameter can be added, and each parameter's grad() is a view into the
// gradient buffer: autograd's accumulation (add_inplace into a defined
// grad) then adds into the buffer in place.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "autograd/var.h"

namespace lina {

struct Parameter {
  std::string name;
  Var var;             // requires_grad; data (and grad, once finalized) view the buffers
  bool weight_decay = false;  // AdamW applies weight decay to this parameter
  int64_t offset = 0;  // first element in the buffers
};

class ParameterStore {
 public:
  // Registers a parameter and returns its Var (a handle: copies share the
  // same data and grad). Names are unique. Throws once finalized.
  Var add(const std::string& name, const Shape& shape, bool weight_decay);
  // Asks finalize() to lay the named parameters (already added) out one
  // after another in this order, where the first of them would go: their
  // rows then form one matrix (stacked_rows), so one product serves them
  // all. Registration order (names, initial values, checkpoints) is
  // unchanged; only the offsets in the buffers move.
  void place_together(const std::vector<std::string>& names);
  // Packs every parameter into one data buffer and one zeroed grad buffer
  // of `dtype` on `device`. Called once.
  void finalize(DType dtype = DType::F32, Device device = Device::Cpu);
  bool finalized() const { return data_.defined(); }

  // ---- access -------------------------------------------------------------------------
  const std::vector<Parameter>& parameters() const { return params_; }  // in add() order
  bool has(const std::string& name) const { return index_.count(name) > 0; }
  Var get(const std::string& name) const;  // throws for an unknown name
  const Parameter& info(const std::string& name) const;
  int64_t count() const { return count_; }  // total elements
  // The whole buffers, [count()] (finalized stores only). Handles: writing
  // into them (copy_from, kernels) writes the parameters / gradients.
  Tensor data() const;
  Tensor grad() const;
  DType dtype() const;
  Device device() const;

  // ---- training -----------------------------------------------------------------------
  // Fills the gradient buffer with 0 and points every parameter's grad back
  // at its view (in case something replaced it).
  void zero_grad();
  // Throws naming `op` and the parameter if some parameter's grad no longer
  // views the gradient buffer (Var::zero_grad() detaches it: use this
  // store's zero_grad() instead).
  void check_grads_in_buffer(const char* op) const;
  // Moves both buffers to `device` and re-points every view (no-op if there).
  void to(Device device);

 private:
  void require_finalized(const char* what) const;
  void assign_offsets();  // each parameter's offset (finalize)
  void point_views();  // sets every Var's data and grad to its views of data_ / grad_

  std::vector<Parameter> params_;
  std::unordered_map<std::string, size_t> index_;
  int64_t count_ = 0;
  std::vector<std::vector<size_t>> together_;  // place_together's groups, as indices into params_
  Tensor data_, grad_;  // [count_] each, once finalized
};

}  // namespace lina
