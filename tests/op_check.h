// Running the op table's rows (tests/op_table.h): one run of a row on a
// device, and the CPU against cuda over the whole table. The float64
// gradient check of a row is tests/test_op_table.cpp's (tests/gradcheck.h).
// Header only: lina_cuda_tests, built from tests/test_cuda_backend.cpp
// alone, runs the table too.
#pragma once
#include <doctest/doctest.h>

#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "dispatch/dispatch.h"
#include "tests/harness.h"
#include "tests/op_table.h"

namespace lina::test {

// The OpKind named `name` (core/ops.h), if there is one.
inline std::optional<OpKind> op_kind_named(const std::string& name) {
  for (int k = 0; k < int(OpKind::Count); ++k)
    if (name == op_name(OpKind(k))) return OpKind(k);
  return std::nullopt;
}

// The inputs of `row`, drawn from its seed, as `dtype` on `device` (int32
// stays int32).
inline std::vector<Tensor> row_inputs(const OpRow& row, DType dtype, Device device) {
  Rng rng(2024);
  std::vector<Tensor> inputs;
  for (const Input& input : row.inputs) {
    Tensor t = input.make(rng);
    if (t.defined() && is_float(t.dtype())) t = t.to(dtype);
    inputs.push_back(t.defined() ? t.to(device) : t);
  }
  return inputs;
}

// Which inputs of `row` get a gradient: the differentiable float inputs of
// an autograd op's row.
inline std::vector<bool> row_differentiable(const OpRow& row, const std::vector<Tensor>& inputs) {
  std::vector<bool> differentiable;
  for (size_t i = 0; i < inputs.size(); ++i)
    differentiable.push_back(row.no_gradient.empty() && row.inputs[i].differentiable &&
                             inputs[i].defined() && is_float(inputs[i].dtype()));
  return differentiable;
}

// The inputs of `row` as leaves of the tape, the differentiable ones
// requiring grad.
inline Vars row_leaves(const OpRow& row, DType dtype, Device device) {
  const std::vector<Tensor> inputs = row_inputs(row, dtype, device);
  const std::vector<bool> differentiable = row_differentiable(row, inputs);
  Vars vars;
  for (size_t i = 0; i < inputs.size(); ++i) vars.emplace_back(inputs[i], bool(differentiable[i]));
  return vars;
}

// One result of a run, by name: "output 0", "output 0 saved 'rstd'",
// "gradient of input 1".
struct RowResult {
  std::string name;
  Tensor value;
};

// Runs `row` on `device` in `dtype`: its outputs; for an autograd op, what
// the op saved for its backward, then the backward of
// L = Σ_k Σ output_k ⊙ R_k (R_k drawn from a fixed seed) and every
// differentiable input's gradient.
inline std::vector<RowResult> run_row(const OpRow& row, Device device, DType dtype = DType::F32) {
  const Vars vars = row_leaves(row, dtype, device);
  const Vars outs = row.run(vars);
  std::vector<RowResult> results;
  for (size_t k = 0; k < outs.size(); ++k)
    results.push_back({"output " + std::to_string(k), outs[k].defined() ? outs[k].data() : Tensor()});
  if (!row.no_gradient.empty()) return results;

  for (size_t k = 0; k < outs.size(); ++k)
    if (Node* node = outs[k].grad_fn())
      for (const auto& [field, tensor] : node->saved())
        results.push_back({"output " + std::to_string(k) + " saved '" + field + "'", tensor});
  Rng rng(11);
  Var loss;
  for (const Var& out : outs) {
    Tensor r = Tensor::randn(out.shape(), rng, 1.0, 0.0, DType::F64).to(dtype).to(device);
    Var term = sum_all(mul(out, Var(r)));
    loss = loss.defined() ? add(loss, term) : term;
  }
  loss.backward();
  for (size_t i = 0; i < vars.size(); ++i)
    if (vars[i].requires_grad()) results.push_back({"gradient of input " + std::to_string(i), vars[i].grad()});
  return results;
}

// Why `row` is not an autograd row of the op it names ("" when it is): the
// op is in core/ops.h and made every output (run in float64 on the CPU).
inline std::string row_op_error(const OpRow& row) {
  if (!row.no_gradient.empty()) return "";
  const std::optional<OpKind> kind = op_kind_named(row.op);
  if (!kind) return "'" + row.op + "' is not an op of core/ops.h";
  const Vars outs = row.run(row_leaves(row, DType::F64, Device::Cpu));
  if (outs.empty()) return "no output";
  for (size_t k = 0; k < outs.size(); ++k) {
    const Node* node = outs[k].defined() ? outs[k].grad_fn() : nullptr;
    // an op's second output is made by second_output from the op's first
    if (node && node->kind == OpKind::SecondOutput && *kind != OpKind::SecondOutput) node = node->inputs[0].grad_fn();
    if (!node) return "output " + std::to_string(k) + " was made by no op";
    if (node->kind != *kind)
      return "output " + std::to_string(k) + " was made by '" + node->name() + "', not '" + row.op + "'";
  }
  return "";
}

// What differs between two runs of a row under `bound` ("" when nothing
// does); `device`: where every result of `got` must have been computed,
// except values an entry point returns to the host (float64).
inline std::string results_error(const std::vector<RowResult>& got, const std::vector<RowResult>& want,
                                 const Bound& bound, Device device) {
  if (got.size() != want.size()) return "a different number of results";
  for (size_t i = 0; i < got.size(); ++i) {
    const Tensor& g = got[i].value;
    if (g.defined() && g.dtype() != DType::F64 && g.device() != device)
      return got[i].name + " is not on " + device_name(device);
    if (g.defined() && want[i].value.defined() && g.dtype() != want[i].value.dtype())
      return got[i].name + " is " + g.describe() + ", not " + want[i].value.describe();
    if (const std::string error = close_error(g, want[i].value, bound); !error.empty())
      return got[i].name + " of " + std::to_string(got.size()) + ": " + error;
  }
  return "";
}

// What differs between the CPU's and cuda's runs of `row` ("" when nothing does).
inline std::string cuda_error(const OpRow& row) {
  try {
    return results_error(run_row(row, Device::Cuda), run_row(row, Device::Cpu), row.cuda, Device::Cuda);
  } catch (const std::exception& e) {
    return std::string("threw: ") + e.what();
  }
}

// Every row of `rows` on the CPU and on cuda: a failing row is reported and
// the table goes on; the list of failing rows is the result. Then every
// entry of LINA_KERNELS (core/op_list.h) must have run on cuda.
inline void check_table_on_cuda(const std::vector<OpRow>& rows) {
  const std::vector<std::pair<std::string, int64_t>> calls_before = dispatch::cuda_kernel_calls();
  std::vector<std::string> failing;
  for (const OpRow& row : rows)
    if (const std::string error = cuda_error(row); !error.empty()) {
      failing.push_back(row.name() + ": " + error);
      MESSAGE("FAILING ROW " << row.name() << ": " << error);
    }
  INFO(failing.size() << " of " << rows.size() << " rows fail");
  CHECK(failing.empty());

  const std::vector<std::pair<std::string, int64_t>> calls_after = dispatch::cuda_kernel_calls();
  std::string missing;
  for (size_t k = 0; k < calls_after.size(); ++k)
    if (calls_after[k].second == calls_before[k].second) missing += " " + calls_after[k].first;
  INFO("entries of LINA_KERNELS without a row:" << missing);
  CHECK(missing.empty());
}

}  // namespace lina::test
