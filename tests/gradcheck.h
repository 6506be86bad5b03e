// Finite-difference gradient checks, in float64. The op table
// (tests/op_table.cpp) gives every op its rows; tests/test_op_table.cpp runs
// the check on each, and tests/test_gradcheck_coverage.cpp fails while any
// OpKind has no row.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "tests/harness.h"  // randn64, rand64, max_abs_diff
#include "tests/op_table.h"

namespace lina::test {

// The one place the finite-difference settings live (docs/recurrence.md §5.2).
struct GradcheckSettings {
  double eps = 1e-6;        // central-difference step
  // A loss of more terms than this (its outputs' elements, or an input's,
  // summed into fewer) rounds by enough that, divided by eps, it nears the
  // pass mark (a sum of 2^20 terms: 3e-5): it is stepped by long_step
  // instead, with the five-point difference (error O(long_step⁴)), so the
  // step's own error stays as small.
  int64_t long_step_above = 10000;
  double long_step = 1e-3;
  double tolerance = 1e-6;  // pass mark for |numeric − analytic| / max(1, |analytic|)
  int64_t exhaustive_up_to = 64;  // tensors this small: every element; larger: random directions
  int directions = 4;             // random directions per larger tensor
};
inline const GradcheckSettings kGradcheck{};

using Fn = std::function<Var(const std::vector<Var>&)>;
using FnOutputs = std::function<std::vector<Var>(const std::vector<Var>&)>;

// Builds L = Σ_k Σ f_k(inputs) ⊙ R_k for fixed random R_k (one per output;
// an undefined output counts for nothing), runs backward, and compares every
// input's gradient with central differences. `differentiable` (default:
// every float input) marks which inputs to check. The result is the worst
// |numeric − analytic| / max(1, |analytic|) over every direction checked
// (+∞ for a NaN or an input that received no gradient) and where.
struct GradcheckResult {
  double worst = 0;
  std::string where;
};
GradcheckResult gradient_error(const FnOutputs& f, const std::vector<Tensor>& inputs,
                               std::vector<bool> differentiable = {},
                               const GradcheckSettings& settings = kGradcheck);
// The same for a function of one output.
GradcheckResult gradient_error(const Fn& f, const std::vector<Tensor>& inputs,
                               std::vector<bool> differentiable = {},
                               const GradcheckSettings& settings = kGradcheck);
// gradient_error, failing the current doctest test above the tolerance.
void check_gradients(const Fn& f, const std::vector<Tensor>& inputs,
                     std::vector<bool> differentiable = {},
                     const GradcheckSettings& settings = kGradcheck);

// Gradient checks written outside the op table (the scan's, in
// tests/test_scan.cpp) register here, so the coverage check counts them.
struct GradcheckRow {
  OpKind op;
  std::string what;
  std::function<void()> run;
};
int register_gradchecks(const std::vector<GradcheckRow>& rows);
const std::vector<GradcheckRow>& gradcheck_registry();
void run_gradchecks(const std::vector<GradcheckRow>& rows);

// The gradient check of one row of the op table: its inputs in float64 on
// the CPU, its differentiable ones perturbed, every output in the loss.
GradcheckResult row_gradient_error(const OpRow& row, const GradcheckSettings& settings = kGradcheck);

// The ops whose gradients are checked: those of the rows of autograd ops in
// `rows`, and those registered above.
std::vector<OpKind> gradient_checked_ops(const std::vector<OpRow>& rows);
// The names of the ops (core/ops.h) that are not in `checked`.
std::vector<std::string> ops_without_gradcheck(const std::vector<OpKind>& checked);

}  // namespace lina::test
