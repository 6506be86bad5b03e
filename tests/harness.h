// What every test file shares: one random generator for test inputs, the
// small makers of test tensors (ids, f64, leaf), and one way to say "these
// numbers are close". Header only: lina_cuda_tests, built from
// tests/test_cuda_backend.cpp alone, uses it too.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "autograd/var.h"
#include "core/rng.h"
#include "core/tensor.h"

namespace lina::test {

// ---- test inputs ------------------------------------------------------------------------

// The one generator of random test inputs (fixed seed: every run draws the
// same numbers in the same order).
inline Rng& test_rng() {
  static Rng rng(20261130);
  return rng;
}
// Random float64 tensors from it.
inline Tensor randn64(const Shape& shape, double std = 1.0) {
  return Tensor::randn(shape, test_rng(), std, 0.0, DType::F64);
}
inline Tensor rand64(const Shape& shape, double lo, double hi) {
  return Tensor::rand(shape, test_rng(), lo, hi, DType::F64);
}
// n uniform values in [lo, hi) as T, from `rng`.
template <class T> std::vector<T> random_vector(int64_t n, Rng& rng, double lo, double hi) {
  std::vector<double> x = Tensor::rand({n}, rng, lo, hi, DType::F64).to_vector<double>();
  return std::vector<T>(x.begin(), x.end());
}
// Token ids [B, T] in [0, vocab), int32 on the CPU, from a generator of `seed`.
inline Tensor random_ids(int64_t B, int64_t T, int vocab, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> v(size_t(B * T));
  for (auto& x : v) x = int32_t(rng.randint(vocab));
  return Tensor::from_vector(v, {B, T});
}

// Given values: int32 ids, a float64 tensor, a float64 leaf Var.
inline Tensor ids(const std::vector<int32_t>& values, const Shape& shape) {
  return Tensor::from_vector<int32_t>(values, shape);
}
inline Tensor f64(const std::vector<double>& values, const Shape& shape) {
  return Tensor::from_vector<double>(values, shape);
}
inline Var leaf(const std::vector<double>& values, const Shape& shape, bool requires_grad = false) {
  return Var(f64(values, shape), requires_grad);
}
// Element i of a Var's data (flat index), as a double.
inline double value(const Var& v, int64_t i) { return v.data().at(i); }

// ---- closeness --------------------------------------------------------------------------

// max |a − b| over all elements, and +∞ where either side holds a NaN or an
// infinity: a comparison that meets one fails.
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
// The same for tensors of any float dtype on any device.
inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  return max_abs_diff(a.to(Device::Cpu).to(DType::F64).to_vector<double>(),
                      b.to(Device::Cpu).to(DType::F64).to_vector<double>());
}

// How close `got` must be to `want`:
//   the tensor:   max|got − want| ≤ tolerance · max(floor, max|want|)
//                 (relative to the size of the reference; floor keeps it
//                 absolute for a reference near zero)
//   each element (when each_rel > 0), for outputs whose small entries matter:
//                 |got − want| ≤ each_rel·|want| + each_floor·max|want|
// A NaN or an infinity on either side is never close.
struct Bound {
  double tolerance = 1e-4, floor = 1.0;
  double each_rel = 0, each_floor = 0;
};

namespace detail {
inline std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}
}  // namespace detail

// What is wrong with `got` against `want` under `bound`, or "" when close.
template <class A, class B>
std::string close_error(const std::vector<A>& got, const std::vector<B>& want, const Bound& bound) {
  if (got.size() != want.size())
    return std::to_string(got.size()) + " values against " + std::to_string(want.size());
  double largest = 0, size = bound.floor;
  for (const B& w : want)
    if (std::isfinite(double(w))) {
      largest = std::max(largest, std::fabs(double(w)));
      size = std::max(size, std::fabs(double(w)));
    }
  if (bound.each_rel > 0)
    for (size_t i = 0; i < got.size(); ++i) {
      const double g = double(got[i]), w = double(want[i]);
      if (!(std::isfinite(g) && std::isfinite(w) &&
            std::fabs(g - w) <= bound.each_rel * std::fabs(w) + bound.each_floor * largest))
        return "element " + std::to_string(i) + ": got " + detail::sci(g) + ", want " + detail::sci(w) +
               " (each within " + detail::sci(bound.each_rel) + "·|want| + " + detail::sci(bound.each_floor) +
               "·max|want|, max|want| = " + detail::sci(largest) + ")";
    }
  double err = 0;  // max|got − want|, +∞ for a NaN or an infinity on either side
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = double(got[i]), w = double(want[i]);
    const double d = std::isfinite(g) && std::isfinite(w) ? std::fabs(g - w) : INFINITY;
    if (d > err) err = d, at = i;
  }
  if (err <= bound.tolerance * size) return "";
  return "max|got − want| = " + detail::sci(err) + " at element " + std::to_string(at) +
         (std::isinf(err) ? " (a NaN or an infinity)" : "") + ", max|want| = " + detail::sci(largest) +
         " (within " + detail::sci(bound.tolerance) + "·max(" + detail::sci(bound.floor) + ", max|want|))";
}
// The same for tensors on any device: both undefined are close; shapes must
// agree; float tensors (float32 against float64 too) are compared in
// double; int32 values must be equal.
inline std::string close_error(const Tensor& got, const Tensor& want, const Bound& bound) {
  if (got.defined() != want.defined()) return "defined on one side only";
  if (!want.defined()) return "";
  const std::string sides = " (got " + got.describe() + ", want " + want.describe() + ")";
  if (got.shape() != want.shape()) return "shapes differ" + sides;
  if (is_float(got.dtype()) != is_float(want.dtype())) return "a float against an integer tensor" + sides;
  if (!is_float(want.dtype()))
    return got.to(Device::Cpu).to_vector<int32_t>() == want.to(Device::Cpu).to_vector<int32_t>()
               ? ""
               : "int32 values differ" + sides;
  return close_error(got.to(Device::Cpu).to(DType::F64).to_vector<double>(),
                     want.to(Device::Cpu).to(DType::F64).to_vector<double>(), bound);
}

// Fails the current test, naming `what` and the error, unless close; true when close.
template <class G, class W>
bool check_close(const std::string& what, const G& got, const W& want, const Bound& bound) {
  const std::string error = close_error(got, want, bound);
  CHECK_MESSAGE(error.empty(), what << ": " << error);
  return error.empty();
}

// The tensor's bound alone: max|got − want| ≤ tolerance · max(floor, max|want|).
inline bool check_close(const std::string& what, const Tensor& got, const Tensor& want, double tolerance,
                        double floor = 1.0) {
  return check_close(what, got, want, Bound{tolerance, floor});
}
template <class A, class B>
bool check_close(const std::string& what, const std::vector<A>& got, const std::vector<B>& want,
                 double tolerance, double floor = 1.0) {
  return check_close(what, got, want, Bound{tolerance, floor});
}

// Every element's bound alone: |got − want| ≤ rel·|want| + floor·max|want|.
template <class A, class B>
bool check_each_close(const std::string& what, const std::vector<A>& got, const std::vector<B>& want,
                      double rel, double floor) {
  return check_close(what, got, want, Bound{INFINITY, 1.0, rel, floor});
}
inline bool check_each_close(const std::string& what, const Tensor& got, const Tensor& want, double rel,
                             double floor) {
  return check_close(what, got, want, Bound{INFINITY, 1.0, rel, floor});
}

}  // namespace lina::test
