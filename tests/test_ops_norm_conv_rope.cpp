// rms_norm, l2_norm, causal_conv1d, causal_conv1d_silu and rope: known
// values, weight gradients summed over many rows against a plain loop, the
// fused conv + SiLU against its composition, backwards adding into gradients
// handed in, and errors (their gradient
// checks and CPU-against-cuda rows: tests/op_table.cpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd/functions.h"
#include "dispatch/dispatch.h"
#include "dispatch/layout.h"
#include "tests/cuda_half.h"
#include "tests/gradcheck.h"
#include "tests/harness.h"
#include "tests/op_check.h"

using namespace lina;
using namespace lina::test;

TEST_CASE("rms_norm forward values") {
  Var w = leaf({0.5, -1.0, 2.0, 3.0}, {4});
  // a constant row normalises to all ones, so y = weight
  Var y = rms_norm(leaf({3, 3, 3, 3, -2, -2, -2, -2}, {2, 4}), w);
  for (int64_t i = 0; i < 4; ++i) {
    CHECK(y.data().at(i) == doctest::Approx(w.data().at(i)).epsilon(1e-5));
    CHECK(y.data().at(4 + i) == doctest::Approx(-w.data().at(i)).epsilon(1e-5));
  }
  // x = [1, 2, 3, 4]: mean(x²) = 7.5
  Var y2 = rms_norm(leaf({1, 2, 3, 4}, {1, 4}), w, 0.0);
  for (int64_t i = 0; i < 4; ++i)
    CHECK(y2.data().at(i) == doctest::Approx(w.data().at(i) * double(i + 1) / std::sqrt(7.5)));
}

TEST_CASE("l2_norm gives unit rows and keeps an all-zero row finite") {
  Var y = l2_norm(Var(randn64({3, 5})));
  for (int64_t r = 0; r < 3; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < 5; ++i) ss += y.data().at(r * 5 + i) * y.data().at(r * 5 + i);
    CHECK(ss == doctest::Approx(1.0));
  }
  Var x = leaf({0, 0, 0, 3, 4, 0}, {2, 3}, true);
  Var z = l2_norm(x);
  for (int64_t i = 0; i < 3; ++i) CHECK(z.data().at(i) == 0.0);
  CHECK(z.data().at(3) == doctest::Approx(0.6));
  CHECK(z.data().at(4) == doctest::Approx(0.8));
  sum_all(z).backward();
  // the zero row has y = x / ε, so its gradient is 1/ε (finite, no NaN)
  for (int64_t i = 0; i < 3; ++i) CHECK(x.grad().at(i) == doctest::Approx(1e12));
  for (int64_t i = 3; i < 6; ++i) CHECK(std::isfinite(x.grad().at(i)));
}

TEST_CASE("causal_conv1d of a known signal") {
  // x [B=2, T=5, C=2]: both channels hold 1..5 (batch 1: 10..50); channel 0
  // has weights [0, 0, 1, 1] (x_{t−1} + x_t), channel 1 [1, 0, 0, 0] (x_{t−3}).
  std::vector<double> xs;
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 5; ++t)
      for (int c = 0; c < 2; ++c) xs.push_back((t + 1) * (b == 0 ? 1.0 : 10.0));
  Var y = causal_conv1d(leaf(xs, {2, 5, 2}), leaf({0, 0, 1, 1, 1, 0, 0, 0}, {2, 4}));
  const double ch0[] = {1, 3, 5, 7, 9}, ch1[] = {0, 0, 0, 1, 2};
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 5; ++t) {
      const double scale = b == 0 ? 1.0 : 10.0;  // no leak from batch 0 into batch 1
      CHECK(y.data().at((b * 5 + t) * 2 + 0) == doctest::Approx(scale * ch0[t]));
      CHECK(y.data().at((b * 5 + t) * 2 + 1) == doctest::Approx(scale * ch1[t]));
    }
}

TEST_CASE("l2_norm's scale multiplies y and dx (and leaves the saved norm alone)") {
  Tensor x = randn64({3, 4, 8}), dy = randn64({3, 4, 8});
  Tensor norm1, norm_s;
  const double s = 1.0 / std::sqrt(8.0);
  Tensor y1 = dispatch::l2_norm_forward(x, 1e-12, 1.0, norm1);
  Tensor ys = dispatch::l2_norm_forward(x, 1e-12, s, norm_s);
  CHECK(max_abs_diff(norm1, norm_s) == 0.0);
  CHECK(max_abs_diff(ys, dispatch::unary(UnaryFn::MulScalar, y1, s)) < 1e-15);
  Tensor dx1 = dispatch::l2_norm_backward(x, norm1, dy, 1e-12, 1.0);
  Tensor dxs = dispatch::l2_norm_backward(x, norm_s, dy, 1e-12, s);
  CHECK(max_abs_diff(dxs, dispatch::unary(UnaryFn::MulScalar, dx1, s)) < 1e-14);
}

TEST_CASE("causal_conv1d_silu matches silu(causal_conv1d): forward and both gradients, float32") {
  struct Dims { int64_t B, T, C, K; };
  // 300 rows: three dw chunks of 128 rows; C = 130 is not a multiple of a SIMD width
  for (Dims d : {Dims{2, 13, 5, 4}, Dims{3, 100, 130, 4}, Dims{1, 3, 7, 4}, Dims{2, 9, 3, 1}}) {
    INFO("B, T, C, K = " << d.B << ", " << d.T << ", " << d.C << ", " << d.K);
    Tensor x = randn64({d.B, d.T, d.C}).to(DType::F32), w = randn64({d.C, d.K}, 0.5).to(DType::F32);
    Tensor r = randn64({d.B, d.T, d.C}).to(DType::F32);
    Var xf(x, true), wf(w, true), xc(x.clone(), true), wc(w.clone(), true);
    Var fused = causal_conv1d_silu(xf, wf), composed = silu(causal_conv1d(xc, wc));
    CHECK(max_abs_diff(fused.data(), composed.data()) < 1e-6);
    sum_all(mul(fused, Var(r))).backward();
    sum_all(mul(composed, Var(r))).backward();
    CHECK(max_abs_diff(xf.grad(), xc.grad()) < 1e-5);
    // dw sums B·T terms of size ~1: float32 rounding grows with the count
    CHECK(max_abs_diff(wf.grad(), wc.grad()) < 1e-4);
    // a fixed thread count gives the same bits run to run
    Tensor dx1, dw1, dx2, dw2;
    dispatch::causal_conv1d_silu_backward(x, w, r, dx1, dw1);
    dispatch::causal_conv1d_silu_backward(x, w, r, dx2, dw2);
    CHECK(max_abs_diff(dx1, dx2) == 0.0);
    CHECK(max_abs_diff(dw1, dw2) == 0.0);
  }
}

TEST_CASE("causal_conv1d_silu_l2_norm matches l2_norm(causal_conv1d_silu) per head: forward, gradients, the same bits") {
  struct Dims { int64_t B, T, C, K, head; };
  // C = 128 in heads of 32: the model's q and k; 300 rows cross two dw chunk boundaries
  for (Dims d : {Dims{2, 70, 128, 4, 32}, Dims{3, 100, 10, 4, 5}, Dims{1, 3, 6, 4, 6}}) {
    INFO("B, T, C, K, head = " << d.B << ", " << d.T << ", " << d.C << ", " << d.K << ", " << d.head);
    const double scale = 1.0 / std::sqrt(double(d.head));
    Tensor x = randn64({d.B, d.T, d.C}).to(DType::F32), w = randn64({d.C, d.K}, 0.5).to(DType::F32);
    Tensor r = randn64({d.B, d.T, d.C}).to(DType::F32);
    Var xf(x, true), wf(w, true), xc(x.clone(), true), wc(w.clone(), true);
    Var fused = causal_conv1d_silu_l2_norm(xf, wf, d.head, scale);
    Var composed = reshape(l2_norm(reshape(causal_conv1d_silu(xc, wc), {d.B, d.T, d.C / d.head, d.head}), 1e-12, scale),
                           {d.B, d.T, d.C});
    // row by row the same code as the two ops: the same bits
    CHECK(max_abs_diff(fused.data(), composed.data()) == 0.0);
    sum_all(mul(fused, Var(r))).backward();
    sum_all(mul(composed, Var(r))).backward();
    CHECK(max_abs_diff(xf.grad(), xc.grad()) == 0.0);
    // dw: the same terms, summed in the same chunk order
    CHECK(max_abs_diff(wf.grad(), wc.grad()) == 0.0);
    REQUIRE(fused.grad_fn() != nullptr);
    SavedTensors saved = fused.grad_fn()->saved();
    REQUIRE(saved.size() == 3);
    CHECK(std::string(saved[2].first) == "norm");
    CHECK(saved[2].second.numel() == d.B * d.T * d.C / d.head);  // one number per head, not a [B, T, C]
  }
  CHECK_THROWS_WITH_AS(causal_conv1d_silu_l2_norm(Var(Tensor::zeros({1, 2, 6})), Var(Tensor::zeros({6, 4})), 4),
                       doctest::Contains("do not split into heads of 4"), Error);
}

TEST_CASE("causal_conv1d_silu keeps only x and weight for its backward") {
  Var x(randn64({1, 5, 3}), true), w(randn64({3, 4}), true);
  Var y = causal_conv1d_silu(x, w);
  REQUIRE(y.grad_fn() != nullptr);
  SavedTensors saved = y.grad_fn()->saved();
  REQUIRE(saved.size() == 2);
  CHECK(std::string(saved[0].first) == "x");
  CHECK(std::string(saved[1].first) == "weight");
}

TEST_CASE("rope: identity at position 0, norm-preserving, interleaved pairs at position 1") {
  Tensor x = randn64({2, 1, 3, 8});
  CHECK(max_abs_diff(rope(Var(x), 0).data(), x) == 0.0);

  Tensor x2 = randn64({1, 4, 2, 8});
  Tensor y2 = rope(Var(x2), 3).data();
  for (int64_t row = 0; row < 8; ++row)
    for (int64_t j = 0; j < 4; ++j) {
      auto pair_norm = [&](const Tensor& t) {  // the pair (2j, 2j + 1)
        double a = t.at(row * 8 + 2 * j), b = t.at(row * 8 + 2 * j + 1);
        return a * a + b * b;
      };
      CHECK(pair_norm(y2) == doctest::Approx(pair_norm(x2)));
    }

  // D = 4, base 10000: pair (0, 1) turns by θ_0 = t, pair (2, 3) by θ_1 = t / 100.
  // At position 1: head 0 holds e_0, head 1 holds e_2.
  Tensor e = Tensor::from_vector<double>({0, 0, 0, 0, 0, 0, 0, 0,    // t = 0 (pos0 = 0)
                                          1, 0, 0, 0, 0, 0, 1, 0},   // t = 1, heads e_0 and e_2
                                         {1, 2, 2, 4});
  Tensor y = rope(Var(e), 0).data();
  CHECK(y.at(8) == doctest::Approx(std::cos(1.0)));
  CHECK(y.at(9) == doctest::Approx(std::sin(1.0)));  // e_0 turns towards e_1, its partner
  CHECK(y.at(10) == doctest::Approx(0.0));
  CHECK(y.at(14) == doctest::Approx(std::cos(0.01)));
  CHECK(y.at(15) == doctest::Approx(std::sin(0.01)));
  Tensor e1 = Tensor::from_vector<double>({0, 1, 0, 0}, {1, 1, 1, 4});  // e_1 from pos0 = 1
  Tensor y1 = rope(Var(e1), 1).data();
  CHECK(y1.at(0) == doctest::Approx(-std::sin(1.0)));
  CHECK(y1.at(1) == doctest::Approx(std::cos(1.0)));
  // the inverse rotation undoes it
  CHECK(max_abs_diff(dispatch::rope_apply(y2, 3, 10000.0, true), x2) < 1e-12);
}

TEST_CASE("weight gradients summed over many rows match a plain loop") {
  // more rows than one partial-sum chunk, so the chunked reduction is exercised
  SUBCASE("rms_norm dw") {
    const int64_t rows = 300, n = 8;
    Tensor x = randn64({3, 100, n}), w = rand64({n}, 0.5, 1.5), dy = randn64({3, 100, n});
    Tensor rstd, dx, dw;
    dispatch::rms_norm_forward(x, w, 1e-5, rstd);
    dispatch::rms_norm_backward(x, w, rstd, dy, dx, dw);
    for (int64_t i = 0; i < n; ++i) {
      double expect = 0;
      for (int64_t r = 0; r < rows; ++r)
        expect += dy.at(r * n + i) * x.at(r * n + i) * rstd.at(r);
      CHECK(dw.at(i) == doctest::Approx(expect).epsilon(1e-12));
    }
  }
  SUBCASE("causal_conv1d dw") {
    const int64_t B = 3, T = 100, C = 3, K = 4;
    Tensor x = randn64({B, T, C}), w = randn64({C, K}), dy = randn64({B, T, C});
    Tensor dx, dw;
    dispatch::causal_conv1d_backward(x, w, dy, dx, dw);
    for (int64_t c = 0; c < C; ++c)
      for (int64_t j = 0; j < K; ++j) {
        double expect = 0;
        for (int64_t b = 0; b < B; ++b)
          for (int64_t t = 0; t < T; ++t)
            if (t - K + 1 + j >= 0)
              expect += dy.at((b * T + t) * C + c) * x.at((b * T + t - K + 1 + j) * C + c);
        CHECK(dw.at(c * K + j) == doctest::Approx(expect).epsilon(1e-12));
      }
  }
}

// Each backward below run twice: fresh, and handed gradients g0 to add
// into; the second must give g0 + the first (what the walk's add would have
// given) to the last bits: the kernel may fuse its last product with the
// add (one rounding where the walk has two), so a few units in the last
// place of the largest element.
static void check_adds_into(Device device, DType dtype) {
  auto on = [&](Tensor t) { return t.to(dtype).to(device); };
  const Tensor x = on(randn64({3, 50, 12})), dy = on(randn64({3, 50, 12}));
  const Tensor w_norm = on(rand64({12}, 0.5, 1.5)), w_conv = on(randn64({12, 4}, 0.5));
  const Tensor dx0 = on(randn64({3, 50, 12})), dw0_norm = on(randn64({12})), dw0_conv = on(randn64({12, 4}));
  const double ulp = dtype == DType::F64 ? 2.3e-16 : 1.2e-7;
  auto check_sum = [ulp](const Tensor& added, const Tensor& g0, const Tensor& fresh) {
    const Tensor expected = dispatch::binary(BinaryFn::Add, g0, fresh);
    double largest = 1.0;
    for (double v : expected.to(DType::F64).to(Device::Cpu).to_vector<double>()) largest = std::max(largest, std::fabs(v));
    CHECK(max_abs_diff(added, expected) <= 8 * ulp * largest);
  };
  Tensor rstd, norm, dx, dw, dx_into = dx0.clone(), dw_into = dw0_norm.clone();
  dispatch::rms_norm_forward(x, w_norm, 1e-5, rstd);
  dispatch::rms_norm_backward(x, w_norm, rstd, dy, dx, dw);
  dispatch::rms_norm_backward(x, w_norm, rstd, dy, dx_into, dw_into);
  check_sum(dx_into, dx0, dx);
  check_sum(dw_into, dw0_norm, dw);
  dispatch::causal_conv1d_silu_l2_norm_forward(x, w_conv, {4, 1, 1}, 1e-6, 0.5, norm);
  for (int op = 0; op < 3; ++op) {
    INFO("conv backward " << op);
    auto backward = [&](Tensor& d_x, Tensor& d_w) {
      if (op == 0) dispatch::causal_conv1d_backward(x, w_conv, dy, d_x, d_w);
      if (op == 1) dispatch::causal_conv1d_silu_backward(x, w_conv, dy, d_x, d_w);
      if (op == 2) dispatch::causal_conv1d_silu_l2_norm_backward(x, w_conv, norm, dy, {4, 1, 1}, 1e-6, 0.5, d_x, d_w);
    };
    Tensor fresh_dx, fresh_dw, into_dx, into_dw = dw0_conv.clone();
    if (op == 2) into_dx = dx0.clone();  // the fused conv's dx adds into a sum too
    backward(fresh_dx, fresh_dw);
    backward(into_dx, into_dw);
    if (op == 2) check_sum(into_dx, dx0, fresh_dx);
    else CHECK(max_abs_diff(into_dx, fresh_dx) == 0.0);
    check_sum(into_dw, dw0_conv, fresh_dw);
  }
}

TEST_CASE("rms_norm's dx and dw, the convs' dw and the fused conv's dx add into gradients handed in, CPU and cuda") {
  check_adds_into(Device::Cpu, DType::F64);
  check_adds_into(Device::Cpu, DType::F32);
  if (cuda_half()) check_adds_into(Device::Cuda, DType::F32);
}

// The gated norm runs rms_norm's and swiglu's own lines in one pass: the same
// bits as the two ops, forward and every gradient, and its gradients add into
// sums handed in.
static void check_gated_norm(Device device, DType dtype) {
  auto on = [&](Tensor t) { return t.to(dtype).to(device); };
  const Tensor x = on(randn64({3, 50, 32})), w = on(rand64({32}, 0.5, 1.5)), g = on(randn64({3, 50, 32}));
  const Tensor r = on(randn64({3, 50, 32}));  // the loss Σ r ⊙ y
  auto run = [&](bool fused) {
    Var xv(x, true), wv(w, true), gv(g, true);
    Var y = fused ? rms_norm_gated(xv, wv, gv, 1e-6) : swiglu(gv, rms_norm(xv, wv, 1e-6));
    sum_all(mul(y, Var(r))).backward();
    return std::vector<Tensor>{y.data(), xv.grad(), wv.grad(), gv.grad()};
  };
  const std::vector<Tensor> fused = run(true), composed = run(false);
  const char* what[] = {"y", "dx", "dw", "dgate"};
  for (size_t i = 0; i < fused.size(); ++i) {
    INFO(what[i]);
    CHECK(max_abs_diff(fused[i], composed[i]) == 0.0);
  }
  Tensor rstd, dx, dw, dgate, dgate_into = on(randn64({3, 50, 32}));
  const Tensor dgate0 = dgate_into.clone();
  dispatch::rms_norm_forward(x, w, 1e-6, rstd, g);
  dispatch::rms_norm_backward(x, w, rstd, r, dx, dw, g, &dgate);
  dx = Tensor(), dw = Tensor();
  dispatch::rms_norm_backward(x, w, rstd, r, dx, dw, g, &dgate_into);
  CHECK(max_abs_diff(dgate_into, dispatch::binary(BinaryFn::Add, dgate0, dgate)) == 0.0);
  CHECK_THROWS_WITH_AS(dispatch::rms_norm_backward(x, w, rstd, r, dx, dw, g, nullptr),
                       doctest::Contains("a gate needs its gradient's tensor"), Error);
  CHECK_THROWS_WITH_AS(dispatch::rms_norm_forward(x, w, 1e-6, rstd, on(randn64({3, 50, 31}))),
                       doctest::Contains("rms_norm_gated"), Error);
}

TEST_CASE("the gated norm equals rms_norm then swiglu bit for bit, CPU and cuda") {
  check_gated_norm(Device::Cpu, DType::F64);
  check_gated_norm(Device::Cpu, DType::F32);
  if (cuda_half()) check_gated_norm(Device::Cuda, DType::F32);
}

// The gated norm reading its gate in place from columns of a wider product
// z gives the bits of reading a copy of those columns: y, dx, dw, and z's
// gradient is the copy's gradient in the gate's columns, 0 in the others;
// added into a gradient handed in, only the gate's columns change.
static void check_gate_in_product(Device device, DType dtype) {
  auto on = [&](Tensor t) { return t.to(dtype).to(device); };
  const Tensor x = on(randn64({3, 50, 4, 8})), w = on(rand64({8}, 0.5, 1.5)), z = on(randn64({3, 50, 45}));
  const Tensor r = on(randn64({3, 50, 4, 8}));  // the loss Σ r ⊙ y
  const Tensor gate = slice(z, 2, 9, 32).reshape({3, 50, 4, 8});  // z's columns [9, 41)
  Tensor rstd, y = dispatch::rms_norm_forward(x, w, 1e-6, rstd, z, 9);
  Tensor rstd_copy, y_copy = dispatch::rms_norm_forward(x, w, 1e-6, rstd_copy, gate);
  CHECK(max_abs_diff(y, y_copy) == 0.0);
  Tensor dx, dw, dz, dx_copy, dw_copy, dgate_copy;
  dispatch::rms_norm_backward(x, w, rstd, r, dx, dw, z, &dz, 9);
  dispatch::rms_norm_backward(x, w, rstd_copy, r, dx_copy, dw_copy, gate, &dgate_copy);
  CHECK(max_abs_diff(dx, dx_copy) == 0.0);
  CHECK(max_abs_diff(dw, dw_copy) == 0.0);
  REQUIRE(dz.shape() == z.shape());
  CHECK(max_abs_diff(slice(dz, 2, 9, 32).reshape({3, 50, 4, 8}), dgate_copy) == 0.0);
  for (const auto& [from, count] : {std::pair<int64_t, int64_t>{0, 9}, {41, 4}})
    CHECK(max_abs_diff(slice(dz, 2, from, count), on(Tensor::zeros({3, 50, count}, DType::F64))) == 0.0);
  const Tensor dz0 = on(randn64({3, 50, 45}));
  Tensor dz_into = dz0.clone();
  dx = Tensor(), dw = Tensor();
  dispatch::rms_norm_backward(x, w, rstd, r, dx, dw, z, &dz_into, 9);
  CHECK(max_abs_diff(dz_into, dispatch::binary(BinaryFn::Add, dz0, dz)) == 0.0);
  CHECK_THROWS_WITH_AS(dispatch::rms_norm_forward(x, w, 1e-6, rstd, z, 14), doctest::Contains("rms_norm_gated"),
                       Error);
}

TEST_CASE("the gated norm reads its gate from columns of a wider product, CPU and cuda") {
  check_gate_in_product(Device::Cpu, DType::F64);
  check_gate_in_product(Device::Cpu, DType::F32);
  if (cuda_half()) check_gate_in_product(Device::Cuda, DType::F32);
}

// The recurrent mixers' three readers of one product z [2, 9, 35], recorded
// in their order: beta_log_alpha (its last 3 columns), the conv (columns [0,
// 24)), the gated norm of o [2, 9, 2, 4] (columns [24, 32)). The norm's
// backward runs first and returns z's whole gradient; the conv's and then
// beta_log_alpha's add into their columns of it. Float64 gradients against
// central differences, and cuda against the CPU.
TEST_CASE("one product read by beta_log_alpha, the conv and the gated norm: each backward adds into z's gradient, CPU and cuda") {
  const OpRow row{"causal_conv1d_silu_l2_norm", "the mixer's three readers of z [2, 9, 35]",
                  {in::normal({2, 9, 35}), in::normal({24, 4}), in::normal({3}), in::normal({2, 9, 2, 4}),
                   in::uniform({4}, 0.5, 1.5)},
                  [](const Vars& v) {
                    Var gates = beta_log_alpha(v[0], v[2], 1);
                    Var planes = causal_conv1d_silu_l2_norm_planes(v[0], v[1], 4, 3, 2);
                    return Vars{gates, planes, rms_norm_gated(v[3], v[4], v[0], 1e-5, 24)};
                  }};
  const GradcheckResult r = row_gradient_error(row);
  CHECK_MESSAGE(r.worst <= kGradcheck.tolerance, "worst " << r.where << " (error " << r.worst << ")");
  if (cuda_half()) CHECK(cuda_error(row.within(kCudaEachSum)) == "");
}

// residual_rms_norm, two in a row as in the model (the second's x is the
// first's sum): the same bits as residual_dropout then rms_norm, forward and
// every gradient, with and without dropout; and where the last norm is not
// used (`use_last_norm` false) its backward still carries the sum's gradient.
static void check_residual_norm(Device device, DType dtype, double p, bool use_last_norm) {
  auto on = [&](Tensor t) { return t.to(dtype).to(device); };
  const Shape shape{3, 50, 32};
  const Tensor x = on(randn64(shape)), h1 = on(randn64(shape)), h2 = on(randn64(shape));
  const Tensor w1 = on(rand64({32}, 0.5, 1.5)), w2 = on(rand64({32}, 0.5, 1.5));
  const Tensor r1 = on(randn64(shape)), r2 = on(randn64(shape)), r3 = on(randn64(shape));  // the loss's weights
  const DropoutKey key1{p, 1337, 3, 0}, key2{p, 1337, 3, 1};
  auto run = [&](bool fused) {
    Var xv(x, true), h1v(h1, true), h2v(h2, true), w1v(w1, true), w2v(w2, true);
    Var s1, y1, s2, y2;
    if (fused) {
      ResidualNormed a = residual_rms_norm(xv, h1v, key1, w1v, 1e-6), b = residual_rms_norm(a.sum, h2v, key2, w2v, 1e-6);
      s1 = a.sum, y1 = a.normed, s2 = b.sum, y2 = b.normed;
    } else {
      s1 = residual_dropout(xv, h1v, key1), y1 = rms_norm(s1, w1v, 1e-6);
      s2 = residual_dropout(s1, h2v, key2), y2 = rms_norm(s2, w2v, 1e-6);
    }
    Var loss = add(sum_all(mul(y1, Var(r1))), sum_all(mul(s2, Var(r3))));
    if (use_last_norm) loss = add(loss, sum_all(mul(y2, Var(r2))));
    loss.backward();
    return std::vector<Tensor>{s1.data(), y1.data(), s2.data(), y2.data(), xv.grad(), h1v.grad(),
                               h2v.grad(), w1v.grad(), w2v.grad()};
  };
  const std::vector<Tensor> fused = run(true), composed = run(false);
  const char* what[] = {"sum 1", "y 1", "sum 2", "y 2", "dx", "dh 1", "dh 2", "dw 1", "dw 2"};
  for (size_t i = 0; i < fused.size(); ++i) {
    INFO(what[i] << ", p " << p << (use_last_norm ? "" : ", the last norm unused"));
    REQUIRE(fused[i].defined() == composed[i].defined());
    if (fused[i].defined()) CHECK(max_abs_diff(fused[i], composed[i]) == 0.0);
  }
  CHECK(fused[8].defined() == use_last_norm);  // no gradient for an unused norm's weight
}

TEST_CASE("a residual sum and its norm as one op equal residual_dropout then rms_norm bit for bit, CPU and cuda") {
  const bool on_cuda = cuda_half();
  for (double p : {0.0, 0.1})
    for (bool use_last_norm : {true, false}) {
      check_residual_norm(Device::Cpu, DType::F64, p, use_last_norm);
      check_residual_norm(Device::Cpu, DType::F32, p, use_last_norm);
      if (on_cuda) check_residual_norm(Device::Cuda, DType::F32, p, use_last_norm);
    }
}

TEST_CASE("norm, conv and rope forwards agree in float32 and float64") {
  Tensor x = randn64({2, 5, 3, 8}), w = rand64({8}, 0.5, 1.5), cw = randn64({8, 4});
  auto f32 = [](const Tensor& t) { return Var(t.to(DType::F32)); };
  CHECK(max_abs_diff(rms_norm(f32(x), f32(w)).data(), rms_norm(Var(x), Var(w)).data()) < 1e-5);
  CHECK(max_abs_diff(l2_norm(f32(x)).data(), l2_norm(Var(x)).data()) < 1e-6);
  CHECK(max_abs_diff(l2_norm(f32(x), 1e-12, 0.25).data(), l2_norm(Var(x), 1e-12, 0.25).data()) <
        1e-6);
  CHECK(max_abs_diff(rope(f32(x), 7).data(), rope(Var(x), 7).data()) < 1e-5);
  Tensor xc = x.reshape({2, 15, 8});
  CHECK(max_abs_diff(causal_conv1d(f32(xc), f32(cw)).data(), causal_conv1d(Var(xc), Var(cw)).data()) <
        1e-5);
  CHECK(max_abs_diff(causal_conv1d_silu(f32(xc), f32(cw)).data(), causal_conv1d_silu(Var(xc), Var(cw)).data()) <
        1e-5);
}

// Rows of whole SIMD vectors (a head of 32, n_embd 128) sum in float lanes in
// float32 (norm_conv_rope.cpp, row_dot); other lengths, and float64, in double.
TEST_CASE("rms_norm and l2_norm on rows of 32 and 128: float32 agrees with float64, forward and gradients") {
  for (int64_t n : {32, 128}) {
    INFO("n = " << n);
    Tensor x = randn64({3, 7, n}), w = rand64({n}, 0.5, 1.5), r = randn64({3, 7, n});
    auto run = [&](DType t, bool l2) {
      Var xv(x.to(t), true), wv(w.to(t), true);
      Var y = l2 ? l2_norm(xv, 1e-12, 0.25) : rms_norm(xv, wv);
      sum_all(mul(y, Var(r.to(t)))).backward();
      return std::vector<Tensor>{y.data().to(DType::F64), xv.grad().to(DType::F64),
                                 l2 ? Tensor::zeros({n}) : wv.grad().to(DType::F64)};
    };
    for (bool l2 : {false, true}) {
      const char* op = l2 ? "l2_norm" : "rms_norm";
      INFO(op);
      std::vector<Tensor> f32 = run(DType::F32, l2), f64 = run(DType::F64, l2);
      CHECK(max_abs_diff(f32[0], f64[0]) < 2e-6);
      CHECK(max_abs_diff(f32[1], f64[1]) < 2e-6);
      CHECK(max_abs_diff(f32[2], f64[2]) < 2e-5);  // dw sums 21 rows
    }
  }
}

TEST_CASE("norm, conv and rope errors name the op and the shapes") {
  Var x(Tensor::zeros({2, 3, 4}, DType::F64));
  CHECK_THROWS_WITH_AS(rms_norm(x, Var(Tensor::ones({5}, DType::F64))),
                       "rms_norm: weight [5] does not match last dim of [2, 3, 4]", Error);
  CHECK_THROWS_WITH_AS(rope(Var(Tensor::zeros({1, 2, 1, 5}, DType::F64))),
                       doctest::Contains("rope: head dim D = 5 of [1, 2, 1, 5] must be even"), Error);
  CHECK_THROWS_WITH_AS(rope(x), doctest::Contains("rope: expected x [B, T, H, D]"), Error);
  CHECK_THROWS_WITH_AS(causal_conv1d(x, Var(Tensor::zeros({3, 4}, DType::F64))),
                       doctest::Contains("causal_conv1d: weight [3, 4] is not [C, K] with C = 4"),
                       Error);
  CHECK_THROWS_WITH_AS(causal_conv1d(Var(Tensor::zeros({2, 4}, DType::F64)),
                                     Var(Tensor::zeros({4, 4}, DType::F64))),
                       doctest::Contains("causal_conv1d: expected x [B, T, C]"), Error);
  CHECK_THROWS_WITH_AS(causal_conv1d_silu(x, Var(Tensor::zeros({3, 4}, DType::F64))),
                       doctest::Contains("causal_conv1d_silu: weight [3, 4] is not [C, K] with C = 4"),
                       Error);
  CHECK_THROWS_WITH_AS(rms_norm(x, Var(Tensor::ones({4}, DType::F32))),
                       doctest::Contains("rms_norm: dtype mismatch"), Error);
}
