#include "tests/gradcheck.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

namespace lina::test {


// L(inputs) = Σ f(inputs) ⊙ R, evaluated without recording a graph.
static double loss_value(const Fn& f, const std::vector<Var>& vars, const Tensor& R) {
  NoGradGuard no_grad;
  Var out = f(vars);
  const double* o = out.data().data<double>();
  const double* r = R.data<double>();
  double s = 0;
  for (int64_t i = 0; i < R.numel(); ++i) s += o[i] * r[i];
  return s;
}

void check_gradients(const Fn& f, const std::vector<Tensor>& inputs,
                     std::vector<bool> differentiable, const GradcheckSettings& s) {
  if (differentiable.empty())
    for (const Tensor& t : inputs) differentiable.push_back(t.dtype() == DType::f64);
  std::vector<Var> vars;
  for (size_t i = 0; i < inputs.size(); ++i)
    vars.emplace_back(inputs[i].clone(), bool(differentiable[i]), "input" + std::to_string(i));

  Var out = f(vars);
  REQUIRE_MESSAGE(out.dtype() == DType::f64, "gradient checks run in float64");
  Rng rng(7);
  Tensor R = Tensor::randn(out.shape(), rng, 1.0, 0.0, DType::f64);
  Var loss = sum_all(mul(out, Var(R)));
  loss.backward();

  Rng dir_rng(11);
  for (size_t i = 0; i < vars.size(); ++i) {
    if (!differentiable[i]) continue;
    Tensor& x = vars[i].data();
    REQUIRE_MESSAGE(vars[i].grad().defined(), "input " << i << " received no gradient");
    const double* g = vars[i].grad().data<double>();
    double* xp = x.data<double>();
    int64_t n = x.numel();
    // Directions: unit vectors for small tensors, random ones for larger.
    bool exhaustive = n <= s.exhaustive_up_to;
    int count = exhaustive ? int(n) : s.directions;
    for (int d = 0; d < count; ++d) {
      std::vector<double> u(size_t(n), 0.0);
      if (exhaustive) u[size_t(d)] = 1.0;
      else for (auto& v : u) v = dir_rng.normal();
      std::vector<double> saved(xp, xp + n);
      for (int64_t j = 0; j < n; ++j) xp[j] = saved[size_t(j)] + s.eps * u[size_t(j)];
      double lp = loss_value(f, vars, R);
      for (int64_t j = 0; j < n; ++j) xp[j] = saved[size_t(j)] - s.eps * u[size_t(j)];
      double lm = loss_value(f, vars, R);
      std::copy(saved.begin(), saved.end(), xp);
      double numeric = (lp - lm) / (2 * s.eps);
      double analytic = 0;
      for (int64_t j = 0; j < n; ++j) analytic += g[j] * u[size_t(j)];
      double err = std::fabs(numeric - analytic) / std::max(1.0, std::fabs(analytic));
      CHECK_MESSAGE(err <= s.tolerance, "input " << i << " " << x.describe() << ", direction "
                                                 << d << ": numeric " << numeric << " vs analytic "
                                                 << analytic << " (error " << err << ")");
    }
  }
}

static std::vector<GradcheckRow>& registry() {
  static std::vector<GradcheckRow> rows;
  return rows;
}

int register_gradchecks(const std::vector<GradcheckRow>& rows) {
  registry().insert(registry().end(), rows.begin(), rows.end());
  return int(rows.size());
}

const std::vector<GradcheckRow>& gradcheck_registry() { return registry(); }

void run_gradchecks(const std::vector<GradcheckRow>& rows) {
  for (const GradcheckRow& row : rows) {
    INFO("gradcheck of op '" << std::string(op_name(row.op)) << "': " << row.what);
    row.run();
  }
}

}  // namespace lina::test
