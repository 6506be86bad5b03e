// Elementwise ops: known values, the unary functions against their formulas,
// broadcasting and errors (their gradient checks and CPU-against-cuda rows:
// tests/op_table.cpp).
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "dispatch/dispatch.h"
#include "tests/harness.h"

using namespace lina;
using namespace lina::test;

TEST_CASE("elementwise forward values") {
  Var x(Tensor::from_vector<double>({-1.0, 0.0, 2.0}, {3}));
  CHECK(value(sigmoid(x), 1) == doctest::Approx(0.5));
  CHECK(value(relu(x), 0) == 0.0);
  CHECK(value(elu(x), 0) == doctest::Approx(std::exp(-1.0) - 1.0));
  CHECK(value(silu(x), 2) == doctest::Approx(2.0 / (1.0 + std::exp(-2.0))));
  // GELU tanh form at 1: 0.5 (1 + tanh(√(2/π)·1.044715))
  Var one(Tensor::from_vector<double>({1.0}, {1}));
  CHECK(value(gelu(one), 0) == doctest::Approx(0.8411919906082768).epsilon(1e-12));
  // log σ stays finite where σ underflows
  Var big(Tensor::from_vector<double>({-800.0, 800.0}, {2}));
  CHECK(value(log_sigmoid(big), 0) == doctest::Approx(-800.0));
  CHECK(value(log_sigmoid(big), 1) == doctest::Approx(0.0));
}

// Every unary function of core/elementwise_math.h against its formula written
// out here with <cmath>, in float64: the maths both devices share
// (math::Fn) checked against something other than itself.
TEST_CASE("every unary function equals its formula, in float64") {
  const double p = 0.7;  // the scalar of add/mul/pow/elu
  auto sigma = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  struct Formula {
    UnaryFn fn;
    std::function<double(double)> f;
    bool positive_only;
  };
  const std::vector<Formula> formulas = {
      {UnaryFn::Neg, [](double x) { return -x; }, false},
      {UnaryFn::AddScalar, [&](double x) { return x + p; }, false},
      {UnaryFn::MulScalar, [&](double x) { return p * x; }, false},
      {UnaryFn::PowScalar, [&](double x) { return std::pow(x, p); }, true},
      {UnaryFn::Exp, [](double x) { return std::exp(x); }, false},
      {UnaryFn::Log, [](double x) { return std::log(x); }, true},
      {UnaryFn::Sqrt, [](double x) { return std::sqrt(x); }, true},
      {UnaryFn::Rsqrt, [](double x) { return 1.0 / std::sqrt(x); }, true},
      {UnaryFn::Tanh, [](double x) { return std::tanh(x); }, false},
      {UnaryFn::Sigmoid, sigma, false},
      {UnaryFn::LogSigmoid, [&](double x) { return std::log(sigma(x)); }, false},
      {UnaryFn::Silu, [&](double x) { return x * sigma(x); }, false},
      {UnaryFn::Gelu, [](double x) {  // the tanh form
         return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
       }, false},
      {UnaryFn::Elu, [&](double x) { return x > 0 ? x : p * (std::exp(x) - 1.0); }, false},
      {UnaryFn::Relu, [](double x) { return x > 0 ? x : 0.0; }, false},
  };
  REQUIRE(formulas.size() == size_t(UnaryFn::Count));
  const std::vector<double> all = {-6.0, -2.5, -1.0, -0.3, 0.0, 0.2, 1.0, 2.5, 6.0};
  const std::vector<double> positive = {0.01, 0.2, 0.5, 1.0, 2.5, 9.0};
  for (const Formula& formula : formulas) {
    const std::vector<double>& xs = formula.positive_only ? positive : all;
    const Tensor y = dispatch::unary(formula.fn, Tensor::from_vector<double>(xs, {int64_t(xs.size())}), p);
    std::vector<double> want;
    for (double x : xs) want.push_back(formula.f(x));
    check_each_close(std::string("unary ") + unary_fn_name(formula.fn), y.to_vector<double>(), want, 1e-12, 1e-15);
  }
}

TEST_CASE("broadcasting add: [2,1,3] + [4,1] -> [2,4,3]") {
  Var a(Tensor::from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 1, 3}));
  Var b(Tensor::from_vector<double>({10, 20, 30, 40}, {4, 1}));
  Var c = a + b;
  REQUIRE(c.shape() == Shape{2, 4, 3});
  CHECK(value(c, 0) == 11);   // a[0,0,0] + b[0]
  CHECK(value(c, 5) == 23);   // a[0,0,2] + b[1]
  CHECK(value(c, 23) == 46);  // a[1,0,2] + b[3]
}

TEST_CASE("elementwise errors name the op and both shapes") {
  Var a(Tensor::zeros({2, 3}, DType::F64));
  Var b(Tensor::zeros({4, 3}, DType::F64));
  CHECK_THROWS_WITH_AS(add(a, b), "add: shapes [2, 3] and [4, 3] do not broadcast", Error);
  Var c(Tensor::zeros({2, 3}, DType::F32));
  CHECK_THROWS_WITH_AS(mul(a, c), doctest::Contains("mul: dtype mismatch"), Error);
}
