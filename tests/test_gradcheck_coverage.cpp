// Every op in core/ops.h must have at least one gradient check registered
// (tests/gradcheck.h explains how to add one); and the two checks are shown
// to fail: on a registry with a row taken out, and on a planted wrong
// backward.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "tests/gradcheck.h"

using namespace lina;

TEST_CASE("every op has a float64 gradient check") {
  const std::vector<std::string> missing = test::ops_without_gradcheck(test::gradcheck_registry());
  for (const std::string& op : missing) MESSAGE("op '" << op << "' has no gradient check row");
  CHECK(missing.empty());
  MESSAGE("gradient-check rows: " << test::gradcheck_registry().size() << " over "
                                  << int(OpKind::Count) << " ops");
}

TEST_CASE("the coverage check names an op whose rows are taken out") {
  std::vector<test::GradcheckRow> rows = test::gradcheck_registry();
  REQUIRE(test::ops_without_gradcheck(rows).empty());
  rows.erase(std::remove_if(rows.begin(), rows.end(),
                            [](const test::GradcheckRow& r) { return r.op == OpKind::Softmax; }),
             rows.end());
  CHECK(test::ops_without_gradcheck(rows) == std::vector<std::string>{op_name(OpKind::Softmax)});
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
  auto nan = [](const std::vector<Var>& v) { return mul(v[0], Var(Tensor::full(v[0].shape(), NAN, DType::f64))); };
  CHECK(std::isinf(test::gradient_error(nan, {x}).worst));
}
