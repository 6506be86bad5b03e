// The comparisons every test goes through (tests/harness.h), shown to fail
// where they must: a NaN or an infinity on either side, anywhere in the
// vectors, is never close. max_abs_diff has some 60 callers that compare its
// result with `<=`; were it to return a NaN (as std::max(m, NaN) would keep m,
// and NaN <= tol is false but m <= tol is true), a NaN would pass all of them.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tests/harness.h"

using namespace lina;
using namespace lina::test;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Every vector of `good` with one element replaced by `bad`, at each position.
std::vector<std::vector<double>> planted(const std::vector<double>& good, double bad) {
  std::vector<std::vector<double>> out;
  for (size_t i = 0; i < good.size(); ++i) {
    out.push_back(good);
    out.back()[i] = bad;
  }
  return out;
}

// What max_abs_diff must not be: std::max(m, NaN) returns m, so a NaN vanishes.
double nan_blind_max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

}  // namespace

TEST_CASE("harness: the planted NaNs below pass a NaN-blind max_abs_diff (what the checks must catch)") {
  const std::vector<double> a{1.0, -2.0, 3.0};
  for (const std::vector<double>& p : planted(a, kNaN)) CHECK(nan_blind_max_abs_diff(p, a) <= 1e-12);
}

TEST_CASE("harness: max_abs_diff is +inf for a NaN or an infinity at any position, on either side") {
  const std::vector<double> a{1.0, -2.0, 3.0}, b{1.0, -2.0, 3.5};
  CHECK(max_abs_diff(a, a) == 0.0);
  CHECK(max_abs_diff(a, b) == 0.5);
  for (double bad : {kNaN, -kNaN, kInf, -kInf})
    for (const std::vector<double>& p : planted(a, bad)) {
      INFO("planted " << bad);
      CHECK(max_abs_diff(p, a) == kInf);
      CHECK(max_abs_diff(a, p) == kInf);
      CHECK(max_abs_diff(p, p) == kInf);  // NaN against NaN, inf against inf: not equal numbers
      CHECK_FALSE(max_abs_diff(p, a) <= 1e300);
    }
  // float32 against float64, and tensors of either dtype
  CHECK(max_abs_diff(std::vector<float>{1.0f, NAN}, std::vector<double>{1.0, 1.0}) == kInf);
  const Tensor t = f64({1.0, 2.0, 3.0}, {3});
  CHECK(max_abs_diff(t, t) == 0.0);
  CHECK(max_abs_diff(f64({1.0, kNaN, 3.0}, {3}), t) == kInf);
  CHECK(max_abs_diff(t, f64({1.0, 2.0, kNaN}, {3}).to(DType::F32)) == kInf);
}

TEST_CASE("harness: close_error fails a NaN or an infinity at any position, on either side") {
  const std::vector<double> a{1.0, -2.0, 3.0};
  CHECK(close_error(a, a, Bound{}).empty());
  for (double bad : {kNaN, kInf, -kInf})
    for (const std::vector<double>& p : planted(a, bad)) {
      INFO("planted " << bad);
      CHECK_FALSE(close_error(p, a, Bound{}).empty());
      CHECK_FALSE(close_error(a, p, Bound{}).empty());
      CHECK_FALSE(close_error(p, a, Bound{INFINITY, 1.0, 1e300, 1e300}).empty());  // each element's bound
    }
}
