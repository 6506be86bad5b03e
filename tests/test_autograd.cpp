// Tape semantics: accumulation, no-grad, repeated backward, graph dump.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/profile.h"
#include "tests/gradcheck.h"

using namespace lina;

TEST_CASE("a Var used twice accumulates both gradients") {
  Var x(Tensor::from_vector<double>({1.5, -2.0}, {2}), true, "x");
  Var y = sum_all(mul(x, x) + x);  // dy/dx = 2x + 1
  y.backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{4.0, -3.0});
}

TEST_CASE("gradients are summed in place only where no other gradient shares the buffer") {
  // add's backward hands h and k one tensor, dz; mul then sends h a second
  // gradient. Summed into that shared tensor in place, it would also land in
  // k's gradient. L = Σ(h + k) + Σ h², h = 2x, k = 3x: dL/dx = 5 + 8x.
  Var x(Tensor::from_vector<double>({1.5, -2.0}, {2}), true, "x");
  Var h = mul_scalar(x, 2.0), k = mul_scalar(x, 3.0);
  Var u = mul(h, h);
  Var z = add(h, k);  // recorded after u, so its backward runs first
  Var loss = add(sum_all(z), sum_all(u));
  loss.backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{5.0 + 8 * 1.5, 5.0 - 8 * 2.0});
}

TEST_CASE("a matmul adds dA into the gradient pending for A, with the GEMM's beta = 1") {
  // h = 2x feeds three products, as a mixer's normed input feeds q, k and v:
  // L = Σ h W1 + Σ h W2 + Σ h W3, so dL/dh = 1 (W1 + W2 + W3)ᵀ, dL/dx = 2 dL/dh.
  // The first product's backward makes h's gradient; the other two add into it.
  Tensor x0 = Tensor::from_vector<double>({1.0, -2.0, 0.5, 3.0, -1.0, 2.0}, {3, 2});
  Var x(x0, true, "x");
  std::vector<Var> w;
  for (int i = 0; i < 3; ++i)
    w.emplace_back(Tensor::from_vector<double>({0.5 * i, 1.0, -1.0, 2.0 - i, 0.25, 3.0}, {2, 3}), true);
  Var h = mul_scalar(x, 2.0);
  Var loss = add(add(sum_all(matmul(h, w[0])), sum_all(matmul(h, w[1]))), sum_all(matmul(h, w[2])));
  profile::reset();
  profile::set_enabled(true);
  loss.backward();
  profile::set_enabled(false);
  // two of the three dA products went into the pending gradient ("+=" in the profile)
  int added = 0;
  for (const profile::Entry& e : profile::entries())
    if (e.op == "matmul" && e.detail.find("+=") != std::string::npos) added += int(e.calls);
  profile::reset();
  CHECK(added == 2);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 2; ++c) {
      double row_sum = 0;  // Σ_j (W1 + W2 + W3)[c][j]
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) row_sum += w[size_t(i)].data().at(c * 3 + j);
      CHECK(x.grad().at(r * 2 + c) == doctest::Approx(2.0 * row_sum).epsilon(1e-14));
    }
  // and each weight's gradient is hᵀ 1, whichever path its product took
  for (int i = 0; i < 3; ++i)
    for (int c = 0; c < 2; ++c)
      for (int j = 0; j < 3; ++j) {
        double col_sum = 0;
        for (int r = 0; r < 3; ++r) col_sum += 2.0 * x0.at(r * 2 + c);
        CHECK(w[size_t(i)].grad().at(c * 3 + j) == doctest::Approx(col_sum).epsilon(1e-14));
      }
}

TEST_CASE("a matmul adds a weight's gradient into its .grad, in place, with the GEMM's beta = 1") {
  // L = Σ x W: dL/dW = xᵀ 1. The first backward gives W its .grad (nothing to
  // add into yet); the second adds the same gradient into that buffer with
  // the GEMM itself: no separate add, the buffer unchanged, twice the values.
  Tensor x0 = Tensor::from_vector<double>({1.0, -2.0, 0.5, 3.0, -1.0, 2.0}, {3, 2});
  Var x(x0, false, "x");
  Var w(Tensor::from_vector<double>({0.5, 1.0, -1.0, 2.0, 0.25, 3.0}, {2, 3}), true, "w");
  sum_all(matmul(x, w)).backward();
  const std::vector<double> once = w.grad().to_vector<double>();
  const double* buffer = w.grad().data<double>();
  profile::reset();
  profile::set_enabled(true);
  sum_all(matmul(x, w)).backward();
  profile::set_enabled(false);
  int added_by_gemm = 0, separate_adds = 0;
  for (const profile::Entry& e : profile::entries()) {
    if (e.op == "matmul" && e.detail.find("+=") != std::string::npos) added_by_gemm += int(e.calls);
    if (e.op == "add_inplace") separate_adds += int(e.calls);
  }
  profile::reset();
  CHECK(added_by_gemm == 1);
  CHECK(separate_adds == 0);
  CHECK(w.grad().data<double>() == buffer);
  for (int c = 0; c < 2; ++c)
    for (int j = 0; j < 3; ++j) {
      double col_sum = 0;  // Σ_r x[r][c]
      for (int r = 0; r < 3; ++r) col_sum += x0.at(r * 2 + c);
      CHECK(once[size_t(c * 3 + j)] == col_sum);
      CHECK(w.grad().at(c * 3 + j) == 2.0 * col_sum);
    }
}

TEST_CASE("stacked_rows: leaves stored back to back are one view, and their gradients land in their .grad") {
  // a [2, 3] and b [1, 3] one after the other in one data buffer and one
  // gradient buffer, as a ParameterStore lays out parameters registered in a
  // row. L = Σ (x Wᵀ)², W = [a; b]: the same gradients as through concat.
  Tensor data = Tensor::from_vector<double>({0.5, 1.0, -1.0, 2.0, 0.25, 3.0, -0.5, 1.5, 2.5}, {9});
  Tensor grads = Tensor::zeros({9}, DType::F64);
  Var a(Tensor::view_of(data, 0, {2, 3}), true, "a"), b(Tensor::view_of(data, 6, {1, 3}), true, "b");
  a.grad() = Tensor::view_of(grads, 0, {2, 3});
  b.grad() = Tensor::view_of(grads, 6, {1, 3});
  Tensor x0 = Tensor::from_vector<double>({1.0, -2.0, 0.5, 3.0, -1.0, 2.0}, {2, 3});
  auto loss = [&](const Var& x, const Var& w) {
    Var y = matmul(x, w, false, true);  // [2, 3]
    return sum_all(mul(y, y));
  };
  Var x(x0, true, "x");
  Var w = stacked_rows({a, b});
  CHECK(w.shape() == Shape{3, 3});
  CHECK(w.data().same_storage(data));  // no copy
  loss(x, w).backward();
  CHECK(grads.to_vector<double>() != std::vector<double>(9, 0.0));  // into the buffer

  Var a2(a.data().clone(), true), b2(b.data().clone(), true), x2(x0.clone(), true);
  loss(x2, concat({a2, b2}, 0)).backward();
  CHECK(a.grad().to_vector<double>() == a2.grad().to_vector<double>());
  CHECK(b.grad().to_vector<double>() == b2.grad().to_vector<double>());
  CHECK(x.grad().to_vector<double>() == x2.grad().to_vector<double>());

  // Not back to back (b, then a), or without gradient buffers: concat.
  CHECK(!stacked_rows({b, a}).data().same_storage(data));
  CHECK(!stacked_rows({a2, b2}).data().same_storage(a2.data()));
  CHECK(stacked_rows({b, a}).grad_fn() != nullptr);
}

TEST_CASE("no-grad mode records no graph") {
  Var x(Tensor::ones({3}, DType::F64), true);
  NoGradGuard guard;
  Var y = exp(x) * x;
  CHECK_FALSE(y.requires_grad());
  CHECK(y.grad_fn() == nullptr);
  CHECK(y.data().at(0) == doctest::Approx(std::exp(1.0)));
}

TEST_CASE("no-grad guard restores the previous mode") {
  {
    NoGradGuard outer;
    { NoGradGuard inner; }
    CHECK_FALSE(grad_enabled());
  }
  CHECK(grad_enabled());
}

TEST_CASE("backward twice after zero_grad gives the same gradient, without it twice the gradient") {
  Var w(Tensor::from_vector<double>({0.5, -1.0, 2.0, 0.25}, {2, 2}), true, "w");
  Var x(Tensor::from_vector<double>({1.0, 2.0}, {1, 2}));
  Var loss = sum_all(tanh(matmul(x, w)));
  loss.backward();
  std::vector<double> first = w.grad().to_vector<double>();
  w.zero_grad();
  loss.backward();
  CHECK(w.grad().to_vector<double>() == first);
  loss.backward();
  std::vector<double> doubled = w.grad().to_vector<double>();
  for (size_t i = 0; i < first.size(); ++i) CHECK(doubled[i] == doctest::Approx(2 * first[i]));
}

TEST_CASE("inputs without requires_grad get no gradient, and backward needs a scalar") {
  Var a(Tensor::ones({2}, DType::F64), true);
  Var b(Tensor::ones({2}, DType::F64), false);
  Var c = a * b;
  CHECK_THROWS_WITH_AS(c.backward(), doctest::Contains("needs a scalar"), Error);
  sum_all(c).backward();
  CHECK(a.grad().defined());
  CHECK_FALSE(b.grad().defined());
  Var leaf(Tensor::ones({1}, DType::F64));
  CHECK_THROWS_AS(leaf.backward(), Error);
}

TEST_CASE("backward(Graph::Free): outputs a caller holds keep their data, the rest goes, and a second backward is an error") {
  Var x(Tensor::from_vector<double>({1.0, -2.0, 3.0}, {3}), true, "x");
  Var h = mul_scalar(x, 2.0);                // held here: must stay readable
  Var loss = sum_all(exp(add_scalar(h, 1.0)));  // add_scalar's output: only the graph holds it
  Node* exp_node = loss.grad_fn()->inputs[0].grad_fn();
  Var shifted = exp_node->inputs[0];  // what exp read: after the line below, only the graph holds it
  const std::weak_ptr<VarImpl> shifted_impl = shifted.impl_ptr();
  shifted = Var();
  loss.backward(Graph::Free);
  for (int i = 0; i < 3; ++i) CHECK(x.grad().at(i) == doctest::Approx(2.0 * std::exp(2.0 * x.data().at(i) + 1.0)));
  CHECK(h.data().to_vector<double>() == std::vector<double>{2.0, -4.0, 6.0});
  CHECK(loss.item() == doctest::Approx(std::exp(3.0) + std::exp(-3.0) + std::exp(7.0)));
  CHECK(shifted_impl.expired());  // gone with the graph
  CHECK(loss.grad_fn() != nullptr);  // the root keeps its op; the ops below it are gone
  CHECK(h.grad_fn() == nullptr);
  CHECK_THROWS_WITH_AS(loss.backward(), doctest::Contains("freed by an earlier backward"), Error);
  // h's op was dropped too: a new graph through h cannot reach x any more.
  CHECK_THROWS_WITH_AS(sum_all(h).backward(), doctest::Contains("freed by an earlier backward"), Error);
}

TEST_CASE("ReleaseUnreadOutputs: an output only the graph holds goes during the forward, what a backward saved lives on in it") {
  Var x(Tensor::from_vector<double>({1.0, -2.0, 3.0}, {3}), true, "x");
  Var h = mul_scalar(x, 2.0);
  {  // outside the scope nothing goes: a debugger sees every tensor of the graph
    Var shifted = add_scalar(h, 1.0);
    Var z = neg(shifted);
    shifted = Var();
    CHECK(z.grad_fn()->inputs[0].data().defined());
  }
  ReleaseUnreadOutputs release_unread;
  Var shifted = add_scalar(h, 1.0);
  Var doubled = add(shifted, shifted);  // add saves nothing: no backward reads `shifted`
  Node* add_node = doubled.grad_fn();
  CHECK(add_node->inputs[0].data().defined());  // still held here
  shifted = Var();                              // the caller's last Var of it
  CHECK_FALSE(add_node->inputs[0].data().defined());
  CHECK(add_node->inputs[0].shape() == Shape{3});  // backward reads the shape
  Var e = exp(doubled);                         // exp saves its output (dy/dx = y)
  Node* exp_node = e.grad_fn();
  Var loss = sum_all(mul(e, e));                // mul saves both inputs
  Node* mul_node = loss.grad_fn()->inputs[0].grad_fn();
  e = Var();
  doubled = Var();
  CHECK_FALSE(mul_node->inputs[0].data().defined());  // the Var's hold is gone ...
  for (const auto& [field, saved] : mul_node->saved()) CHECK(saved.defined());  // ... not mul's copy
  CHECK_FALSE(exp_node->inputs[0].data().defined());
  CHECK(h.data().defined());  // a Var the caller holds keeps its data
  loss.backward(Graph::Free);
  // loss = Σ exp(2 · (2x + 1))² = Σ exp(8x + 4): dloss/dx = 8 exp(8x + 4)
  for (int i = 0; i < 3; ++i) {
    const double xi = x.data().at(i);
    CHECK(x.grad().at(i) == doctest::Approx(8.0 * std::exp(4.0 * (2.0 * xi + 1.0))));
  }
}

TEST_CASE("graph_dot names every op and shape") {
  Var x(Tensor::ones({2, 3}, DType::F64), true, "x");
  Var w(Tensor::ones({3, 4}, DType::F64), true, "w");
  Var loss = mean_all(relu(matmul(x, w)));
  std::string dot = graph_dot(loss);
  CHECK(dot.find("digraph") != std::string::npos);
  CHECK(dot.find("matmul") != std::string::npos);
  CHECK(dot.find("relu") != std::string::npos);
  CHECK(dot.find("mean") != std::string::npos);
  CHECK(dot.find("x\\nfloat64[2, 3]") != std::string::npos);
  CHECK(dot.find("float64[2, 4]") != std::string::npos);
}

TEST_CASE("a long chain does not overflow the stack in backward") {
  Var x(Tensor::ones({1}, DType::F64), true);
  Var y = x;
  for (int i = 0; i < 20000; ++i) y = add_scalar(y, 0.0);
  sum_all(y).backward();
  CHECK(x.grad().at(0) == 1.0);
}

TEST_CASE("tensor basics: creation, printing, errors") {
  Rng rng(1);
  Tensor t = Tensor::randn({2, 3}, rng);
  CHECK(t.dtype() == DType::F32);
  CHECK(t.describe() == "float32[2, 3] on cpu");
  Tensor f = Tensor::full({2}, 3.5, DType::F64);
  CHECK(f.to_vector<double>() == std::vector<double>{3.5, 3.5});
  CHECK(Tensor::from_vector<float>({7.f}, {}).item() == 7.0);
  CHECK(f.str().find("3.5") != std::string::npos);
  CHECK_THROWS_WITH_AS(Tensor::from_vector<float>({1, 2, 3}, {2, 2}),
                       doctest::Contains("do not fill shape [2, 2]"), Error);
  CHECK_THROWS_WITH_AS(f.data<float>(), doctest::Contains("float64"), Error);
  CHECK_THROWS_AS(f.item(), Error);
  // same seed, same numbers
  Rng r1(42), r2(42);
  CHECK(Tensor::randn({5}, r1).to_vector<float>() == Tensor::randn({5}, r2).to_vector<float>());
  // a view shares the buffer
  Tensor base = Tensor::zeros({6}, DType::F64);
  Tensor view = Tensor::view_of(base, 2, {2, 2});
  view.data<double>()[0] = 9.0;
  CHECK(base.at(2) == 9.0);
  CHECK_THROWS_AS(Tensor::view_of(base, 4, {2, 2}), Error);
}
