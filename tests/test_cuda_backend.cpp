// The CUDA backend against the CPU backend, entry point by entry point: each
// test builds float32 inputs on the host, runs the op on both devices and
// compares. Built as its own executable, lina_cuda_tests: without a GPU it
// prints SKIPPED and exits 77, which ctest reports as a skipped test.
//
// Tolerances (float32, different summation orders and math libraries):
//   elementwise  |gpu − cpu| ≤ 1e-5·|cpu| + 1e-6
//   sums         |gpu − cpu| ≤ 1e-5·Σ|x| over the summed elements + 1e-6
//   products     |gpu − cpu| ≤ 1e-4·max|cpu|
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "backend_cuda/cuda_kernels.h"
#include "core/kernels.h"
#include "core/layout.h"

using namespace lina;

namespace {

Rng& test_rng() {
  static Rng rng(777);
  return rng;
}
Tensor randn32(const Shape& shape) { return Tensor::randn(shape, test_rng(), 1.0, 0.0, DType::f32); }
Tensor rand32(const Shape& shape, double lo, double hi) {
  return Tensor::rand(shape, test_rng(), lo, hi, DType::f32);
}
Tensor gpu(const Tensor& t) { return t.to(Device::cuda); }

// Every element: |got − want| ≤ rtol·|want| + atol + scale[i] (scale optional).
void check_close(const Tensor& got, const Tensor& want, double rtol, double atol,
                 const std::string& what, const Tensor& scale = Tensor()) {
  INFO(what);
  REQUIRE(got.shape() == want.shape());
  CHECK(got.device() == Device::cuda);
  CHECK(want.device() == Device::cpu);
  std::vector<float> g = got.to_vector<float>(), w = want.to_vector<float>();
  std::vector<float> s = scale.defined() ? scale.to_vector<float>() : std::vector<float>(g.size(), 0);
  int64_t bad = -1;
  for (size_t i = 0; i < g.size() && bad < 0; ++i) {
    double bound = rtol * std::fabs(double(w[i])) + atol + s[i];
    if (!(std::fabs(double(g[i]) - w[i]) <= bound)) bad = int64_t(i);
  }
  INFO("first bad element ", bad, bad >= 0 ? ": gpu " + std::to_string(g[size_t(bad)]) + ", cpu " +
                                                 std::to_string(w[size_t(bad)])
                                           : std::string());
  CHECK(bad < 0);
}

// |x|, on the host: the scale of a sum's rounding error.
Tensor abs_cpu(const Tensor& x) {
  return kernels::binary(BinaryFn::Add, kernels::unary(UnaryFn::Relu, x),
                         kernels::unary(UnaryFn::Relu, kernels::unary(UnaryFn::Neg, x)));
}

// Matrix products: max |gpu − cpu| ≤ 1e-4 · max |cpu|.
void check_product(const Tensor& got, const Tensor& want, const std::string& what) {
  INFO(what);
  REQUIRE(got.shape() == want.shape());
  std::vector<float> g = got.to_vector<float>(), w = want.to_vector<float>();
  double largest = 0, worst = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    largest = std::max(largest, std::fabs(double(w[i])));
    double d = std::fabs(double(g[i]) - w[i]);
    worst = std::isnan(d) ? INFINITY : std::max(worst, d);
  }
  INFO("max |gpu − cpu| = ", worst, ", max |cpu| = ", largest);
  CHECK(worst <= 1e-4 * largest);
}

}  // namespace

// ---- memory & devices -------------------------------------------------------------

TEST_CASE("cuda: a device is present and tensors round-trip exactly") {
  CHECK(cuda::device_count() > 0);
  Tensor x = randn32({3, 5, 7});
  Tensor g = gpu(x);
  CHECK(g.device() == Device::cuda);
  CHECK(g.shape() == x.shape());
  CHECK(g.to(Device::cpu).to_vector<float>() == x.to_vector<float>());       // H2D, D2H
  CHECK(g.clone().to(Device::cpu).to_vector<float>() == x.to_vector<float>());  // D2D
  Tensor h = Tensor::empty({3, 5, 7}, DType::f32, Device::cuda);
  h.copy_from(x);
  CHECK(h.to_vector<float>() == x.to_vector<float>());
  // a view at an offset into a device buffer
  std::vector<float> xs = x.to_vector<float>();
  CHECK(Tensor::view_of(g, 5, {4}).to_vector<float>() ==
        std::vector<float>(xs.begin() + 5, xs.begin() + 9));
  CHECK(g.at(10) == x.at(10));
  std::vector<int32_t> ids = {1, -2, 3, 40000};
  CHECK(Tensor::from_vector(ids, {4}, Device::cuda).to_vector<int32_t>() == ids);
  CHECK(gpu(Tensor::empty({0})).to(Device::cpu).numel() == 0);
  CHECK_NOTHROW(cuda::synchronize());
}

TEST_CASE("cuda: fill, float32 and int32") {
  for (float v : {1.25f, -3.0f, 0.0f}) {
    std::vector<float> got = Tensor::full({1000, 3}, v, DType::f32, Device::cuda).to_vector<float>();
    CHECK(std::all_of(got.begin(), got.end(), [v](float e) { return e == v; }));
  }
  std::vector<int32_t> got = Tensor::full({77}, 7, DType::i32, Device::cuda).to_vector<int32_t>();
  CHECK(std::all_of(got.begin(), got.end(), [](int32_t e) { return e == 7; }));
  CHECK(Tensor::zeros({0}, DType::f32, Device::cuda).numel() == 0);
}

TEST_CASE("cuda: errors are lina::Error with a clear message") {
  CHECK_THROWS_WITH_AS(Tensor::zeros({2}, DType::f64, Device::cuda),
                       doctest::Contains("float32 only"), lina::Error);
  CHECK_THROWS_WITH_AS(kernels::binary(BinaryFn::Add, randn32({2}), gpu(randn32({2}))),
                       doctest::Contains("device mismatch"), lina::Error);
  // far beyond any GPU's memory: the CUDA error comes back as lina::Error ...
  CHECK_THROWS_WITH_AS(Tensor::empty({int64_t(1) << 45}, DType::f32, Device::cuda),
                       doctest::Contains("cuda::alloc"), lina::Error);
  // ... and does not poison the next launch
  CHECK(Tensor::full({4}, 2.0, DType::f32, Device::cuda).to_vector<float>() ==
        std::vector<float>(4, 2.0f));
  Shape nine(9, 1);
  nine.back() = 2;
  CHECK_THROWS_WITH_AS(kernels::binary(BinaryFn::Add, gpu(randn32(nine)), gpu(randn32(nine))),
                       doctest::Contains("at most 8"), lina::Error);
}

// ---- elementwise -----------------------------------------------------------------------

TEST_CASE("cuda: every unary forward and backward matches the CPU") {
  for (int k = 0; k < int(UnaryFn::Count); ++k) {
    UnaryFn f = UnaryFn(k);
    bool positive_only = f == UnaryFn::Log || f == UnaryFn::Sqrt || f == UnaryFn::Rsqrt ||
                         f == UnaryFn::PowScalar;
    double p = f == UnaryFn::PowScalar ? 1.5 : 0.7;
    for (const Shape& shape : {Shape{5, 37}, Shape{100003}}) {
      Tensor x = rand32(shape, positive_only ? 0.2 : -3.0, 3.0), dy = randn32(shape);
      Tensor y = kernels::unary(f, x, p);
      Tensor yg = kernels::unary(f, gpu(x), p);
      std::string what = "unary " + std::to_string(k) + " " + shape_str(shape);
      check_close(yg, y, 1e-5, 1e-6, what + " forward");
      check_close(kernels::unary_backward(f, gpu(x), yg, gpu(dy), p),
                  kernels::unary_backward(f, x, y, dy, p), 1e-5, 1e-6, what + " backward");
    }
  }
}

TEST_CASE("cuda: binary ops with broadcasting match the CPU") {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3, 4}, {3, 4}},
      {{2, 3, 4}, {4}},
      {{2, 1, 4}, {3, 1}},
      {{5, 1, 1, 2}, {1, 3, 2, 1}},
      {{}, {2, 3}},
      {{7}, {}},
      {{64, 1000}, {1000}},
      {{2, 1, 2, 1, 2, 1, 2, 3}, {1, 2, 1, 2, 1, 2, 1, 3}},  // 8 dims, the most supported
  };
  for (const auto& [sa, sb] : cases) {
    for (int k = 0; k < int(BinaryFn::Count); ++k) {
      BinaryFn f = BinaryFn(k);
      Tensor a = randn32(sa), b = rand32(sb, 0.5, 2.0);
      check_close(kernels::binary(f, gpu(a), gpu(b)), kernels::binary(f, a, b), 1e-5, 1e-6,
                  "binary " + std::to_string(k) + " " + shape_str(sa) + " " + shape_str(sb));
    }
  }
}

TEST_CASE("cuda: add_inplace (axpy) matches the CPU") {
  Tensor dst = randn32({300, 7}), src = randn32({300, 7});
  Tensor dst_g = gpu(dst);
  kernels::add_inplace(dst_g, gpu(src), -0.75);
  kernels::add_inplace(dst, src, -0.75);
  check_close(dst_g, dst, 1e-5, 1e-6, "axpy");
}

// ---- layout & reductions ------------------------------------------------------------------

TEST_CASE("cuda: permute, expand, slice, concat, write_slice match the CPU") {
  Tensor x = randn32({4, 5, 6});
  Tensor xg = gpu(x);
  check_close(permute(xg, {2, 0, 1}), permute(x, {2, 0, 1}), 0, 0, "permute");
  check_close(transpose(xg, 0, 2), transpose(x, 0, 2), 0, 0, "transpose");
  Tensor v = randn32({5, 1});
  check_close(expand(gpu(v), {3, 5, 4}), expand(v, {3, 5, 4}), 0, 0, "expand");
  check_close(slice(xg, 1, 1, 3), slice(x, 1, 1, 3), 0, 0, "slice");
  Tensor y = randn32({4, 2, 6});
  check_close(concat({xg, gpu(y)}, 1), concat({x, y}, 1), 0, 0, "concat");
  Tensor part = randn32({4, 5, 2});
  Tensor dst = x.clone(), dst_g = gpu(x);
  write_slice(dst, part, 2, 3, true);
  write_slice(dst_g, gpu(part), 2, 3, true);
  check_close(dst_g, dst, 1e-5, 1e-6, "write_slice accumulate");
}

TEST_CASE("cuda: sum_to with many threads adding into one element is race-free") {
  // [64, 50, 33] -> [1, 50, 1]: 2112 threads add into each output element
  Tensor x = randn32({64, 50, 33});
  Shape to = {1, 50, 1};
  Tensor scale = kernels::unary(UnaryFn::MulScalar, sum_to(abs_cpu(x), to), 1e-5);
  check_close(sum_to(gpu(x), to), sum_to(x, to), 0, 1e-6, "sum_to [1, 50, 1]", scale);
  // leading dims only: the sum_middle path
  Tensor scale2 = kernels::unary(UnaryFn::MulScalar, sum_to(abs_cpu(x), {50, 33}), 1e-5);
  check_close(sum_to(gpu(x), {50, 33}), sum_to(x, {50, 33}), 0, 1e-6, "sum_to [50, 33]", scale2);
}

TEST_CASE("cuda: sums over an axis and over everything match the CPU") {
  struct Case { Shape shape; int axis; };
  // covers one thread per column (inner ≥ 32 or short columns) and one block
  // per column (small inner, long columns)
  const std::vector<Case> cases = {{{37, 300}, 1}, {{300, 37}, 0}, {{4, 100, 5}, 1},
                                   {{6, 10, 3}, 1}, {{3, 100000}, 1}, {{200000, 3}, 0}};
  for (const Case& c : cases) {
    Tensor x = randn32(c.shape);
    Tensor scale = kernels::unary(UnaryFn::MulScalar, sum_axis(abs_cpu(x), c.axis, false), 1e-5);
    check_close(sum_axis(gpu(x), c.axis, false), sum_axis(x, c.axis, false), 0, 1e-6,
                "sum_axis " + shape_str(c.shape) + " axis " + std::to_string(c.axis), scale);
  }
  for (int64_t n : {int64_t(1), int64_t(1000), int64_t(1) << 20}) {
    Tensor x = randn32({n});
    Tensor scale = kernels::unary(UnaryFn::MulScalar, sum_all(abs_cpu(x)), 1e-5);
    check_close(sum_all(gpu(x)), sum_all(x), 0, 1e-6, "sum_all " + std::to_string(n), scale);
  }
}

TEST_CASE("cuda: sum_squares matches the CPU and is deterministic") {
  for (int64_t n : {int64_t(1), int64_t(1000), (int64_t(1) << 20) + 17}) {
    Tensor x = randn32({n});
    Tensor xg = gpu(x);
    double want = kernels::sum_squares(x);
    double got = kernels::sum_squares(xg);
    CHECK(got == doctest::Approx(want).epsilon(1e-9));
    CHECK(kernels::sum_squares(xg) == got);  // fixed summation order: same bits every run
  }
  CHECK(kernels::sum_squares(Tensor::empty({0}, DType::f32, Device::cuda)) == 0.0);
}

// ---- matrix products --------------------------------------------------------------------------

TEST_CASE("cuda: matmul matches the CPU, plain and transposed") {
  const int64_t M = 5, K = 7, N = 3;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      Tensor a = randn32(ta ? Shape{K, M} : Shape{M, K});
      Tensor b = randn32(tb ? Shape{N, K} : Shape{K, N});
      check_product(matmul(gpu(a), gpu(b), ta, tb), matmul(a, b, ta, tb),
                    std::string("matmul ta=") + (ta ? "1" : "0") + " tb=" + (tb ? "1" : "0"));
    }
  Tensor a = randn32({65, 129}), b = randn32({129, 33});
  check_product(matmul(gpu(a), gpu(b)), matmul(a, b), "matmul [65, 129] · [129, 33]");
}

TEST_CASE("cuda: batched matmul and a shared operand match the CPU") {
  const int64_t B = 4, M = 5, K = 7, N = 3;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      Tensor a = randn32(ta ? Shape{B, K, M} : Shape{B, M, K});
      Tensor b = randn32(tb ? Shape{B, N, K} : Shape{B, K, N});
      std::string flags = std::string(" ta=") + (ta ? "1" : "0") + " tb=" + (tb ? "1" : "0");
      check_product(matmul(gpu(a), gpu(b), ta, tb), matmul(a, b, ta, tb), "batched" + flags);
      // one matrix shared by every batch entry (batch stride 0), on either side
      Tensor w_b = randn32(tb ? Shape{N, K} : Shape{K, N});
      check_product(matmul(gpu(a), gpu(w_b), ta, tb), matmul(a, w_b, ta, tb), "shared b" + flags);
      Tensor w_a = randn32(ta ? Shape{K, M} : Shape{M, K});
      check_product(matmul(gpu(w_a), gpu(b), ta, tb), matmul(w_a, b, ta, tb), "shared a" + flags);
    }
}

TEST_CASE("cuda: raw gemm with alpha, beta, batch strides and K = 0 matches the CPU") {
  kernels::GemmShape g;
  g.batch = 3;
  g.M = 4;
  g.N = 6;
  g.K = 5;
  g.stride_a = 20;
  g.stride_b = 0;
  g.stride_c = 30;  // a gap of 6 between outputs, which must stay untouched
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      g.ta = ta;
      g.tb = tb;
      Tensor a = randn32({60}), b = randn32({30}), c = randn32({90});
      Tensor c_g = gpu(c);
      kernels::gemm(g, gpu(a), gpu(b), c_g, 0.5, 2.0);
      kernels::gemm(g, a, b, c, 0.5, 2.0);
      check_product(c_g, c, std::string("gemm alpha 0.5 beta 2 ta=") + (ta ? "1" : "0") +
                                " tb=" + (tb ? "1" : "0"));
    }
  g.K = 0;
  for (double beta : {0.0, 0.5}) {
    Tensor c = randn32({90});
    Tensor c_g = gpu(c);
    Tensor none = Tensor::empty({0});
    kernels::gemm(g, gpu(none), gpu(none), c_g, 1.0, beta);
    kernels::gemm(g, none, none, c, 1.0, beta);
    check_close(c_g, c, 1e-6, 0, "gemm K = 0, beta " + std::to_string(beta));
  }
}

int main(int argc, char** argv) {
  if (!kernels::cuda_available()) {
    std::printf("SKIPPED: no CUDA GPU available\n");
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
