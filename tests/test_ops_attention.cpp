// The fused causal attention op (autograd/ops/attention.cpp,
// backend_cpu/attention.cpp): forward and gradients equal to the composition
// permute / expand / matmul / softmax / matmul (attention_composed in
// models/attention.cpp) in float64 and float32, over grouped-query heads,
// cached keys (Tk > Tq) and more than one tile of 64 rows; bad shapes are
// one-line errors. Its gradient checks and CPU-against-cuda rows:
// tests/op_table.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "dispatch/dispatch.h"
#include "models/attention.h"
#include "tests/harness.h"

using namespace lina;
using namespace lina::test;

namespace {

struct Case {
  int64_t B, Tq, Tk, H, Hkv, d;
};

// Forward and every input gradient of the fused op and of the composition,
// for the same inputs and the same upstream gradient.
void check_fused_equals_composed(const Case& c, DType dtype, double tol) {
  INFO("B " << c.B << " Tq " << c.Tq << " Tk " << c.Tk << " H " << c.H << " Hkv " << c.Hkv
            << " d " << c.d << (dtype == DType::F32 ? " float32" : " float64"));
  Rng rng(42);
  Tensor q = Tensor::randn({c.B, c.Tq, c.H, c.d}, rng, 1.0, 0.0, dtype);
  Tensor k = Tensor::randn({c.B, c.Tk, c.Hkv, c.d}, rng, 1.0, 0.0, dtype);
  Tensor v = Tensor::randn({c.B, c.Tk, c.Hkv, c.d}, rng, 1.0, 0.0, dtype);
  Tensor r = Tensor::randn({c.B, c.Tq, c.H, c.d}, rng, 1.0, 0.0, dtype);  // upstream gradient
  const double scale = 1.0 / std::sqrt(double(c.d));
  auto run = [&](bool fused) {
    Var vq(q, true), vk(k, true), vv(v, true);
    Var o = fused ? causal_attention(vq, vk, vv, scale) : attention_composed(vq, vk, vv, scale);
    sum_all(mul(o, Var(r))).backward();
    return std::vector<Tensor>{o.data(), vq.grad(), vk.grad(), vv.grad()};
  };
  std::vector<Tensor> fused = run(true), composed = run(false);
  const char* names[] = {"out", "dq", "dk", "dv"};
  for (int i = 0; i < 4; ++i) {
    INFO(names[i]);
    CHECK(fused[i].shape() == composed[i].shape());
    CHECK(max_abs_diff(fused[i], composed[i]) < tol);
  }
}

}  // namespace

TEST_CASE("fused attention equals the composition of ops, forward and gradients") {
  const Case cases[] = {
      {2, 5, 5, 4, 2, 8},      // the model's grouping, one tile
      {1, 3, 7, 2, 2, 4},      // cached keys, one query head per KV head
      {1, 1, 9, 4, 1, 4},      // one new token over a cache (generation)
      {2, 70, 70, 4, 2, 32},   // two tiles of query rows and of keys
      {1, 130, 150, 2, 1, 8},  // three tiles, cached keys
  };
  for (const Case& c : cases) {
    check_fused_equals_composed(c, DType::F64, 1e-12);
    check_fused_equals_composed(c, DType::F32, 2e-5);
  }
}

// The forward keeps each row's log-sum-exp, lse_i = log Σ_{j seen} e^{scale · q_i·k_j},
// in place of the probabilities: P_ij = e^{scale · q_i·k_j − lse_i} sums to
// one over the keys row i sees, and the masked keys are not in lse.
TEST_CASE("fused attention: rows of probabilities sum to one, masked keys get zero") {
  Rng rng(3);
  Tensor q = Tensor::randn({1, 3, 2, 4}, rng), k = Tensor::randn({1, 5, 1, 4}, rng);
  Tensor lse;
  dispatch::attention_forward(q, k, k, 0.5, lse);
  REQUIRE(lse.shape() == Shape{1, 2, 3});
  auto score = [&](int64_t h, int64_t i, int64_t j) {  // 0.5 · q_i · k_j of head h
    double dot = 0;
    for (int64_t c = 0; c < 4; ++c) dot += double(q.at((i * 2 + h) * 4 + c)) * double(k.at(j * 4 + c));
    return 0.5 * dot;
  };
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 3; ++i) {
      const double row_lse = lse.at(h * 3 + i);
      double s = 0, all_keys = 0;
      for (int64_t j = 0; j < 5; ++j) {
        const double p = std::exp(score(h, i, j) - row_lse);
        if (j <= i + 2) s += p;  // query i sees keys j <= i + (5 − 3)
        all_keys += p;
      }
      CHECK(s == doctest::Approx(1.0).epsilon(1e-6));
      if (i < 2) CHECK(all_keys > 1.0 + 1e-6);  // the keys it does not see are not in lse
    }
}

TEST_CASE("fused attention: bad shapes are one-line errors") {
  Rng rng(4);
  Tensor lse;
  Tensor q = Tensor::randn({1, 4, 3, 8}, rng), k = Tensor::randn({1, 4, 2, 8}, rng);
  CHECK_THROWS_WITH_AS(dispatch::attention_forward(q, k, k, 1.0, lse),
                       doctest::Contains("must be a multiple of KV heads"), Error);
  Tensor q2 = Tensor::randn({1, 6, 2, 8}, rng), k2 = Tensor::randn({1, 4, 2, 8}, rng);
  CHECK_THROWS_WITH_AS(dispatch::attention_forward(q2, k2, k2, 1.0, lse),
                       doctest::Contains("at least as many keys as queries"), Error);
  Tensor k3 = Tensor::randn({1, 6, 2, 4}, rng);
  CHECK_THROWS_WITH_AS(dispatch::attention_forward(q2, k3, k3, 1.0, lse),
                       doctest::Contains("disagree on batch or head size"), Error);
}
