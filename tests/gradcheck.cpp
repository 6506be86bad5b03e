#include "tests/gradcheck.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "tests/op_check.h"

namespace lina::test {

// L(inputs) = Σ_k Σ f_k(inputs) ⊙ R_k, evaluated without recording a graph.
static double loss_value(const FnOutputs& f, const std::vector<Var>& vars, const std::vector<Tensor>& R) {
  NoGradGuard no_grad;
  const std::vector<Var> outs = f(vars);
  double s = 0;
  for (size_t k = 0; k < outs.size(); ++k) {
    if (!outs[k].defined() || !outs[k].data().defined()) continue;
    const double* o = outs[k].data().data<double>();
    const double* r = R[k].data<double>();
    for (int64_t i = 0; i < R[k].numel(); ++i) s += o[i] * r[i];
  }
  return s;
}

GradcheckResult gradient_error(const FnOutputs& f, const std::vector<Tensor>& inputs,
                               std::vector<bool> differentiable, const GradcheckSettings& s) {
  GradcheckResult result;
  if (differentiable.empty())
    for (const Tensor& t : inputs) differentiable.push_back(t.dtype() == DType::F64);
  std::vector<Var> vars;
  for (size_t i = 0; i < inputs.size(); ++i)
    vars.emplace_back(inputs[i].clone(), bool(differentiable[i]), "input" + std::to_string(i));

  const std::vector<Var> outs = f(vars);
  auto worse = [&](double err, const std::string& where) {
    if (std::isnan(err)) err = INFINITY;
    if (err > result.worst || result.where.empty()) result = {std::max(err, result.worst), where};
  };
  Rng rng(7);
  std::vector<Tensor> R;
  Var loss;
  for (const Var& out : outs) {
    if (!out.defined() || !out.data().defined()) {
      R.emplace_back();
      continue;
    }
    REQUIRE_MESSAGE(out.dtype() == DType::F64, "gradient checks run in float64");
    R.push_back(Tensor::randn(out.shape(), rng, 1.0, 0.0, DType::F64));
    Var term = sum_all(mul(out, Var(R.back())));
    loss = loss.defined() ? add(loss, term) : term;
  }
  REQUIRE_MESSAGE(loss.defined(), "the function has no output");
  loss.backward();
  // the loss's size: its terms, or an input's elements summed into fewer
  int64_t terms = 0, largest_input = 0;
  for (const Tensor& r : R) terms += r.defined() ? r.numel() : 0;
  for (const Tensor& x : inputs) largest_input = std::max(largest_input, x.defined() ? x.numel() : 0);
  const bool long_step = std::max(terms, largest_input) > s.long_step_above;
  const double eps = long_step ? s.long_step : s.eps;

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
      auto loss_at = [&](double step) {  // L(x + step·u)
        for (int64_t j = 0; j < n; ++j) xp[j] = saved[size_t(j)] + step * u[size_t(j)];
        return loss_value(f, vars, R);
      };
      const double central = loss_at(eps) - loss_at(-eps);
      const double numeric = long_step ? (8 * central - (loss_at(2 * eps) - loss_at(-2 * eps))) / (12 * eps)
                                       : central / (2 * eps);
      std::copy(saved.begin(), saved.end(), xp);
      double analytic = 0;
      for (int64_t j = 0; j < n; ++j) analytic += g[j] * u[size_t(j)];
      double err = std::fabs(numeric - analytic) / std::max(1.0, std::fabs(analytic));
      worse(err, "input " + std::to_string(i) + " " + x.describe() + ", direction " + std::to_string(d) +
                     ": numeric " + std::to_string(numeric) + " vs analytic " + std::to_string(analytic));
    }
  }
  return result;
}

GradcheckResult gradient_error(const Fn& f, const std::vector<Tensor>& inputs,
                               std::vector<bool> differentiable, const GradcheckSettings& s) {
  return gradient_error(FnOutputs([&f](const std::vector<Var>& v) { return std::vector<Var>{f(v)}; }),
                        inputs, std::move(differentiable), s);
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

void run_gradchecks(const std::vector<GradcheckRow>& rows) {
  for (const GradcheckRow& row : rows) {
    INFO("gradcheck of op '" << std::string(op_name(row.op)) << "': " << row.what);
    row.run();
  }
}

GradcheckResult row_gradient_error(const OpRow& row, const GradcheckSettings& settings) {
  const std::vector<Tensor> inputs = row_inputs(row, DType::F64, Device::Cpu);
  return gradient_error(row.run, inputs, row_differentiable(row, inputs), settings);
}

std::vector<OpKind> gradient_checked_ops(const std::vector<OpRow>& rows) {
  std::vector<OpKind> checked;
  for (const OpRow& row : rows)
    if (row.no_gradient.empty())
      if (std::optional<OpKind> kind = op_kind_named(row.op)) checked.push_back(*kind);
  for (const GradcheckRow& row : gradcheck_registry()) checked.push_back(row.op);
  return checked;
}

std::vector<std::string> ops_without_gradcheck(const std::vector<OpKind>& checked) {
  std::vector<int> count(size_t(OpKind::Count), 0);
  for (OpKind op : checked) count[size_t(op)]++;
  std::vector<std::string> missing;
  for (int k = 0; k < int(OpKind::Count); ++k)
    if (count[size_t(k)] == 0) missing.push_back(op_name(OpKind(k)));
  return missing;
}

}  // namespace lina::test
