#include "tests/harness.h"

namespace lina::test {

Rng& test_rng() {
  static Rng rng(20261130);
  return rng;
}

Tensor randn64(const Shape& shape, double std) {
  return Tensor::randn(shape, test_rng(), std, 0.0, DType::f64);
}
Tensor rand64(const Shape& shape, double lo, double hi) {
  return Tensor::rand(shape, test_rng(), lo, hi, DType::f64);
}

Tensor random_ids(int64_t B, int64_t T, int vocab, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> v(size_t(B * T));
  for (auto& x : v) x = int32_t(rng.randint(vocab));
  return Tensor::from_vector(v, {B, T});
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  return max_abs_diff(a.to(DType::f64).to_vector<double>(), b.to(DType::f64).to_vector<double>());
}

void check_close(const std::string& what, const Tensor& got, const Tensor& want, double tolerance,
                 double floor) {
  REQUIRE_MESSAGE(got.defined() == want.defined(), what);
  if (!want.defined()) return;
  REQUIRE_MESSAGE(got.shape() == want.shape(), what);
  check_close(what, got.to(DType::f64).to_vector<double>(), want.to(DType::f64).to_vector<double>(),
              tolerance, floor);
}

void check_each_close(const std::string& what, const Tensor& got, const Tensor& want, double rel, double floor) {
  REQUIRE_MESSAGE(got.defined() == want.defined(), what);
  if (!want.defined()) return;
  REQUIRE_MESSAGE(got.shape() == want.shape(), what);
  check_each_close(what, got.to(DType::f64).to_vector<double>(), want.to(DType::f64).to_vector<double>(), rel, floor);
}

}  // namespace lina::test
