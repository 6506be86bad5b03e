// Finite-difference gradient checks, in float64, and the registry that makes
// "which ops have a gradient check" visible.
//
// How to add a case: in the test file of the op's family, add a row
//   {OpKind::Foo, "foo [3, 5]", [] { check_gradients(fn, {inputs...}); }}
// to that file's table, with at least two shapes (one non-square or
// broadcasting). tests/test_gradcheck_coverage.cpp fails while any OpKind has
// no row.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "tests/harness.h"  // randn64, rand64, max_abs_diff

namespace lina::test {

// The one place the finite-difference settings live (docs/recurrence.md §5.2).
struct GradcheckSettings {
  double eps = 1e-6;        // central-difference step
  double tolerance = 1e-6;  // pass mark for |numeric − analytic| / max(1, |analytic|)
  int64_t exhaustive_up_to = 64;  // tensors this small: every element; larger: random directions
  int directions = 4;             // random directions per larger tensor
};
inline const GradcheckSettings kGradcheck{};

using Fn = std::function<Var(const std::vector<Var>&)>;

// Builds L = Σ f(inputs) ⊙ R for a fixed random R, runs backward, and
// compares every input's gradient with central differences. `differentiable`
// (default: every float input) marks which inputs to check. The result is
// the worst |numeric − analytic| / max(1, |analytic|) over every direction
// checked (+∞ for a NaN or an input that received no gradient) and where.
struct GradcheckResult {
  double worst = 0;
  std::string where;
};
GradcheckResult gradient_error(const Fn& f, const std::vector<Tensor>& inputs,
                               std::vector<bool> differentiable = {},
                               const GradcheckSettings& settings = kGradcheck);
// gradient_error, failing the current doctest test above the tolerance.
void check_gradients(const Fn& f, const std::vector<Tensor>& inputs,
                     std::vector<bool> differentiable = {},
                     const GradcheckSettings& settings = kGradcheck);


struct GradcheckRow {
  OpKind op;
  std::string what;
  std::function<void()> run;
};
int register_gradchecks(const std::vector<GradcheckRow>& rows);
const std::vector<GradcheckRow>& gradcheck_registry();
void run_gradchecks(const std::vector<GradcheckRow>& rows);
// The names of the ops (core/ops.h) that no row of `rows` checks.
std::vector<std::string> ops_without_gradcheck(const std::vector<GradcheckRow>& rows);


}  // namespace lina::test
