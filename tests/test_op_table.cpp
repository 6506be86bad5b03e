// The op table (tests/op_table.cpp) run by its harness (tests/op_check.h):
// every row of an autograd op names the op that made its outputs, and its
// float64 gradients match central differences; every row agrees between the
// CPU and cuda where a CUDA device is present. And the comparison is shown
// to fail: on a 0.1 % error in one element, on a NaN, on a result off the
// device.
#include <doctest/doctest.h>

#include <cmath>
#include <set>
#include <string>

#include "dispatch/dispatch.h"
#include "tests/gradcheck.h"
#include "tests/op_check.h"

using namespace lina;
using namespace lina::test;

TEST_CASE("op table: every row has a name of its own, and a row of an autograd op runs that op") {
  std::set<std::string> names;
  for (const OpRow& row : op_table()) {
    INFO("row " << row.name());
    CHECK(names.insert(row.name()).second);
    CHECK(row_op_error(row) == "");
  }
}

TEST_CASE("op table: float64 gradients of every autograd op's row match central differences") {
  int checked = 0;
  std::set<std::string> without;
  for (const OpRow& row : op_table()) {
    if (!row.no_gradient.empty()) {
      without.insert(row.op);
      continue;
    }
    const GradcheckResult r = row_gradient_error(row);
    CHECK_MESSAGE(r.worst <= kGradcheck.tolerance,
                  "gradient check of " << row.name() << ": worst " << r.where << " (error " << r.worst << ")");
    ++checked;
  }
  std::string names;
  for (const std::string& op : without) names += " " + op;
  MESSAGE(checked << " rows gradient-checked; rows without an autograd op:" << names);
  CHECK(checked > 150);
}

TEST_CASE("op table: cuda agrees with the CPU on every row: outputs, saved tensors, input gradients") {
  if (!dispatch::cuda_available()) {
    const std::string why = std::string(dispatch::cuda_runtime()) == "none" ? "built without CUDA" : "no CUDA GPU here";
    MESSAGE("SKIPPED: " << why
                        << "; scripts/test.sh's cuda-sim stage runs the table on lina's CUDA runtime on the CPU");
    return;
  }
  check_table_on_cuda(op_table());
}

// The per-element bounds are what catch a wrong small value that the
// tensor's bound would pass: exp(−3) off beside exp(3). The default bound
// fails a 1 % error there, a function's bound a 0.1 % one.
TEST_CASE("op table: the cuda bounds fail a 1 % error (0.1 % for a function) in one element of exp, and a NaN") {
  Tensor x = Tensor::from_vector(std::vector<float>{-3, -1, 0, 1, 3}, {5});
  Tensor y = dispatch::unary(UnaryFn::Exp, x, 0);
  auto off_by = [&](float factor) {
    std::vector<float> v = y.to_vector<float>();
    v[0] *= factor;
    return Tensor::from_vector(v, {5});
  };
  CHECK(close_error(y, y, kCudaBound).empty());
  CHECK(close_error(off_by(1.01f), y, kCudaTensorBound).empty());  // 1e-4 · e³ is 4 % of e⁻³
  CHECK_FALSE(close_error(off_by(1.01f), y, kCudaBound).empty());
  CHECK_FALSE(close_error(off_by(0.99f), y, kCudaBound).empty());
  CHECK(close_error(off_by(1.0005f), y, kCudaBound).empty());
  CHECK(close_error(y, y, kCudaEachFunction).empty());
  CHECK_FALSE(close_error(off_by(1.001f), y, kCudaEachFunction).empty());
  CHECK_FALSE(close_error(Tensor::full({5}, NAN), y, kCudaEachFunction).empty());
  CHECK_FALSE(close_error(Tensor::full({5}, NAN), y, kCudaBound).empty());
  // int32 results must be equal
  CHECK_FALSE(close_error(ids({1, 2}, {2}), ids({1, 3}, {2}), kCudaBound).empty());
}

// A row's results against a planted wrong copy of themselves, run on the
// CPU: one element of an output, or of an input's gradient, 0.1 % off (1 %
// for softmax, whose elements are bounded at 0.1 %); a result that was not
// computed where it should have been.
TEST_CASE("op table: the comparison of two runs of a row fails on a planted error in any result") {
  const OpRow* exp_row = nullptr;
  const OpRow* softmax_row = nullptr;
  for (const OpRow& row : op_table()) {
    if (row.op == "exp" && !exp_row) exp_row = &row;
    if (row.op == "softmax" && !softmax_row) softmax_row = &row;
  }
  REQUIRE(exp_row);
  REQUIRE(softmax_row);
  for (const OpRow* row : {exp_row, softmax_row}) {
    INFO("row " << row->name());
    const float factor = row == exp_row ? 1.001f : 1.01f;
    const std::vector<RowResult> want = run_row(*row, Device::Cpu);
    CHECK(results_error(run_row(*row, Device::Cpu), want, row->cuda, Device::Cpu) == "");
    CHECK(want.front().name == "output 0");
    CHECK(want.back().name == "gradient of input 0");
    for (size_t i : {size_t(0), want.size() - 1}) {
      std::vector<RowResult> planted = run_row(*row, Device::Cpu);
      std::vector<float> values = planted[i].value.to_vector<float>();
      values[1] *= factor;
      planted[i].value = Tensor::from_vector(values, planted[i].value.shape());
      const std::string error = results_error(planted, want, row->cuda, Device::Cpu);
      CHECK(error.find(want[i].name) == 0);
      CHECK(error.find("element 1") != std::string::npos);
    }
    // on cuda every result must have been computed on the device
    CHECK(results_error(want, want, row->cuda, Device::Cuda).find("is not on cuda") != std::string::npos);
  }
}
