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

GradcheckResult gradient_error(const Fn& f, const std::vector<Tensor>& inputs,
                               std::vector<bool> differentiable, const GradcheckSettings& s) {
  GradcheckResult result;
  if (differentiable.empty())
    for (const Tensor& t : inputs) differentiable.push_back(t.dtype() == DType::f64);
  std::vector<Var> vars;
  for (size_t i = 0; i < inputs.size(); ++i)
    vars.emplace_back(inputs[i].clone(), bool(differentiable[i]), "input" + std::to_string(i));

  Var out = f(vars);
  REQUIRE_MESSAGE(out.dtype() == DType::f64, "gradient checks run in float64");
  auto worse = [&](double err, const std::string& where) {
    if (std::isnan(err)) err = INFINITY;
    if (err > result.worst || result.where.empty()) result = {std::max(err, result.worst), where};
  };
  Rng rng(7);
  Tensor R = Tensor::randn(out.shape(), rng, 1.0, 0.0, DType::f64);
  Var loss = sum_all(mul(out, Var(R)));
  loss.backward();

  Rng dir_rng(11);
  for (size_t i = 0; i < vars.size(); ++i) {
    if (!differentiable[i]) continue;
    Tensor& x = vars[i].data();
    if (!vars[i].grad().defined()) {
      worse(INFINITY, "input " + std::to_string(i) + " received no gradient");
      continue;
    }
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
      worse(err, "input " + std::to_string(i) + " " + x.describe() + ", direction " + std::to_string(d) +
                     ": numeric " + std::to_string(numeric) + " vs analytic " + std::to_string(analytic));
    }
  }
  return result;
}

void check_gradients(const Fn& f, const std::vector<Tensor>& inputs,
                     std::vector<bool> differentiable, const GradcheckSettings& s) {
  const GradcheckResult r = gradient_error(f, inputs, std::move(differentiable), s);
  CHECK_MESSAGE(r.worst <= s.tolerance, "worst: " << r.where << " (error " << r.worst << ")");
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

std::vector<std::string> ops_without_gradcheck(const std::vector<GradcheckRow>& rows) {
  std::vector<int> count(size_t(OpKind::Count), 0);
  for (const GradcheckRow& row : rows) count[size_t(row.op)]++;
  std::vector<std::string> missing;
  for (int k = 0; k < int(OpKind::Count); ++k)
    if (count[size_t(k)] == 0) missing.push_back(op_name(OpKind(k)));
  return missing;
}

void run_gradchecks(const std::vector<GradcheckRow>& rows) {
  for (const GradcheckRow& row : rows) {
    INFO("gradcheck of op '" << std::string(op_name(row.op)) << "': " << row.what);
    row.run();
  }
}

}  // namespace lina::test
