// The vectorised float32 unary functions (backend_cpu/unary_fast.h) against
// their reference, the scalar maths of core/elementwise_math.h evaluated in
// double: every element within a few float32 roundings, on sizes that cut
// blocks and SIMD registers unevenly, and on values far into the tails.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend_cpu/unary_fast.h"
#include "core/rng.h"
#include "core/tensor.h"

using namespace lina;

namespace {

// Inputs: random in [−8, 8], then the edges (0, ±tiny, tails where σ and
// tanh saturate, where exp is about to overflow).
std::vector<float> inputs(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> x = Tensor::rand({n}, rng, -8.0, 8.0, DType::F32).to_vector<float>();
  const float edges[] = {0.0f, 1e-30f, -1e-30f, 20.0f, -20.0f, 40.0f, -40.0f, 80.0f, -80.0f};
  for (size_t i = 0; i < std::min(x.size(), std::size(edges)); ++i) x[i] = edges[i];
  return x;
}

// |got − want| ≤ 1e-5 · max(1, |want|), with |dy| ≤ 1. Measured worst cases:
// GELU's derivative where tanh nears −1 (x ≈ −5), 3.5e-6 absolute (the
// scalar float32 code: 5.6e-7); SiLU's derivative σ(x)(1 + x(1 − σ(x)))
// cancels near its zero (x ≈ −1.28), 4e-6 absolute, as in scalar float32.
// Eigen's σ keeps ~1e-7 absolute error in the far negative tail, where its
// relative error grows (7e-4 at x = −9): σ feeds β, never a log.
void check_near(const std::vector<float>& got, const std::vector<double>& want, const std::string& what) {
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double err = std::fabs(double(got[i]) - want[i]) / std::max(1.0, std::fabs(want[i]));
    if (!(err <= worst)) {
      worst = std::isnan(err) ? INFINITY : err;
      at = i;
    }
  }
  INFO(what, ": worst relative error ", worst, " at element ", at);
  CHECK(worst <= 1e-5);
}

template <class Fn>
void compare(UnaryFn f, const std::string& name, bool uses_y_in_backward, float p = 0.0f) {
  for (int64_t n : {int64_t(1), int64_t(7), int64_t(16), int64_t(1000), int64_t(2 * 16384 + 37)}) {
    const std::vector<float> x = inputs(n, uint64_t(n));
    std::vector<float> dy = inputs(n, uint64_t(n) + 1);
    for (float& g : dy) g /= 8.0f;  // |dy| ≤ 1 (the edges kept as tails of x only)
    std::vector<float> y(static_cast<size_t>(n), NAN), dx(static_cast<size_t>(n), NAN);
    REQUIRE(cpu::unary_forward_fast(f, x.data(), y.data(), n, p));
    std::vector<double> y_ref(static_cast<size_t>(n)), dx_ref(static_cast<size_t>(n));
    for (size_t i = 0; i < size_t(n); ++i) {
      y_ref[i] = Fn::forward(double(x[i]), double(p));
      // the backward gets the forward's y, as in training; the reference
      // derivative uses the exact y
      dx_ref[i] = Fn::backward(double(x[i]), y_ref[i], double(dy[i]), double(p));
    }
    check_near(y, y_ref, name + " forward, n = " + std::to_string(n));
    REQUIRE(cpu::unary_backward_fast(f, x.data(), y.data(), dy.data(), dx.data(), n, p));
    if (uses_y_in_backward)  // y = f(x) already carries a float32 rounding
      for (size_t i = 0; i < size_t(n); ++i) dx_ref[i] = Fn::backward(double(x[i]), double(y[i]), double(dy[i]), double(p));
    check_near(dx, dx_ref, name + " backward, n = " + std::to_string(n));
  }
}

}  // namespace

TEST_CASE("vectorised unary functions match the scalar reference") {
  compare<math::Gelu>(UnaryFn::Gelu, "gelu", false);
  compare<math::Silu>(UnaryFn::Silu, "silu", false);
  compare<math::Sigmoid>(UnaryFn::Sigmoid, "sigmoid", true);
  compare<math::Exp>(UnaryFn::Exp, "exp", true);
  compare<math::Tanh>(UnaryFn::Tanh, "tanh", true);
  compare<math::LogSigmoid>(UnaryFn::LogSigmoid, "log_sigmoid", false);
  compare<math::Elu>(UnaryFn::Elu, "elu", true, 1.0f);
  compare<math::Elu>(UnaryFn::Elu, "elu, alpha 0.5", true, 0.5f);
  compare<math::Relu>(UnaryFn::Relu, "relu", false);
}

TEST_CASE("functions without a vectorised version fall back to the scalar loop") {
  float x = 1.0f, y = 0.0f;
  CHECK_FALSE(cpu::unary_forward_fast(UnaryFn::Log, &x, &y, 1));
  CHECK_FALSE(cpu::unary_backward_fast(UnaryFn::Log, &x, &y, &x, &y, 1));
}
