// Softmax, log-softmax, cross-entropy, embedding (and argmax): known values,
// masking and error messages (their gradient checks and CPU-against-cuda
// rows: tests/op_table.cpp).
#include <doctest/doctest.h>

#include <cmath>

#include "autograd/functions.h"
#include "dispatch/dispatch.h"
#include "dispatch/layout.h"
#include "tests/harness.h"

using namespace lina;
using namespace lina::test;

TEST_CASE("softmax forward values") {
  Var y = softmax(Var(f64({1, 2, 3}, {3})));
  CHECK(value(y, 0) == doctest::Approx(0.0900306).epsilon(1e-6));
  CHECK(value(y, 1) == doctest::Approx(0.2447285).epsilon(1e-6));
  CHECK(value(y, 2) == doctest::Approx(0.6652410).epsilon(1e-6));

  // log_softmax = log(softmax)
  Var x(randn64({3, 6}));
  CHECK(max_abs_diff(log_softmax(x).data(), log(softmax(x)).data()) < 1e-12);
}

TEST_CASE("causal softmax zeros the masked keys and rows sum to 1") {
  SUBCASE("square: the upper triangle is zero") {
    Var y = softmax(Var(randn64({2, 4, 4})), true);
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t i = 0; i < 4; ++i) {
        double row = 0;
        for (int64_t j = 0; j < 4; ++j) {
          double p = value(y, (b * 4 + i) * 4 + j);
          if (j > i) CHECK(p == 0.0);
          else CHECK(p > 0.0);
          row += p;
        }
        CHECK(row == doctest::Approx(1.0));
      }
    CHECK(value(y, 0) == 1.0);  // the first query sees only itself
  }
  SUBCASE("Tq < Tk: query i sees keys j <= i + (Tk - Tq)") {
    // Tq = 2, Tk = 4: row 0 sees keys 0..2, row 1 sees all four.
    Var y = softmax(Var(f64({0, 0, 0, 5, 0, 0, 0, 0}, {2, 4})), true);
    CHECK(value(y, 0) == doctest::Approx(1.0 / 3));
    CHECK(value(y, 2) == doctest::Approx(1.0 / 3));
    CHECK(value(y, 3) == 0.0);
    for (int64_t j = 4; j < 8; ++j) CHECK(value(y, j) == doctest::Approx(0.25));
  }
  SUBCASE("inf and NaN in masked places never reach the output") {
    double inf = INFINITY, nan = NAN;
    Var y = softmax(Var(f64({1, inf, nan, 2, 3, -inf, 0, 1, 2}, {3, 3})), true);
    for (int64_t i = 0; i < 9; ++i) CHECK(std::isfinite(value(y, i)));
    CHECK(value(y, 0) == 1.0);
    CHECK(value(y, 5) == 0.0);
  }
  SUBCASE("large tensor (parallel rows), float32") {
    Rng rng(3);
    Tensor x = Tensor::randn({4, 96, 128}, rng, 3.0);
    std::vector<float> y = dispatch::softmax_forward(x, true).to_vector<float>();
    for (int64_t r = 0; r < 4 * 96; ++r) {
      int64_t visible = r % 96 + (128 - 96) + 1;
      double s = 0;
      for (int64_t j = 0; j < 128; ++j) s += y[size_t(r * 128 + j)];
      CHECK(s == doctest::Approx(1.0).epsilon(1e-5));
      CHECK(y[size_t(r * 128 + visible - 1)] > 0.0f);
      if (visible < 128) CHECK(y[size_t(r * 128 + visible)] == 0.0f);
    }
  }
}

TEST_CASE("softmax of large-magnitude rows: float32 agrees with float64, no inf or NaN") {
  std::vector<double> row = {1000, -1000, 999, 0, 1000, -999.5};
  Tensor x64 = f64(row, {1, 6});
  Tensor x32 = x64.to(DType::F32);
  Var y64 = softmax(Var(x64)), y32 = softmax(Var(x32));
  Var l64 = log_softmax(Var(x64)), l32 = log_softmax(Var(x32));
  for (int64_t i = 0; i < 6; ++i) {
    CHECK(std::isfinite(value(y32, i)));
    CHECK(std::isfinite(value(l32, i)));
  }
  CHECK(max_abs_diff(y32.data(), y64.data()) < 1e-6);
  CHECK(max_abs_diff(l32.data(), l64.data()) < 1e-3);  // float32 ulp at 2000 is ~1e-4
  CHECK(value(y64, 0) == doctest::Approx(1.0 / (2 + std::exp(-1.0))));
  Tensor targets = ids({1}, {1});
  double ce32 = cross_entropy(Var(x32), targets).item();
  CHECK(std::isfinite(ce32));
  CHECK(ce32 == doctest::Approx(cross_entropy(Var(x64), targets).item()).epsilon(1e-5));
}

TEST_CASE("cross-entropy forward values") {
  SUBCASE("uniform logits give log V") {
    Var loss = cross_entropy(Var(Tensor::zeros({3, 7}, DType::F64)), ids({0, 6, 3}, {3}));
    CHECK(loss.shape() == Shape{});
    CHECK(loss.item() == doctest::Approx(std::log(7.0)));
  }
  SUBCASE("equals the mean of −log_softmax at the targets") {
    Tensor x = randn64({2, 3, 5});
    std::vector<int32_t> t = {4, 0, 2, 2, 1, 3};
    Var loss = cross_entropy(Var(x), ids(t, {2, 3}));
    Var lp = log_softmax(Var(x));
    double expected = 0;
    for (int64_t n = 0; n < 6; ++n) expected -= value(lp, n * 5 + t[size_t(n)]);
    CHECK(loss.item() == doctest::Approx(expected / 6).epsilon(1e-12));
  }
  SUBCASE("masked rows are ignored") {
    // row 1 is confidently wrong but masked out; rows 0 and 2 are uniform
    Tensor x = f64({0, 0, 0, 50, -50, 0, 0, 0, 0}, {3, 3});
    Tensor t = ids({1, 1, 2}, {3});
    Var loss = cross_entropy(Var(x), t, f64({1, 0, 1}, {3}));
    CHECK(loss.item() == doctest::Approx(std::log(3.0)));
    // every position masked: the loss is 0 (the count is clamped to 1)
    CHECK(cross_entropy(Var(x), t, f64({0, 0, 0}, {3})).item() == 0.0);
  }
  SUBCASE("gradient of mean cross-entropy: (softmax − onehot) / count") {
    Var x(Tensor::zeros({2, 4}, DType::F64), true);
    cross_entropy(x, ids({3, 0}, {2})).backward();
    CHECK(x.grad().at(0) == doctest::Approx(0.125));    // (0.25 − 0) / 2
    CHECK(x.grad().at(3) == doctest::Approx(-0.375));   // (0.25 − 1) / 2
    CHECK(x.grad().at(4) == doctest::Approx(-0.375));
  }
}

// The forward writes the loss's gradient for dloss = 1: a backward from
// the loss (the seed 1) hands it over, any other dloss scales it.
TEST_CASE_TEMPLATE("cross-entropy's gradient from its forward: the seed's, and a scaled dloss's", T, float,
                   double) {
  const DType dtype = dtype_of<T>();
  Rng rng(3);
  Tensor x = Tensor::randn({3, 4, 9}, rng, 1.0, 0.0, dtype);
  Tensor t = ids({0, 8, 3, 3, 1, 5, 7, 2, 0, 4, 6, 1}, {3, 4});
  Tensor mask = Tensor::from_vector<double>({1, 0, 1, 1, 0.5, 1, 1, 0, 1, 2, 1, 1}, {3, 4}).to(dtype);
  Var from_seed(x.clone(), true), scaled(x.clone(), true), by_hand(x.clone(), true);
  cross_entropy(from_seed, t, mask).backward();
  mul_scalar(cross_entropy(scaled, t, mask), 3.0).backward();  // dloss = 3
  Tensor three_g = dispatch::binary(BinaryFn::Mul, from_seed.grad(), Tensor::full({}, 3.0, dtype));
  CHECK(max_abs_diff(scaled.grad(), three_g) == 0.0);  // bit for bit
  // by hand: mask · (softmax − onehot) / Σ mask
  Tensor p = softmax(Var(x)).data().to(DType::F64);
  std::vector<double> expected = p.to_vector<double>(), m = mask.to(DType::F64).to_vector<double>();
  const std::vector<int32_t> target = t.to_vector<int32_t>();
  double count = 0;
  for (double w : m) count += w;
  for (int64_t r = 0; r < 12; ++r)
    for (int64_t j = 0; j < 9; ++j)
      expected[size_t(r * 9 + j)] = m[size_t(r)] * (expected[size_t(r * 9 + j)] - (j == target[size_t(r)])) / count;
  CHECK(max_abs_diff(from_seed.grad(), Tensor::from_vector(expected, {3, 4, 9}).to(dtype)) <
        (dtype == DType::F64 ? 1e-15 : 1e-7));
}

TEST_CASE("embedding picks rows, and its backward sums repeated ids") {
  Tensor w = f64({0, 1, 10, 11, 20, 21}, {3, 2});
  Var out = embedding(Var(w), ids({2, 0, 2, 1}, {2, 2}));
  CHECK(out.shape() == Shape{2, 2, 2});
  CHECK(out.data().to_vector<double>() == std::vector<double>{20, 21, 0, 1, 20, 21, 10, 11});

  // large enough for the column-parallel backward; compared with a serial sum
  const int64_t V = 11, C = 80, N = 600;
  std::vector<int32_t> id(N);
  for (int64_t n = 0; n < N; ++n) id[size_t(n)] = int32_t((n * 7) % V);
  Rng rng(5);
  Tensor dy = Tensor::randn({N, C}, rng, 1.0, 0.0, DType::F64);
  std::vector<double> expected(size_t(V * C), 0.0), d = dy.to_vector<double>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) expected[size_t(id[size_t(n)] * C + c)] += d[size_t(n * C + c)];
  Tensor dw = dispatch::embedding_backward(dy, ids(id, {N}), V);
  CHECK(dw.shape() == Shape{V, C});
  CHECK(max_abs_diff(dw, f64(expected, {V, C})) < 1e-12);

  // the adding form: a gradient already there gets the sum on top
  Tensor sum = Tensor::full({V, C}, 2.5, DType::F64);
  dispatch::embedding_backward_add(dy, ids(id, {N}), sum);
  for (double& e : expected) e += 2.5;
  CHECK(max_abs_diff(sum, f64(expected, {V, C})) < 1e-12);
  Tensor wrong = Tensor::zeros({V, C + 1}, DType::F64);
  CHECK_THROWS_WITH_AS(dispatch::embedding_backward_add(dy, ids(id, {N}), wrong),
                       doctest::Contains("is not [vocab, 80]"), Error);
}

TEST_CASE("add_sum_to adds a bias's row sum into a gradient, and declines other sums") {
  Rng rng(9);
  Tensor x = Tensor::randn({4, 3, 5}, rng, 1.0, 0.0, DType::F64);
  Tensor into = Tensor::full({5}, 1.0, DType::F64);
  REQUIRE(add_sum_to(x, into));
  Tensor expected = sum_to(x, {5});
  for (int64_t i = 0; i < 5; ++i) CHECK(into.at(i) == doctest::Approx(expected.at(i) + 1.0).epsilon(1e-14));
  Tensor column = Tensor::full({4, 1, 1}, 1.0, DType::F64);
  CHECK_FALSE(add_sum_to(x, column));  // not a sum over leading axes
  CHECK(column.at(0) == 1.0);          // untouched
}

TEST_CASE("argmax over the last axis, first index on ties") {
  Tensor x = f64({1, 3, 3, 0, -5, -1, -2, -1}, {2, 4});
  Tensor a = dispatch::argmax_last(x);
  CHECK(a.dtype() == DType::I32);
  CHECK(a.shape() == Shape{2});
  CHECK(a.to_vector<int32_t>() == std::vector<int32_t>{1, 1});
  Tensor b = dispatch::argmax_last(Tensor::from_vector<float>({0.5f, 2.0f, -1.0f}, {3}));
  CHECK(b.shape() == Shape{});
  CHECK(b.at(0) == 1.0);
}

TEST_CASE("softmax, cross-entropy and embedding errors") {
  Var logits(Tensor::zeros({2, 3, 65}, DType::F64));
  CHECK_THROWS_WITH_AS(cross_entropy(logits, ids({0, 1, 2, 3, 70, 5}, {2, 3})),
                       "cross_entropy: target 70 out of range for vocabulary 65", Error);
  CHECK_THROWS_WITH_AS(cross_entropy(logits, ids({0, -1, 2, 3, 4, 5}, {2, 3})),
                       doctest::Contains("target -1 out of range"), Error);
  CHECK_THROWS_WITH_AS(cross_entropy(logits, ids({0, 1, 2}, {3})),
                       doctest::Contains("targets [3] do not match logits [2, 3, 65]"), Error);
  CHECK_THROWS_WITH_AS(
      cross_entropy(logits, ids({0, 1, 2, 3, 4, 5}, {2, 3}), Tensor::ones({3, 2}, DType::F64)),
      doctest::Contains("mask [3, 2] does not match logits [2, 3, 65]"), Error);
  CHECK_THROWS_WITH_AS(
      cross_entropy(logits, ids({0, 1, 2, 3, 4, 5}, {2, 3}), Tensor::ones({2, 3}, DType::F32)),
      doctest::Contains("cross_entropy: dtype mismatch"), Error);

  Var w(Tensor::zeros({65, 4}, DType::F64));
  CHECK_THROWS_WITH_AS(embedding(w, ids({3, 70}, {2})),
                       "embedding: id 70 out of range for vocabulary 65", Error);
  CHECK_THROWS_WITH_AS(embedding(w, Tensor::zeros({2}, DType::F64)),
                       doctest::Contains("embedding: ids must be int32"), Error);

  CHECK_THROWS_WITH_AS(softmax(Var(Tensor::zeros({4, 3}, DType::F64)), true),
                       doctest::Contains("softmax: causal needs [..., Tq, Tk] with Tk >= Tq"),
                       Error);
  CHECK_THROWS_WITH_AS(softmax(Var(Tensor::zeros({3}, DType::F64)), true),
                       doctest::Contains("softmax: expected at least 2 dims"), Error);
}
