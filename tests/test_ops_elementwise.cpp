// Elementwise ops: gradient checks (broadcasting included) and known values.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "dispatch/kernels.h"
#include "tests/gradcheck.h"

using namespace lina;
using namespace lina::test;

namespace {

// A unary op checked on two shapes, away from kinks (x in [lo, hi]).
GradcheckRow unary_row(OpKind op, Var (*f)(const Var&), double lo, double hi) {
  return {op, "two shapes in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]", [=] {
            check_gradients([f](auto& v) { return f(v[0]); }, {rand64({3, 5}, lo, hi)});
            check_gradients([f](auto& v) { return f(v[0]); }, {rand64({2, 3, 4}, lo, hi)});
          }};
}

// Values of |x| bounded away from 0, for ops with a kink at 0.
Tensor away_from_zero(const Shape& shape) {
  Tensor t = rand64(shape, 0.2, 2.0);
  double* p = t.data<double>();
  for (int64_t i = 0; i < t.numel(); i += 2) p[i] = -p[i];
  return t;
}

GradcheckRow binary_row(OpKind op, Var (*f)(const Var&, const Var&), double lo) {
  return {op, "same shape, broadcast over leading dims, and both-sided broadcast", [=] {
            auto g = [f](auto& v) { return f(v[0], v[1]); };
            check_gradients(g, {rand64({3, 4}, lo, 2.0), rand64({3, 4}, lo, 2.0)});
            check_gradients(g, {rand64({2, 3, 4}, lo, 2.0), rand64({4}, lo, 2.0)});
            check_gradients(g, {rand64({2, 1, 4}, lo, 2.0), rand64({3, 1}, lo, 2.0)});
          }};
}

const std::vector<GradcheckRow> kRows = {
    binary_row(OpKind::Add, add, -2.0),
    binary_row(OpKind::Sub, sub, -2.0),
    binary_row(OpKind::Mul, mul, -2.0),
    binary_row(OpKind::Div, div, 0.5),
    unary_row(OpKind::Neg, neg, -2, 2),
    {OpKind::AddScalar, "x + 0.7 on two shapes", [] {
       check_gradients([](auto& v) { return add_scalar(v[0], 0.7); }, {randn64({4, 3})});
       check_gradients([](auto& v) { return add_scalar(v[0], -2.0); }, {randn64({2, 2, 5})});
     }},
    {OpKind::MulScalar, "-1.5 x on two shapes", [] {
       check_gradients([](auto& v) { return mul_scalar(v[0], -1.5); }, {randn64({4, 3})});
       check_gradients([](auto& v) { return mul_scalar(v[0], 0.25); }, {randn64({2, 2, 5})});
     }},
    {OpKind::PowScalar, "x^3 and x^-0.5 on positive x", [] {
       check_gradients([](auto& v) { return pow_scalar(v[0], 3.0); }, {rand64({4, 3}, 0.3, 2)});
       check_gradients([](auto& v) { return pow_scalar(v[0], -0.5); }, {rand64({2, 5}, 0.3, 2)});
     }},
    unary_row(OpKind::Exp, exp, -2, 2),
    unary_row(OpKind::Log, log, 0.2, 3),
    unary_row(OpKind::Sqrt, sqrt, 0.2, 3),
    unary_row(OpKind::Rsqrt, rsqrt, 0.2, 3),
    unary_row(OpKind::Tanh, tanh, -3, 3),
    unary_row(OpKind::Sigmoid, sigmoid, -5, 5),
    unary_row(OpKind::LogSigmoid, log_sigmoid, -8, 8),
    unary_row(OpKind::Silu, silu, -4, 4),
    unary_row(OpKind::Gelu, gelu, -4, 4),
    {OpKind::Elu, "elu away from the kink at 0", [] {
       check_gradients([](auto& v) { return elu(v[0]); }, {away_from_zero({3, 5})});
       check_gradients([](auto& v) { return elu(v[0], 0.5); }, {away_from_zero({2, 3, 4})});
     }},
    {OpKind::Relu, "relu away from the kink at 0", [] {
       check_gradients([](auto& v) { return relu(v[0]); }, {away_from_zero({3, 5})});
       check_gradients([](auto& v) { return relu(v[0]); }, {away_from_zero({2, 3, 4})});
     }},
    {OpKind::Dropout, "p 0.1 and p 0.5, the mask fixed by the key", [] {
       check_gradients([](auto& v) { return dropout(v[0], DropoutKey{0.1, 1337, 7, 5}); }, {randn64({6, 9})});
       check_gradients([](auto& v) { return dropout(v[0], DropoutKey{0.5, 1, 0, 0}); }, {randn64({2, 3, 4})});
     }},
};
const int kRegistered = register_gradchecks(kRows);

double value(const Var& v, int64_t i) { return v.data().at(i); }

}  // namespace

TEST_CASE("gradcheck: elementwise ops") { run_gradchecks(kRows); }

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
    const Tensor y = kernels::unary(formula.fn, Tensor::from_vector<double>(xs, {int64_t(xs.size())}), p);
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
  Var a(Tensor::zeros({2, 3}, DType::f64));
  Var b(Tensor::zeros({4, 3}, DType::f64));
  CHECK_THROWS_WITH_AS(add(a, b), "add: shapes [2, 3] and [4, 3] do not broadcast", Error);
  Var c(Tensor::zeros({2, 3}, DType::f32));
  CHECK_THROWS_WITH_AS(mul(a, c), doctest::Contains("mul: dtype mismatch"), Error);
}
