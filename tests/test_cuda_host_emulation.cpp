// The CUDA kernels' per-thread functions (backend_cuda/kernels_device.h),
// run on the host over a whole grid-stride loop and compared with the CPU
// backend: the indexing and reduction logic the GPU runs, tested on any
// machine. Plus: asking for a CUDA tensor without a GPU is one clear error.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend_cuda/kernels_device.h"
#include "core/kernels.h"
#include "core/layout.h"

using namespace lina;
using namespace lina::cuda;

namespace {

Rng& test_rng() {
  static Rng rng(4242);
  return rng;
}
Tensor randn32(const Shape& shape) { return Tensor::randn(shape, test_rng(), 1.0, 0.0, DType::f32); }
Tensor rand32(const Shape& shape, double lo, double hi) {
  return Tensor::rand(shape, test_rng(), lo, hi, DType::f32);
}

// What a grid of `threads` threads does in a grid-stride loop over n items:
// thread t visits t, t + threads, … (a small grid, so the loop strides).
template <class PerThread>
void run_grid(int64_t n, PerThread per_thread, int64_t threads = 96) {
  for (int64_t t = 0; t < threads; ++t)
    for (int64_t i = t; i < n; i += threads) per_thread(i);
}

// Every element: |got − want| ≤ rtol·|want| + atol (NaN fails).
void check_close(const Tensor& got, const Tensor& want, double rtol, double atol,
                 const std::string& what) {
  REQUIRE(got.shape() == want.shape());
  std::vector<float> g = got.to_vector<float>(), w = want.to_vector<float>();
  int64_t bad = -1;
  for (size_t i = 0; i < g.size() && bad < 0; ++i)
    if (!(std::fabs(double(g[i]) - w[i]) <= rtol * std::fabs(double(w[i])) + atol)) bad = int64_t(i);
  INFO(what, ": element ", bad, bad >= 0 ? ": got " + std::to_string(g[size_t(bad)]) + ", want " +
                                               std::to_string(w[size_t(bad)])
                                         : std::string());
  CHECK(bad < 0);
}

// Strides reading `in` as the broadcast shape `out` (0 on broadcast dims).
std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out) {
  std::vector<int64_t> st(out.size(), 0), cs = contiguous_strides(in);
  size_t lead = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) st[lead + i] = in[i] == 1 ? 0 : cs[i];
  return st;
}

}  // namespace

TEST_CASE("cuda host emulation: binary with broadcasting matches the CPU backend") {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3, 4}, {3, 4}}, {{2, 3, 4}, {4}}, {{2, 1, 4}, {3, 1}}, {{5, 1, 1, 2}, {1, 3, 2, 1}},
      {{}, {2, 3}},     {{7}, {}}};
  for (const auto& [sa, sb] : cases) {
    for (int k = 0; k < int(BinaryFn::Count); ++k) {
      BinaryFn f = BinaryFn(k);
      Tensor a = randn32(sa), b = rand32(sb, 0.5, 2.0);  // b > 0: Div is defined
      Tensor want = kernels::binary(f, a, b);
      Shape out_shape = broadcast_shapes(sa, sb, "test");
      Tensor got = Tensor::empty(out_shape, DType::f32);
      std::vector<int64_t> sta = broadcast_strides(sa, out_shape), stb = broadcast_strides(sb, out_shape);
      BinaryArgs args = make_binary_args(a.data<float>(), sta.data(), b.data<float>(), stb.data(),
                                         got.data<float>(), out_shape.data(), int(out_shape.size()));
      CHECK(args.n == numel(out_shape));
      math::visit_binary(f, [&](auto fn) {
        using Fn = decltype(fn);
        run_grid(args.n, [&](int64_t i) { binary_thread<Fn>(i, args); });
      });
      check_close(got, want, 1e-6, 0.0,
                  "binary " + std::to_string(k) + " " + shape_str(sa) + " " + shape_str(sb));
    }
  }
}

TEST_CASE("cuda host emulation: every unary forward and backward matches the CPU backend") {
  for (int k = 0; k < int(UnaryFn::Count); ++k) {
    UnaryFn f = UnaryFn(k);
    bool positive_only = f == UnaryFn::Log || f == UnaryFn::Sqrt || f == UnaryFn::Rsqrt ||
                         f == UnaryFn::PowScalar;
    float p = f == UnaryFn::PowScalar ? 1.5f : 0.7f;
    Tensor x = rand32({5, 37}, positive_only ? 0.2 : -3.0, 3.0);
    Tensor dy = randn32({5, 37});
    // The reference: the CPU backend's scalar maths in float64 (its float32
    // path may take the vectorised functions of backend_cpu/unary_fast.h),
    // rounded to float32; the backward from the GPU's own y, as in training.
    Tensor y = Tensor::empty(x.shape()), dx = Tensor::empty(x.shape());
    math::visit_unary(f, [&](auto fn) {
      using Fn = decltype(fn);
      run_grid(x.numel(), [&](int64_t i) { unary_forward_thread<Fn>(i, x.data<float>(), y.data<float>(), p); });
      run_grid(x.numel(), [&](int64_t i) {
        unary_backward_thread<Fn>(i, x.data<float>(), y.data<float>(), dy.data<float>(),
                                  dx.data<float>(), p);
      });
    });
    Tensor x64 = x.to(DType::f64);
    Tensor y_want = kernels::unary(f, x64, p).to(DType::f32);
    Tensor dx_want = kernels::unary_backward(f, x64, y.to(DType::f64), dy.to(DType::f64), p).to(DType::f32);
    check_close(y, y_want, 1e-6, 1e-7, "unary forward " + std::to_string(k));
    // (GELU's derivative cancels where tanh nears −1: float32 keeps ~6e-7·|dy| there)
    check_close(dx, dx_want, 1e-5, 1e-7, "unary backward " + std::to_string(k));
  }
}

TEST_CASE("cuda host emulation: fill and axpy") {
  Tensor x = randn32({300});
  Tensor d = randn32({300});
  Tensor want = d.clone();
  kernels::add_inplace(want, x, -0.25);
  run_grid(d.numel(), [&](int64_t i) { axpy_thread(i, d.data<float>(), x.data<float>(), -0.25f); });
  check_close(d, want, 1e-6, 0.0, "axpy");
  run_grid(d.numel(), [&](int64_t i) { fill_thread(i, d.data<float>(), 2.5f); });
  check_close(d, Tensor::full({300}, 2.5), 0.0, 0.0, "fill");
}

TEST_CASE("cuda host emulation: copy_strided (copy and accumulate) matches the CPU backend") {
  using kernels::StridedView;
  struct Case {
    std::string what;
    Shape src_shape, dst_shape, extent;
    StridedView sv, dv;
    bool accumulate;
  };
  const std::vector<Case> cases = {
      {"transpose [3, 5]", {3, 5}, {5, 3}, {5, 3}, {0, {1, 5}}, {0, {3, 1}}, false},
      {"permute [2, 3, 4] -> [4, 2, 3]", {2, 3, 4}, {4, 2, 3}, {4, 2, 3}, {0, {1, 12, 4}},
       {0, {6, 3, 1}}, false},
      {"expand [4] -> [2, 3, 4]", {4}, {2, 3, 4}, {2, 3, 4}, {0, {0, 0, 1}}, {0, {12, 4, 1}}, false},
      {"slice [4, 6][:, 2:5]", {4, 6}, {4, 3}, {4, 3}, {2, {6, 1}}, {0, {3, 1}}, false},
      {"sum_to [2, 3, 4] -> [3, 1]", {2, 3, 4}, {3, 1}, {2, 3, 4}, {0, {12, 4, 1}},
       {0, {0, 1, 0}}, true},
      {"accumulate into slice [4, 6][:, 1:4]", {4, 3}, {4, 6}, {4, 3}, {0, {3, 1}},
       {1, {6, 1}}, true},
  };
  for (const Case& c : cases) {
    Tensor src = randn32(c.src_shape);
    Tensor dst0 = randn32(c.dst_shape);
    Tensor want = dst0.clone(), got = dst0.clone();
    kernels::copy_strided(src, c.sv, want, c.dv, c.extent, c.accumulate);
    CopyStridedArgs args = make_copy_strided_args(
        src.data<float>() + c.sv.offset, c.sv.strides.data(), got.data<float>() + c.dv.offset,
        c.dv.strides.data(), c.extent.data(), int(c.extent.size()), c.accumulate);
    run_grid(args.kept_n, [&](int64_t k) { copy_strided_thread(k, args); });
    // accumulation order differs from the CPU's row order: allow rounding
    check_close(got, want, 1e-6, 1e-6, c.what);
  }
}

TEST_CASE("cuda host emulation: sum_middle, one thread or a block of lanes per column") {
  struct Dims { int64_t outer, n, inner; };
  for (Dims d : {Dims{1, 1000, 1}, Dims{3, 70, 5}, Dims{2, 5, 40}, Dims{4, 1, 3}, Dims{2, 300, 33}}) {
    Tensor x = randn32({d.outer, d.n, d.inner});
    Tensor want = Tensor::empty({d.outer, d.inner});
    kernels::sum_middle(x, d.outer, d.n, d.inner, want);
    // the largest Σ|x| over a column bounds the rounding of any summation order
    double scale = 0;
    for (int64_t o = 0; o < d.outer; ++o)
      for (int64_t i = 0; i < d.inner; ++i) {
        double s = 0;
        for (int64_t j = 0; j < d.n; ++j) s += std::fabs(x.at((o * d.n + j) * d.inner + i));
        scale = std::max(scale, s);
      }
    std::string dims = "[" + std::to_string(d.outer) + ", " + std::to_string(d.n) + ", " +
                       std::to_string(d.inner) + "]";

    int64_t columns = d.outer * d.inner;
    Tensor by_thread = Tensor::empty({d.outer, d.inner});
    run_grid(columns, [&](int64_t c) {
      sum_middle_column_thread(c, x.data<float>(), by_thread.data<float>(), d.n, d.inner);
    });
    check_close(by_thread, want, 0.0, 1e-6 * scale + 1e-7, "one thread per column " + dims);

    // A block of 256 lanes per column; the kernel adds their partials.
    Tensor by_block = Tensor::empty({d.outer, d.inner});
    for (int64_t c = 0; c < columns; ++c) {
      float total = 0;
      for (int64_t lane = 0; lane < kThreads; ++lane)
        total += sum_middle_partial(c, lane, kThreads, x.data<float>(), d.n, d.inner);
      by_block.data<float>()[c] = total;
    }
    check_close(by_block, want, 0.0, 1e-6 * scale + 1e-7, "block per column " + dims);
  }
}

TEST_CASE("cuda host emulation: sum_squares partials add up to the CPU sum") {
  Tensor x = randn32({10007});
  double want = kernels::sum_squares(x);
  double total = 0;
  const int64_t threads = 3 * kThreads;
  for (int64_t t = 0; t < threads; ++t) total += sum_squares_partial(t, threads, x.data<float>(), x.numel());
  CHECK(total == doctest::Approx(want).epsilon(1e-12));
  CHECK(want > 9000.0);  // ≈ n for N(0, 1) samples: the sum saw every element
}

TEST_CASE("cuda host emulation: a product with K = 0 scales C by beta, like the CPU gemm") {
  // two 2×3 matrices, 8 elements apart; the gap between them must stay untouched
  for (float beta : {0.0f, 0.5f}) {
    Tensor c0 = randn32({16});
    Tensor want = c0.clone(), got = c0.clone();
    kernels::GemmShape g;
    g.batch = 2;
    g.M = 2;
    g.N = 3;
    g.K = 0;
    g.stride_c = 8;
    Tensor a = Tensor::empty({0}), b = Tensor::empty({0});
    kernels::gemm(g, a, b, want, 1.0, beta);
    run_grid(g.batch * g.M * g.N,
             [&](int64_t i) { scale_batched_thread(i, got.data<float>(), g.M * g.N, g.stride_c, beta); });
    check_close(got, want, 1e-6, 0.0, "beta " + std::to_string(beta));
    CHECK(got.at(7) == c0.at(7));
  }
}

TEST_CASE("cuda: a CUDA tensor without a GPU is one clear error") {
  if (kernels::cuda_available()) {
    CHECK_NOTHROW(Tensor::zeros({2}, DType::f32, Device::cuda));
    return;
  }
  CHECK_THROWS_WITH_AS(Tensor::zeros({2}, DType::f32, Device::cuda), doctest::Contains("CUDA"),
                       lina::Error);
}
