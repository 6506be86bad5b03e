// What every test file shares: one random generator for test inputs and one
// way to say "these numbers are close".
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"

namespace lina::test {

// The one generator of random test inputs (fixed seed: every run draws the
// same numbers in the same order).
Rng& test_rng();
// Random float64 tensors from it.
Tensor randn64(const Shape& shape, double std = 1.0);
Tensor rand64(const Shape& shape, double lo, double hi);
// n uniform values in [lo, hi) as T, from `rng`.
template <class T> std::vector<T> random_vector(int64_t n, Rng& rng, double lo, double hi) {
  std::vector<double> x = Tensor::rand({n}, rng, lo, hi, DType::f64).to_vector<double>();
  return std::vector<T>(x.begin(), x.end());
}
// Token ids [B, T] in [0, vocab), int32 on the CPU, from a generator of `seed`.
Tensor random_ids(int64_t B, int64_t T, int vocab, uint64_t seed);

// max |a − b| over all elements (any float dtype, any device), and +∞ where
// either side holds a NaN or an infinity: a comparison that meets one fails.
template <class A, class B>
double max_abs_diff(const std::vector<A>& a, const std::vector<B>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = double(a[i]), y = double(b[i]);
    if (!std::isfinite(x) || !std::isfinite(y)) return INFINITY;
    m = std::max(m, std::fabs(x - y));
  }
  return m;
}
double max_abs_diff(const Tensor& a, const Tensor& b);

// The one closeness check: max|got − want| ≤ tolerance · max(floor, max|want|),
// a bound relative to the size of the reference (floor keeps it absolute for
// a reference near zero). Fails the current test with `what`, the error
// and the size; both undefined tensors count as close.
void check_close(const std::string& what, const Tensor& got, const Tensor& want, double tolerance,
                 double floor = 1.0);
template <class A, class B>
void check_close(const std::string& what, const std::vector<A>& got, const std::vector<B>& want,
                 double tolerance, double floor = 1.0) {
  REQUIRE_MESSAGE(got.size() == want.size(), what);
  double size = floor;
  for (const B& w : want)
    if (std::isfinite(double(w))) size = std::max(size, std::fabs(double(w)));
  const double err = max_abs_diff(got, want);  // +∞ for a NaN or an infinity on either side
  CHECK_MESSAGE(err <= tolerance * size, what << ": max|got − want| = " << err
                                              << (std::isinf(err) ? " (a NaN or an infinity)" : "")
                                              << ", max|want| = " << size);
}

// The per-element check, for outputs whose small entries matter: at every
// element |got − want| ≤ rel·|want| + floor·max|want| (a NaN or an infinity
// fails). Fails the current test with `what` and the first element outside.
template <class A, class B>
void check_each_close(const std::string& what, const std::vector<A>& got, const std::vector<B>& want,
                      double rel, double floor) {
  REQUIRE_MESSAGE(got.size() == want.size(), what);
  double largest = 0;
  for (const B& w : want) largest = std::max(largest, std::fabs(double(w)));
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = double(got[i]), w = double(want[i]);
    const bool ok = std::isfinite(g) && std::isfinite(w) && std::fabs(g - w) <= rel * std::fabs(w) + floor * largest;
    if (!ok) {
      CHECK_MESSAGE(ok, what << ": element " << i << ": got " << g << ", want " << w << " (each within " << rel
                             << "·|want| + " << floor << "·max|want|, max|want| = " << largest << ")");
      return;
    }
  }
}
void check_each_close(const std::string& what, const Tensor& got, const Tensor& want, double rel, double floor);

}  // namespace lina::test
