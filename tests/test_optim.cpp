// ParameterStore (one buffer, named views), AdamW against hand-computed
// updates, gradient clipping and the learning-rate schedule.
#include <array>
#include <doctest/doctest.h>

#include <cmath>

#include "autograd/functions.h"
#include "dispatch/dispatch.h"
#include "models/optim.h"
#include "models/parameters.h"

using namespace lina;

namespace {

// A finalized store of dtype T: "w" [2] (decayed) = [0.5, -1.5] and
// "b" [1] (not decayed) = [2.0], values written before finalize().
template <class T>
ParameterStore two_parameter_store() {
  ParameterStore store;
  Var w = store.add("w", {2}, /*weight_decay=*/true);
  Var b = store.add("b", {1}, /*weight_decay=*/false);
  w.data().copy_from(Tensor::from_vector<double>({0.5, -1.5}, {2}));
  b.data().copy_from(Tensor::from_vector<double>({2.0}, {1}));
  store.finalize(dtype_of<T>());
  return store;
}

// Writes gradient values for (w[0], w[1], b[0]) into the gradient buffer.
template <class T>
void set_grads(ParameterStore& store, std::vector<T> g) {
  store.grad().copy_from(Tensor::from_vector<T>(g, {3}));
}

// The AdamW update of one scalar, written out from the definition.
struct Scalar {
  double p, m = 0, v = 0;
};
void adamw_by_hand(Scalar& s, double g, int t, double lr, double wd, const AdamWConfig& c) {
  s.p = s.p - lr * wd * s.p;
  s.m = c.beta1 * s.m + (1 - c.beta1) * g;
  s.v = c.beta2 * s.v + (1 - c.beta2) * g * g;
  double m_hat = s.m / (1 - std::pow(c.beta1, t));
  double v_hat = s.v / (1 - std::pow(c.beta2, t));
  s.p = s.p - lr * m_hat / (std::sqrt(v_hat) + c.eps);
}

}  // namespace

// ---- ParameterStore -------------------------------------------------------------------------

TEST_CASE_TEMPLATE("ParameterStore: names, order, offsets and count", T, float, double) {
  ParameterStore store;
  store.add("tok_emb.weight", {5, 3}, true);
  store.add("norm_f.weight", {3}, false);
  store.add("head.weight", {5, 3}, true);
  CHECK(store.count() == 33);
  CHECK_FALSE(store.finalized());
  store.finalize(dtype_of<T>());
  const auto& ps = store.parameters();
  REQUIRE(ps.size() == 3);
  CHECK(ps[0].name == "tok_emb.weight");
  CHECK(ps[1].name == "norm_f.weight");
  CHECK(ps[2].name == "head.weight");
  CHECK(ps[1].offset == 15);
  CHECK(ps[2].offset == 18);
  CHECK(ps[0].weight_decay);
  CHECK_FALSE(ps[1].weight_decay);
  CHECK(store.get("head.weight").shape() == Shape{5, 3});
  CHECK(store.get("norm_f.weight").name() == "norm_f.weight");
  CHECK(store.get("norm_f.weight").requires_grad());
  CHECK(store.get("norm_f.weight").dtype() == dtype_of<T>());
  CHECK(store.data().shape() == Shape{33});
  CHECK(store.grad().shape() == Shape{33});
}

TEST_CASE_TEMPLATE("ParameterStore: views share one buffer", T, float, double) {
  ParameterStore store = two_parameter_store<T>();
  Var w = store.get("w"), b = store.get("b");
  // values written before finalize() were carried into the buffer
  CHECK(store.data().to_vector<T>() == std::vector<T>{T(0.5), T(-1.5), T(2.0)});
  CHECK(w.data().same_storage(store.data()));
  CHECK(b.data().same_storage(store.data()));
  CHECK(w.grad().same_storage(store.grad()));
  // writing through a view changes the buffer, and the other way round
  b.data().data<T>()[0] = T(7);
  CHECK(store.data().at(2) == 7.0);
  store.data().data<T>()[1] = T(-3);
  CHECK(w.data().at(1) == -3.0);
  // a Var kept by a layer before finalize() sees the buffer too
  ParameterStore late;
  Var kept = late.add("x", {2}, true);
  late.finalize(dtype_of<T>());
  late.data().data<T>()[0] = T(4);
  CHECK(kept.data().at(0) == 4.0);
  late.to(Device::Cpu);  // already there: nothing moves
  CHECK(kept.data().same_storage(late.data()));
}

TEST_CASE_TEMPLATE("ParameterStore: backward accumulates into the gradient buffer", T, float,
                   double) {
  ParameterStore store = two_parameter_store<T>();
  Var w = store.get("w"), b = store.get("b");
  auto loss = [&] { return sum_all(w * w) + sum_all(mul_scalar(b, 3.0)); };  // dw = 2w, db = 3
  loss().backward();
  CHECK(store.grad().to_vector<T>() == std::vector<T>{T(1.0), T(-3.0), T(3.0)});
  CHECK(w.grad().same_storage(store.grad()));
  loss().backward();  // accumulates
  CHECK(store.grad().to_vector<T>() == std::vector<T>{T(2.0), T(-6.0), T(6.0)});
  store.zero_grad();
  CHECK(store.grad().to_vector<T>() == std::vector<T>{T(0), T(0), T(0)});
  CHECK(w.grad().same_storage(store.grad()));  // views kept
  loss().backward();
  CHECK(store.grad().to_vector<T>() == std::vector<T>{T(1.0), T(-3.0), T(3.0)});
}

TEST_CASE("ParameterStore: errors") {
  ParameterStore store;
  store.add("w", {2}, true);
  CHECK_THROWS_WITH_AS(store.add("w", {3}, true),
                       doctest::Contains("duplicate parameter name 'w'"), Error);
  CHECK_THROWS_WITH_AS(store.get("nope"), doctest::Contains("no parameter named 'nope'"), Error);
  CHECK_THROWS_WITH_AS(store.data(), doctest::Contains("call finalize() first"), Error);
  CHECK_THROWS_WITH_AS(AdamW{store}, doctest::Contains("must be finalized"), Error);
  CHECK_THROWS_WITH_AS(store.finalize(DType::I32), doctest::Contains("must be float"), Error);
  store.finalize(DType::F64);
  CHECK_THROWS_WITH_AS(store.add("v", {2}, true), doctest::Contains("after finalize()"), Error);
  CHECK_THROWS_WITH_AS(store.finalize(DType::F64), doctest::Contains("already finalized"), Error);
  // Var::zero_grad detaches the grad from the buffer: the optimiser refuses
  Var w = store.get("w");
  w.zero_grad();
  sum_all(w * w).backward();
  AdamW opt(store);
  CHECK_THROWS_WITH_AS(opt.update(1e-3), doctest::Contains("gradient of 'w' is not in the gradient buffer"),
                       Error);
  CHECK_THROWS_WITH_AS(clip_grad_norm(store, 1.0), doctest::Contains("clip_grad_norm"), Error);
  store.zero_grad();  // re-attaches
  CHECK_NOTHROW(opt.update(1e-3));
}

// ---- AdamW --------------------------------------------------------------------------------

TEST_CASE("AdamW: one step matches the hand-computed update (float64)") {
  ParameterStore store = two_parameter_store<double>();
  set_grads<double>(store, {0.1, -0.2, 0.3});
  // β1 0.9, β2 0.99, eps 1e-8, wd 0.1 on the decay parameters only (spec 1's optimiser)
  AdamWConfig cfg{1e-3, 0.9, 0.99, 1e-8, 0.1, /*decay_all=*/false};
  AdamW opt(store, cfg);
  const double lr = 0.01;
  opt.update(lr);
  CHECK(opt.update_count() == 1);
  // At t = 1: m̂ = g and v̂ = g², so p ← p(1 − lr·wd) − lr·g/(|g| + eps) (wd = 0 for b).
  std::vector<double> p = store.data().to_vector<double>();
  CHECK(std::abs(p[0] - (0.5 * (1 - lr * 0.1) - lr * 0.1 / (0.1 + 1e-8))) < 1e-12);
  CHECK(std::abs(p[1] - (-1.5 * (1 - lr * 0.1) - lr * -0.2 / (0.2 + 1e-8))) < 1e-12);
  CHECK(std::abs(p[2] - (2.0 - lr * 0.3 / (0.3 + 1e-8))) < 1e-12);
  // moments: m = (1 − β1) g, v = (1 − β2) g², addressable by name
  CHECK(std::abs(opt.first_moment("w").at(1) - 0.1 * -0.2) < 1e-15);
  CHECK(std::abs(opt.second_moment("b").at(0) - 0.01 * 0.09) < 1e-15);
  CHECK(opt.first_moment().shape() == Shape{3});
}

TEST_CASE("AdamW: the update's numbers from memory give the same step, and wrong ones are refused") {
  ParameterStore a = two_parameter_store<double>(), b = two_parameter_store<double>();
  set_grads<double>(a, {0.1, -0.2, 0.3});
  set_grads<double>(b, {0.1, -0.2, 0.3});
  AdamWConfig cfg{1e-3, 0.9, 0.99, 1e-8, 0.1, /*decay_all=*/false};
  AdamW by_lr(a, cfg), by_numbers(b, cfg);
  by_lr.update(0.01);
  const std::array<double, 3> n = by_numbers.scalars(0.01, 1);
  by_numbers.update(Tensor::from_vector(std::vector<double>(n.begin(), n.end()), {3}), Tensor());
  CHECK(a.data().to_vector<double>() == b.data().to_vector<double>());
  CHECK_THROWS_WITH_AS(by_numbers.update(Tensor::zeros({2}, DType::F64), Tensor()),
                       doctest::Contains("AdamW::update: the update's numbers must be 3 values on cpu"), Error);
  CHECK_THROWS_WITH_AS(by_numbers.update(Tensor(), Tensor()), doctest::Contains("got none"), Error);
}

TEST_CASE("AdamW: two steps use the bias corrections of t = 2 (float64)") {
  ParameterStore store = two_parameter_store<double>();
  AdamWConfig cfg;
  cfg.weight_decay = 0.05;
  cfg.beta2 = 0.99;
  cfg.decay_all = false;  // b is not decayed
  AdamW opt(store, cfg);
  Scalar s[3] = {{0.5}, {-1.5}, {2.0}};
  const double wd[3] = {0.05, 0.05, 0.0};
  const double g1[3] = {0.1, -0.2, 0.3}, g2[3] = {-0.4, 0.05, 0.3};
  const double lr1 = 0.01, lr2 = 0.02;

  set_grads<double>(store, {g1[0], g1[1], g1[2]});
  opt.update(lr1);
  for (int i = 0; i < 3; ++i) adamw_by_hand(s[i], g1[i], 1, lr1, wd[i], cfg);
  store.zero_grad();
  set_grads<double>(store, {g2[0], g2[1], g2[2]});
  opt.update(lr2);
  for (int i = 0; i < 3; ++i) adamw_by_hand(s[i], g2[i], 2, lr2, wd[i], cfg);

  CHECK(opt.update_count() == 2);
  std::vector<double> p = store.data().to_vector<double>();
  std::vector<double> m = opt.first_moment().to_vector<double>();
  std::vector<double> v = opt.second_moment().to_vector<double>();
  for (int i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(std::abs(p[i] - s[i].p) < 1e-12);
    CHECK(std::abs(m[i] - s[i].m) < 1e-15);
    CHECK(std::abs(v[i] - s[i].v) < 1e-15);
  }
  // e.g. w[0] at t = 2, written out in full:
  double m2 = 0.9 * (0.1 * 0.1) + 0.1 * -0.4, v2 = 0.99 * (0.01 * 0.01) + 0.01 * 0.16;
  double p1 = 0.5 * (1 - lr1 * 0.05) - lr1 * 0.1 / (0.1 + 1e-8);
  double p2 = p1 * (1 - lr2 * 0.05) -
              lr2 * (m2 / (1 - 0.81)) / (std::sqrt(v2 / (1 - 0.9801)) + 1e-8);
  CHECK(std::abs(p[0] - p2) < 1e-12);
}

TEST_CASE("AdamW: restoring moments and update count continues the same run") {
  ParameterStore a = two_parameter_store<double>(), b = two_parameter_store<double>();
  AdamW opt_a(a), opt_b(b);
  set_grads<double>(a, {0.1, -0.2, 0.3});
  opt_a.update(0.01);
  // copy a's state into b, as a checkpoint would
  b.data().copy_from(a.data());
  opt_b.first_moment().copy_from(opt_a.first_moment());
  opt_b.second_moment().copy_from(opt_a.second_moment());
  opt_b.set_update_count(opt_a.update_count());
  set_grads<double>(a, {-0.3, 0.2, 0.1});
  set_grads<double>(b, {-0.3, 0.2, 0.1});
  opt_a.update(0.01);
  opt_b.update(0.01);
  CHECK(a.data().to_vector<double>() == b.data().to_vector<double>());
}

TEST_CASE_TEMPLATE("AdamW: weight decay only on parameters added with decay = true", T, float,
                   double) {
  // decay, no decay, decay: three runs of the kernel
  ParameterStore store;
  store.add("a", {2}, true);
  store.add("n", {1}, false);
  store.add("c", {1, 2}, true);
  store.finalize(dtype_of<T>());
  store.data().copy_from(Tensor::from_vector<T>({1, -2, 3, 4, -5}, {5}));
  AdamWConfig cfg;
  cfg.weight_decay = 0.5;
  cfg.decay_all = false;  // --decay-matrices
  AdamW opt(store, cfg);
  opt.update(0.1);  // zero gradients: only the decay moves anything, p ← p(1 − 0.05)
  std::vector<T> p = store.data().to_vector<T>();
  CHECK(p[0] == T(1) * (T(1) - T(0.05)));
  CHECK(p[1] == T(-2) * (T(1) - T(0.05)));
  CHECK(p[2] == T(3));  // not decayed
  CHECK(p[3] == T(4) * (T(1) - T(0.05)));
  CHECK(p[4] == T(-5) * (T(1) - T(0.05)));
}

TEST_CASE("AdamW's defaults are PyTorch's: β2 0.999, weight decay 0.01 on every parameter") {
  AdamWConfig cfg;
  CHECK(cfg.beta1 == 0.9);
  CHECK(cfg.beta2 == 0.999);
  CHECK(cfg.eps == 1e-8);
  CHECK(cfg.weight_decay == 0.01);
  ParameterStore store = two_parameter_store<double>();  // b is added with decay = false
  AdamW opt(store, cfg);
  opt.update(0.1);  // zero gradients: every parameter, b included, decays by lr · wd
  std::vector<double> p = store.data().to_vector<double>();
  CHECK(p[2] == doctest::Approx(2.0 * (1 - 0.1 * 0.01)).epsilon(1e-14));
  CHECK(p[0] == doctest::Approx(0.5 * (1 - 0.1 * 0.01)).epsilon(1e-14));
}

TEST_CASE("AdamW: float32 matches the float64 update to float rounding") {
  ParameterStore s32 = two_parameter_store<float>();
  ParameterStore s64 = two_parameter_store<double>();
  AdamW o32(s32), o64(s64);
  for (int t = 0; t < 3; ++t) {
    set_grads<float>(s32, {0.1f, -0.2f, 0.3f});
    set_grads<double>(s64, {double(0.1f), double(-0.2f), double(0.3f)});
    o32.update(0.01);
    o64.update(0.01);
  }
  for (int i = 0; i < 3; ++i)
    CHECK(s32.data().at(i) == doctest::Approx(s64.data().at(i)).epsilon(1e-6));
}

// ---- gradient clipping ----------------------------------------------------------------------

TEST_CASE_TEMPLATE("clip_grad_norm scales above the limit and leaves the rest", T, float, double) {
  ParameterStore store = two_parameter_store<T>();
  set_grads<T>(store, {T(3), T(0), T(4)});  // global norm 5 across two parameters
  CHECK(clip_grad_norm(store, 10.0) == doctest::Approx(5.0));
  CHECK(store.grad().to_vector<T>() == std::vector<T>{T(3), T(0), T(4)});

  double norm = clip_grad_norm(store, 1.0);
  CHECK(norm == doctest::Approx(5.0));
  double coef = 1.0 / (5.0 + 1e-6);
  std::vector<T> g = store.grad().to_vector<T>();
  CHECK(g[0] == doctest::Approx(3 * coef).epsilon(1e-6));
  CHECK(g[1] == 0);
  CHECK(g[2] == doctest::Approx(4 * coef).epsilon(1e-6));
  CHECK(std::sqrt(double(g[0]) * g[0] + double(g[2]) * g[2]) == doctest::Approx(1.0).epsilon(1e-5));
  CHECK(store.get("b").grad().at(0) == doctest::Approx(4 * coef).epsilon(1e-6));  // views see it
  // max_norm 0: no clipping (the course's recipe), the norm still measured
  set_grads<T>(store, {T(3), T(0), T(4)});
  CHECK(clip_grad_norm(store, 0.0) == doctest::Approx(5.0));
  CHECK(store.grad().to_vector<T>() == std::vector<T>{T(3), T(0), T(4)});
  CHECK_THROWS_WITH_AS(clip_grad_norm(store, -1.0), doctest::Contains("max_norm must not be negative"),
                       Error);
}

TEST_CASE_TEMPLATE("AdamW clipping on the way equals clip_grad_norm then the step, bit for bit", T, float,
                   double) {
  for (double max_norm : {0.0, 1.0, 10.0}) {  // none, above the limit (norm 5), below it
    CAPTURE(max_norm);
    ParameterStore a = two_parameter_store<T>(), b = two_parameter_store<T>();
    set_grads<T>(a, {T(3), T(0), T(4)});
    set_grads<T>(b, {T(3), T(0), T(4)});
    AdamWConfig cfg{1e-3, 0.9, 0.99, 1e-8, 0.1, /*decay_all=*/false};
    AdamW clipped_first(a, cfg), clipped_inside(b, cfg);
    const std::array<double, 3> n = clipped_first.scalars(0.01, 1);
    const Tensor scalars = Tensor::from_vector(std::vector<double>(n.begin(), n.end()), {3}).to(dtype_of<T>());
    clip_grad_norm(a, max_norm);
    clipped_first.update(scalars, Tensor());
    const Tensor sum_of_squares = dispatch::sum_squares_on_device(b.grad());
    clipped_inside.update(scalars, Tensor(), sum_of_squares, max_norm);
    CHECK(a.data().to_vector<T>() == b.data().to_vector<T>());
    CHECK(clipped_first.first_moment().to_vector<T>() == clipped_inside.first_moment().to_vector<T>());
    CHECK(clipped_first.second_moment().to_vector<T>() == clipped_inside.second_moment().to_vector<T>());
    CHECK(b.grad().to_vector<T>() == std::vector<T>{T(3), T(0), T(4)});  // the buffer as it was
    const double m0 = double(clipped_inside.first_moment().to_vector<T>()[0]);  // (1 − β1) · 3 · factor
    CHECK(m0 == doctest::Approx(0.1 * 3 * (max_norm == 1.0 ? 1.0 / 5 : 1.0)).epsilon(1e-5));
  }
}

// ---- learning-rate schedule -------------------------------------------------------------------

TEST_CASE("lr_at: 100 warm-up updates, cosine to 1e-4 at update 4999 of 5000") {
  auto lr = [](int64_t s) { return lr_at(s, 5000, 1e-3, 1e-4, 100); };
  CHECK(lr(0) == doctest::Approx(1e-5).epsilon(1e-14));
  CHECK(lr(49) == doctest::Approx(5e-4).epsilon(1e-14));
  CHECK(lr(99) == 1e-3);
  CHECK(lr(100) == 1e-3);  // progress 0: the peak
  // halfway through the decay: (max + min) / 2
  CHECK(lr(100 + 4899 / 2) == doctest::Approx(5.5e-4).epsilon(1e-3));
  CHECK(lr(4999) == 1e-4);  // exactly
  CHECK(lr(6000) == 1e-4);  // past the end: stays at the minimum
  for (int64_t s = 0; s < 99; ++s) REQUIRE(lr(s + 1) > lr(s));
  for (int64_t s = 100; s < 4999; ++s) REQUIRE(lr(s + 1) < lr(s));
}

TEST_CASE("lr_at: edge cases") {
  // no warm-up: the decay starts at the peak
  CHECK(lr_at(0, 10, 1.0, 0.1, 0) == 1.0);
  CHECK(lr_at(9, 10, 1.0, 0.1, 0) == 0.1);
  // no room for decay (total − 1 <= warmup): warm-up rate, then the minimum
  CHECK(lr_at(4, 10, 1.0, 0.1, 10) == doctest::Approx(0.5));
  CHECK(lr_at(9, 10, 1.0, 0.1, 10) == 1.0);
  CHECK(lr_at(9, 10, 1.0, 0.1, 9) == 0.1);
  CHECK(lr_at(0, 1, 1.0, 0.1, 0) == 0.1);  // a single update is the last one
  CHECK_THROWS_WITH_AS(lr_at(-1, 10, 1.0, 0.1, 2), doctest::Contains("lr_at"), Error);
  CHECK_THROWS_WITH_AS(lr_at(0, 0, 1.0, 0.1, 2), doctest::Contains("lr_at"), Error);
}
