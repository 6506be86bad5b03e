// Dropout (docs/spec.md §1 "dropout", §4): the counter-based generator
// against Philox4x32-10's published answers, the masks' statistics and
// reproducibility, and attention's dropout inside the fused op against
// dropout on the composed weights, forward and backward.
#include <doctest/doctest.h>

#include <cmath>

#include <vector>

#include "autograd/functions.h"
#include "backend_cpu/dropout_mask.h"
#include "core/philox.h"
#include "dispatch/dispatch.h"
#include "models/attention.h"
#include "tests/harness.h"

using namespace lina;
using namespace lina::test;

TEST_CASE("Philox4x32-10 gives the known-answer vectors of its authors") {
  // Random123's kat_vectors for philox4x32 with 10 rounds.
  Philox4x32 zero = philox4x32_10({{0, 0, 0, 0}}, 0, 0);
  CHECK(zero.v[0] == 0x6627e8d5u);
  CHECK(zero.v[1] == 0xe169c58du);
  CHECK(zero.v[2] == 0xbc57ac4cu);
  CHECK(zero.v[3] == 0x9b00dbd8u);
  Philox4x32 ones = philox4x32_10({{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, 0xffffffffu, 0xffffffffu);
  CHECK(ones.v[0] == 0x408f276du);
  CHECK(ones.v[1] == 0x41c83b0eu);
  CHECK(ones.v[2] == 0xa20bc7c6u);
  CHECK(ones.v[3] == 0x6d5451fdu);
  Philox4x32 pi = philox4x32_10({{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, 0xa4093822u, 0x299f31d0u);
  CHECK(pi.v[0] == 0xd16cfe09u);
  CHECK(pi.v[1] == 0x94fdccebu);
  CHECK(pi.v[2] == 0x5001e420u);
  CHECK(pi.v[3] == 0x24126ea1u);
}

TEST_CASE("dropout_factors: the factors of dropout_factor for runs that start and end anywhere in a block") {
  DropoutKey key;
  key.p = 0.3;
  key.seed = 0x123456789abcdefull;  // both halves of the key used
  key.update = 77;
  key.site = 5;
  const int64_t far = (int64_t(1) << 36) + 1;  // a block number above 32 bits
  for (int64_t first : {int64_t(0), int64_t(1), int64_t(3), int64_t(62), int64_t(1000), far}) {
    for (int64_t n : {int64_t(0), int64_t(1), int64_t(5), int64_t(64), int64_t(67), int64_t(300)}) {
      std::vector<float> f(size_t(n), -1.0f);
      std::vector<double> d(size_t(n), -1.0);
      cpu::dropout_factors(key, first, n, f.data());
      cpu::dropout_factors(key, first, n, d.data());
      int mismatches = 0, dropped = 0;
      for (int64_t i = 0; i < n; ++i) {
        mismatches += f[size_t(i)] != dropout_factor<float>(key, first + i);
        mismatches += d[size_t(i)] != dropout_factor<double>(key, first + i);
        dropped += f[size_t(i)] == 0.0f;
      }
      INFO("first " << first << ", n " << n);
      CHECK(mismatches == 0);
      if (n == 300) CHECK((dropped > 50 && dropped < 130));  // about p·n = 90
    }
  }
  key.p = 0;  // no dropout: every factor 1
  std::vector<float> ones(7, -1.0f);
  cpu::dropout_factors(key, 3, 7, ones.data());
  for (float v : ones) CHECK(v == 1.0f);
}

TEST_CASE("dropout: drops about p, scales the rest by 1/(1-p), the same mask for the same key") {
  Tensor ones = Tensor::full({100000}, 1.0, DType::F32);
  const DropoutKey key{0.1, 1337, 42, 9};
  std::vector<float> y = dispatch::dropout(ones, key).to_vector<float>();
  int64_t dropped = 0;
  for (float v : y) {
    CHECK_MESSAGE((v == 0.0f || v == float(1.0 / 0.9)), "an element is neither 0 nor 1/(1-p)");
    dropped += v == 0.0f;
  }
  CHECK(dropped > 9500);   // 10,000 expected, σ ≈ 95
  CHECK(dropped < 10500);
  CHECK(dispatch::dropout(ones, key).to_vector<float>() == y);  // regenerated, not stored
  DropoutKey other_update = key, other_site = key, other_seed = key;
  other_update.update = 43;
  other_site.site = 10;
  other_seed.seed = 1338;
  for (const DropoutKey& k : {other_update, other_site, other_seed})
    CHECK(dispatch::dropout(ones, k).to_vector<float>() != y);
  // p = 0 is no dropout at all: the op returns its input
  Var x(Tensor::full({3}, 2.0, DType::F32));
  CHECK(dropout(x, DropoutKey{}).data().same_storage(x.data()));
  CHECK_THROWS_WITH_AS(dispatch::dropout(ones, DropoutKey{1.0, 0, 0, 0}), doctest::Contains("[0, 1)"), Error);
}

TEST_CASE("attention's dropout inside the fused op equals dropout on the composed weights") {
  Tensor q = randn64({2, 5, 4, 8}), k = randn64({2, 7, 2, 8}), v = randn64({2, 7, 2, 8});
  Tensor dout = randn64({2, 5, 4, 8});
  const DropoutKey key{0.3, 99, 5, 1};
  auto run = [&](bool fused) {
    Var vq(q, true), vk(k, true), vv(v, true);
    Var o = fused ? causal_attention(vq, vk, vv, 0.35, key) : attention_composed(vq, vk, vv, 0.35, key);
    sum_all(mul(o, Var(dout))).backward();  // the gradient reaching o is dout
    return std::vector<Tensor>{o.data(), vq.grad(), vk.grad(), vv.grad()};
  };
  std::vector<Tensor> fused = run(true), composed = run(false);
  for (size_t i = 0; i < fused.size(); ++i) {
    CAPTURE(i);
    CHECK(max_abs_diff(fused[i], composed[i]) < 1e-12);
  }
  // and it does drop: without dropout the output differs
  Tensor plain = causal_attention(Var(q), Var(k), Var(v), 0.35).data();
  CHECK(max_abs_diff(plain, fused[0]) > 1e-3);
}
