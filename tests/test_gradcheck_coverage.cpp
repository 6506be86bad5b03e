// Every op in core/ops.h must have at least one gradient-checked row in the
// op table (tests/op_table.cpp; the scan's checks register from
// tests/test_scan.cpp); and the checks are shown to fail: on the table with
// an op's rows taken out, on a planted wrong backward, on a NaN.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "tests/gradcheck.h"
#include "tests/op_table.h"

using namespace lina;

TEST_CASE("every op has a float64 gradient check") {
  const std::vector<OpKind> checked = test::gradient_checked_ops(test::op_table());
  const std::vector<std::string> missing = test::ops_without_gradcheck(checked);
  for (const std::string& op : missing) MESSAGE("op '" << op << "' has no gradient-checked row");
  CHECK(missing.empty());
  MESSAGE("gradient-checked rows: " << checked.size() << " over " << int(OpKind::Count) << " ops");
}

TEST_CASE("the coverage check names an op whose rows are taken out") {
  std::vector<test::OpRow> rows = test::op_table();
  REQUIRE(test::ops_without_gradcheck(test::gradient_checked_ops(rows)).empty());
  rows.erase(std::remove_if(rows.begin(), rows.end(), [](const test::OpRow& r) { return r.op == "softmax"; }),
             rows.end());
  CHECK(test::ops_without_gradcheck(test::gradient_checked_ops(rows)) ==
        std::vector<std::string>{op_name(OpKind::Softmax)});
}

// f(x) = x ⊙ x with the second factor cut from the graph: its backward
// misses half of the true gradient 2x, as a backward that forgets a term.
TEST_CASE("check_gradients fails on a planted wrong backward, and on a NaN") {
  const Tensor x = test::randn64({3, 4});
  auto right = [](const std::vector<Var>& v) { return mul(v[0], v[0]); };
  auto wrong = [](const std::vector<Var>& v) { return mul(v[0], Var(v[0].data().clone())); };
  CHECK(test::gradient_error(right, {x}).worst <= test::kGradcheck.tolerance);
  const test::GradcheckResult bad = test::gradient_error(wrong, {x});
  CHECK(bad.worst > 0.1);
  CHECK(bad.where.find("input 0") != std::string::npos);
  auto nan = [](const std::vector<Var>& v) { return mul(v[0], Var(Tensor::full(v[0].shape(), NAN, DType::F64))); };
  CHECK(std::isinf(test::gradient_error(nan, {x}).worst));
}

// The same through a row of the table: a row whose backward is 0.1 % off
// (y = x + 0.001·x with the second term cut from the graph) fails its check.
TEST_CASE("a table row whose backward is 0.1 % off fails the gradient check") {
  test::OpRow row{"add", "x + 0.001 x, the second term cut from the graph [3, 4]", {test::in::normal({3, 4})},
                  [](const test::Vars& v) { return test::Vars{add(v[0], mul_scalar(Var(v[0].data().clone()), 0.001))}; }};
  const test::GradcheckResult bad = test::row_gradient_error(row);
  CHECK(bad.worst > 1e-4);
  CHECK(bad.worst > test::kGradcheck.tolerance);
  row.run = [](const test::Vars& v) { return test::Vars{add(v[0], mul_scalar(v[0], 0.001))}; };
  CHECK(test::row_gradient_error(row).worst <= test::kGradcheck.tolerance);
}
