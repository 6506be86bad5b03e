// The scan op (docs/recurrence.md §5): float64 gradient checks of every rule ×
// form, a finite-difference check of the kernels' final-state and
// initial-state paths, the chunked form against the sequential reference
// (output, final state, saved chunk states and every gradient, in float64
// and float32, at the compiled and at run-time sizes), chunking consistency,
// hand-computed values and argument errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "dispatch/dispatch.h"
#include "dispatch/layout.h"
#include "tests/gradcheck.h"

using namespace lina;
using namespace lina::test;

namespace {

const ScanRule kRules[] = {ScanRule::Linear,    ScanRule::Delta,       ScanRule::Gdn,
                           ScanRule::Retnet, ScanRule::Mamba2, ScanRule::Gla};

std::string rule_name(ScanRule r) { return scan_rule_name(r); }

// Inputs in the model's regime (docs/recurrence.md §5.1), float64: q scaled by
// 1/√d, unit-norm keys for the delta rules, β = σ(N(0, 1)),
// log α = log σ(z) = −softplus(−z) with z ~ U(−3, 6), a random nonzero S_0.
struct ScanCase {
  Tensor q, k, v, beta, log_alpha, initial_state;
};

ScanCase make_case(ScanRule rule, int64_t B, int64_t T, int64_t H, int64_t d, Rng& rng) {
  const DType f64 = DType::F64;
  ScanCase c;
  c.q = Tensor::randn({B, T, H, d}, rng, 1.0 / std::sqrt(double(d)), 0.0, f64);
  c.k = Tensor::randn({B, T, H, d}, rng, 1.0 / std::sqrt(double(d)), 0.0, f64);
  c.v = Tensor::randn({B, T, H, d}, rng, 1.0, 0.0, f64);
  c.initial_state = Tensor::randn({B, H, d, d}, rng, 0.5, 0.0, f64);
  if (uses_beta(rule)) {
    double* k = c.k.data<double>();
    for (int64_t row = 0; row < B * T * H; ++row) {
      double norm = 0;
      for (int64_t j = 0; j < d; ++j) norm += k[row * d + j] * k[row * d + j];
      for (int64_t j = 0; j < d; ++j) k[row * d + j] /= std::sqrt(norm);
    }
    c.beta = Tensor::randn({B, T, H}, rng, 1.0, 0.0, f64);
    double* b = c.beta.data<double>();
    for (int64_t i = 0; i < c.beta.numel(); ++i) b[i] = 1.0 / (1.0 + std::exp(-b[i]));
  }
  if (learns_decay(rule)) {
    c.log_alpha = Tensor::rand(decays_per_channel(rule) ? Shape{B, T, H, d} : Shape{B, T, H}, rng,
                               -3.0, 6.0, f64);
    double* log_alpha = c.log_alpha.data<double>();
    for (int64_t i = 0; i < c.log_alpha.numel(); ++i) log_alpha[i] = -std::log1p(std::exp(-log_alpha[i]));
  }
  return c;
}

ScanOptions kernel_config(ScanRule rule, bool chunked, int chunk) {
  return ScanOptions{rule, chunked ? ScanForm::Chunked : ScanForm::Sequential, chunk};
}

// Host values as double, and a float64 tensor cast to `dtype` (whole-buffer
// copies: these tensors are large).
std::vector<double> values(const Tensor& t) {
  if (t.dtype() == DType::F64) return t.to_vector<double>();
  std::vector<float> v = t.to_vector<float>();
  return std::vector<double>(v.begin(), v.end());
}
Tensor cast(const Tensor& t, DType dtype) {
  if (!t.defined() || dtype == DType::F64) return t;
  std::vector<double> v = t.to_vector<double>();
  return Tensor::from_vector<float>(std::vector<float>(v.begin(), v.end()), t.shape());
}

// Forward and backward through the kernels for L = ⟨O, R1⟩ + ⟨S_T, R2⟩, so
// that the final-state path and dS_0 are exercised too.
// An undefined c.initial_state starts from S_0 = 0 and an undefined R2 gives no dS_T
// (the kernels then see null pointers, as in training).
struct ScanRun {
  Tensor o, final_state;
  dispatch::ScanSaved saved;  // states: S_0 … S_{T−1} [B, H, T, d, d] (sequential) or each chunk's entering state
  dispatch::ScanGrads grads;
};

ScanRun run_kernels(const ScanOptions& config, const ScanCase& c, const Tensor& R1,
                    const Tensor& R2, DType dtype = DType::F64) {
  ScanRun run;
  Tensor q = cast(c.q, dtype), k = cast(c.k, dtype), v = cast(c.v, dtype);
  Tensor beta = cast(c.beta, dtype), log_alpha = cast(c.log_alpha, dtype);
  run.o = dispatch::scan_forward(config, q, k, v, beta, log_alpha, cast(c.initial_state, dtype), run.final_state,
                                &run.saved);
  run.grads = dispatch::scan_backward(config, q, k, v, beta, log_alpha, run.saved, cast(R1, dtype),
                                     cast(R2, dtype));
  return run;
}

// u_t = β_t (v_t − a_t S_{t−1} k_t) of a delta rule (a_t = 1 without decay),
// [B, T, H, d], from the sequential form's saved states (S_{t−1} at index t):
// what the chunked form keeps as U.
Tensor write_vectors(ScanRule rule, const ScanCase& c, const Tensor& states) {
  const int64_t B = c.q.dim(0), T = c.q.dim(1), H = c.q.dim(2), d = c.q.dim(3);
  const ScanShape s{B, T, H, d, rule};
  Tensor u = Tensor::empty(c.q.shape(), DType::F64, Device::Cpu);
  const double *k = c.k.data<double>(), *v = c.v.data<double>(), *beta = c.beta.data<double>();
  const double* log_alpha = c.log_alpha.defined() ? c.log_alpha.data<double>() : nullptr;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t token = (b * T + t) * H + h;
        const double a = std::exp(scan_log_alpha(s, log_alpha, token, 0));
        const double* S = states.data<double>() + ((b * H + h) * T + t) * d * d;
        for (int64_t i = 0; i < d; ++i) {
          double Sk = 0;
          for (int64_t j = 0; j < d; ++j) Sk += S[i * d + j] * k[token * d + j];
          u.data<double>()[token * d + i] = beta[token] * (v[token * d + i] - a * Sk);
        }
      }
  return u;
}

// The sequential form's saved states at the start of every chunk of C
// tokens: what the chunked form saves.
Tensor states_at_chunk_starts(const Tensor& states, int64_t C) {
  std::vector<Tensor> starts;
  for (int64_t t = 0; t < states.dim(2); t += C) starts.push_back(slice(states, 2, t, 1));
  return concat(starts, 2);
}

double dot(const Tensor& a, const Tensor& b) {
  const double* x = a.data<double>();
  const double* y = b.data<double>();
  double s = 0;
  for (int64_t i = 0; i < a.numel(); ++i) s += x[i] * y[i];
  return s;
}

// Every output and gradient of `a` against `ref`: within tolerance·max|ref|
// (check_close), and with `each_rel` > 0 element by element as well,
// |a − ref| ≤ each_rel·|ref| + each_floor·max|ref| (check_each_close).
void check_all_close(const std::string& what, const ScanRun& a, const ScanRun& ref,
                     double tolerance, double floor = 0.0, double each_rel = 0, double each_floor = 0) {
  const std::pair<const char*, std::pair<const Tensor*, const Tensor*>> outputs[] = {
      {" o", {&a.o, &ref.o}},
      {" S_T", {&a.final_state, &ref.final_state}},
      {" dq", {&a.grads.dq, &ref.grads.dq}},
      {" dk", {&a.grads.dk, &ref.grads.dk}},
      {" dv", {&a.grads.dv, &ref.grads.dv}},
      {" dbeta", {&a.grads.dbeta, &ref.grads.dbeta}},
      {" dg", {&a.grads.dlog_alpha, &ref.grads.dlog_alpha}},
      {" dS_0", {&a.grads.dinitial_state, &ref.grads.dinitial_state}}};
  for (const auto& [name, pair] : outputs) {
    check_close(what + name, *pair.first, *pair.second, tolerance, floor);
    if (each_rel > 0) check_each_close(what + name, *pair.first, *pair.second, each_rel, each_floor);
  }
}

// float32 against float64, element by element: a 0.1 % error in any element
// larger than a tenth of the tensor's largest fails.
constexpr double kFloat32EachRel = 3e-4, kFloat32EachFloor = 5e-5;

// ---- gradient checks through the autograd op ----------------------------------------------

// Small sizes, chunk 4 so T = 7 and T = 10 end in a short chunk; the initial
// state is a constant of the op.
GradcheckRow scan_row(ScanRule rule, ScanForm form) {
  std::string what = rule_name(rule) +
                     (form == ScanForm::Chunked ? ", chunked C = 4" : ", sequential") +
                     ", [2, 7, 2, 4] and [2, 10, 2, 3]";
  return {OpKind::Scan, what, [=] {
            Rng rng(101 + int(rule) * 2 + int(form));
            const int64_t sizes[2][2] = {{7, 4}, {10, 3}};  // T, d
            for (const auto& size : sizes) {
              ScanCase c = make_case(rule, 2, size[0], 2, size[1], rng);
              ScanOptions options{rule, form, 4};
              std::vector<Tensor> inputs{c.q, c.k, c.v};
              if (uses_beta(rule)) inputs.push_back(c.beta);
              if (learns_decay(rule)) inputs.push_back(c.log_alpha);
              Tensor initial_state = c.initial_state;
              check_gradients(
                  [=](const std::vector<Var>& x) {
                    const size_t alpha = uses_beta(rule) ? 4 : 3;  // log α follows β when both
                    return scan(options, x[0], x[1], x[2], uses_beta(rule) ? x[3] : Var(),
                                learns_decay(rule) ? x[alpha] : Var(), initial_state);
                  },
                  inputs);
            }
          }};
}

const std::vector<GradcheckRow> kRows = {
    scan_row(ScanRule::Linear, ScanForm::Sequential),
    scan_row(ScanRule::Linear, ScanForm::Chunked),
    scan_row(ScanRule::Delta, ScanForm::Sequential),
    scan_row(ScanRule::Delta, ScanForm::Chunked),
    scan_row(ScanRule::Gdn, ScanForm::Sequential),
    scan_row(ScanRule::Gdn, ScanForm::Chunked),
    scan_row(ScanRule::Retnet, ScanForm::Sequential),
    scan_row(ScanRule::Retnet, ScanForm::Chunked),
    scan_row(ScanRule::Mamba2, ScanForm::Sequential),
    scan_row(ScanRule::Mamba2, ScanForm::Chunked),
    scan_row(ScanRule::Gla, ScanForm::Sequential),
    scan_row(ScanRule::Gla, ScanForm::Chunked),
};
const int kRegistered = register_gradchecks(kRows);

}  // namespace

TEST_CASE("gradcheck: scan") { run_gradchecks(kRows); }

TEST_CASE("scan kernels: finite differences with the final-state loss and dS_0") {
  // L = ⟨O, R1⟩ + ⟨S_T, R2⟩; every input (S_0 included) perturbed along a
  // random direction u, (L(x + εu) − L(x − εu)) / 2ε against ⟨dx, u⟩.
  for (ScanRule rule : kRules)
    for (bool chunked : {false, true}) {
      INFO(rule_name(rule) << (chunked ? ", chunked C = 4" : ", sequential"));
      Rng rng(7 + int(rule));
      ScanCase c = make_case(rule, 2, 7, 2, 4, rng);
      Tensor R1 = Tensor::randn(c.q.shape(), rng, 1.0, 0.0, DType::F64);
      Tensor R2 = Tensor::randn(c.initial_state.shape(), rng, 1.0, 0.0, DType::F64);
      const ScanOptions config = kernel_config(rule, chunked, 4);
      ScanRun run = run_kernels(config, c, R1, R2);
      auto loss = [&](const ScanCase& x) {
        Tensor final_state;
        Tensor o = dispatch::scan_forward(config, x.q, x.k, x.v, x.beta, x.log_alpha, x.initial_state, final_state);
        return dot(o, R1) + dot(final_state, R2);
      };
      Tensor ScanCase::*fields[] = {&ScanCase::q, &ScanCase::k, &ScanCase::v,
                                    &ScanCase::beta, &ScanCase::log_alpha, &ScanCase::initial_state};
      const Tensor grads[] = {run.grads.dq, run.grads.dk, run.grads.dv,
                              run.grads.dbeta, run.grads.dlog_alpha, run.grads.dinitial_state};
      const char* names[] = {"q", "k", "v", "beta", "log_alpha", "S_0"};
      for (int i = 0; i < 6; ++i) {
        if (!(c.*fields[i]).defined()) continue;
        const double eps = kGradcheck.eps;
        Tensor u = Tensor::randn((c.*fields[i]).shape(), rng, 1.0, 0.0, DType::F64);
        ScanCase plus = c, minus = c;
        plus.*fields[i] = dispatch::binary(BinaryFn::Add, c.*fields[i],
                                          dispatch::unary(UnaryFn::MulScalar, u, eps));
        minus.*fields[i] = dispatch::binary(BinaryFn::Sub, c.*fields[i],
                                           dispatch::unary(UnaryFn::MulScalar, u, eps));
        const double numeric = (loss(plus) - loss(minus)) / (2 * eps);
        const double analytic = dot(grads[i], u);
        CHECK_MESSAGE(std::fabs(numeric - analytic) / std::max(1.0, std::fabs(analytic)) <=
                          kGradcheck.tolerance,
                      names[i] << ": numeric " << numeric << " vs analytic " << analytic);
      }
    }
}

TEST_CASE("scan: the chunked form agrees with the sequential reference, float64 and float32") {
  // B = 2, H = 3. The sizes the chunked scan is compiled for (d = 32 with
  // C = 16 or 64) and run-time sizes (other C, other d, a chunk longer than
  // the sequence); T a multiple of C, not a multiple, and shorter than C.
  struct Size {
    int64_t C, T, d;
  };
  const Size sizes[] = {{16, 64, 32},  {64, 64, 32}, {16, 200, 32}, {64, 200, 32}, {16, 10, 32},
                        {64, 70, 32},  {32, 64, 32}, {32, 200, 32}, {32, 10, 32},  {1, 9, 32},
                        {5, 37, 32},   {100, 70, 32}, {16, 45, 20}};
  for (ScanRule rule : kRules)
    for (const Size& size : sizes)
      for (bool ends : {true, false}) {
        const int64_t C = size.C, T = size.T;
        INFO(rule_name(rule) << ", C = " << C << ", T = " << T << ", d = " << size.d
                             << (ends ? ", with S_0 and dS_T" : ", from S_0 = 0, no dS_T"));
        Rng rng(1000 + int(rule) * 100 + C + T + size.d);
        ScanCase c = make_case(rule, 2, T, 3, size.d, rng);
        Tensor R1 = Tensor::randn(c.q.shape(), rng, 1.0, 0.0, DType::F64);
        Tensor R2 = Tensor::randn(c.initial_state.shape(), rng, 1.0, 0.0, DType::F64);
        if (!ends) c.initial_state = R2 = Tensor();
        const ScanRun reference = run_kernels(kernel_config(rule, false, C), c, R1, R2);
        const ScanRun chunked = run_kernels(kernel_config(rule, true, C), c, R1, R2);
        check_all_close("float64 chunked vs sequential:", chunked, reference, 1e-10, 1.0);
        check_close("float64 chunked vs sequential: chunk states", chunked.saved.states,
                    states_at_chunk_starts(reference.saved.states, C), 1e-10, 1.0);
        // the solve's results kept for the backward where a chunk is one tile
        const bool kept = scan_keeps_solve(rule, T, C);
        CHECK(chunked.saved.Y.defined() == kept);
        CHECK(chunked.saved.W.defined() == kept);
        CHECK(chunked.saved.U.defined() == kept);
        CHECK_FALSE(reference.saved.U.defined());
        if (kept)
          check_close("float64 chunked: the kept U, the write vectors", chunked.saved.U,
                      write_vectors(rule, c, reference.saved.states), 1e-10, 1.0);
        if (!ends) continue;  // float32 once per shape
        for (bool form_chunked : {false, true}) {
          const ScanRun single = run_kernels(kernel_config(rule, form_chunked, C), c, R1, R2,
                                             DType::F32);
          check_all_close(form_chunked ? "float32 chunked vs float64:"
                                       : "float32 sequential vs float64:",
                          single, reference, 1e-4, 0.0, kFloat32EachRel, kFloat32EachFloor);
        }
      }
}

TEST_CASE("scan: a strong decay stays finite and accurate in float32") {
  // log α = log σ(z), z ~ U(−30, 0): the decay over a 64-token chunk underflows
  // float32 many times over (docs/recurrence.md §5.3); for the per-channel decay
  // every key channel forgets at its own rate (docs/recurrence-gated.md §4).
  for (ScanRule rule : {ScanRule::Gdn, ScanRule::Mamba2, ScanRule::Gla}) {
    INFO(rule_name(rule));
    Rng rng(77);
    ScanCase c = make_case(rule, 2, 100, 2, 32, rng);
    c.log_alpha = Tensor::rand(c.log_alpha.shape(), rng, -30.0, 0.0, DType::F64);
    double* log_alpha = c.log_alpha.data<double>();
    for (int64_t i = 0; i < c.log_alpha.numel(); ++i) log_alpha[i] = -std::log1p(std::exp(-log_alpha[i]));
    Tensor R1 = Tensor::randn(c.q.shape(), rng, 1.0, 0.0, DType::F64);
    Tensor R2 = Tensor::randn(c.initial_state.shape(), rng, 1.0, 0.0, DType::F64);
    const ScanRun reference = run_kernels(kernel_config(rule, false, 64), c, R1, R2);
    for (bool chunked : {false, true}) {
      const ScanRun single = run_kernels(kernel_config(rule, chunked, 64), c, R1, R2, DType::F32);
      check_all_close(chunked ? "float32 chunked vs float64, C = 64:"
                              : "float32 sequential vs float64:",
                      single, reference, 1e-4, 0.0, kFloat32EachRel, kFloat32EachFloor);
    }
  }
}

TEST_CASE("scan: two runs with the carried state equal one run") {
  const int64_t T = 23, T1 = 9;
  for (ScanRule rule : kRules)
    for (ScanForm form : {ScanForm::Sequential, ScanForm::Chunked}) {
      INFO(rule_name(rule) << (form == ScanForm::Chunked ? ", chunked C = 4" : ", sequential"));
      Rng rng(55);
      ScanCase c = make_case(rule, 2, T, 2, 5, rng);
      ScanOptions options{rule, form, 4};
      auto part = [&](const Tensor& x, int64_t start, int64_t length) {
        return x.defined() ? Var(slice(x, 1, start, length)) : Var();
      };
      auto run = [&](int64_t start, int64_t length, const Tensor& initial_state, Tensor* final_state) {
        return scan(options, part(c.q, start, length), part(c.k, start, length),
                    part(c.v, start, length), part(c.beta, start, length),
                    part(c.log_alpha, start, length), initial_state, final_state);
      };
      Tensor s_full, s_mid, s_end;
      Var o_full = run(0, T, c.initial_state, &s_full);
      Var o_first = run(0, T1, c.initial_state, &s_mid);
      Var o_second = run(T1, T - T1, s_mid, &s_end);
      check_close("o", concat({o_first.data(), o_second.data()}, 1), o_full.data(), 1e-12, 1.0);
      check_close("S_T", s_end, s_full, 1e-12, 1.0);
    }
}

TEST_CASE("scan: hand-computed values") {
  for (ScanForm form : {ScanForm::Sequential, ScanForm::Chunked}) {
    INFO((form == ScanForm::Chunked ? "chunked, C = 2" : "sequential"));
    SUBCASE("linear rule: S_T = Σ v kᵀ, o_t = S_t q_t") {
      // Two tokens, d = 2: v1 k1ᵀ = [[1, 0], [2, 0]], v2 k2ᵀ = [[1.5, 6], [−0.5, −2]].
      Var q(Tensor::from_vector<double>({1, 1, 1, 1}, {1, 2, 1, 2}));
      Var k(Tensor::from_vector<double>({1, 0, 0.5, 2}, {1, 2, 1, 2}));
      Var v(Tensor::from_vector<double>({1, 2, 3, -1}, {1, 2, 1, 2}));
      Tensor final_state;
      Var o = scan({ScanRule::Linear, form, 2}, q, k, v, Var(), Var(), Tensor(), &final_state);
      CHECK(final_state.to_vector<double>() == std::vector<double>{2.5, 6, 1.5, -2});
      CHECK(o.data().to_vector<double>() == std::vector<double>{1, 2, 8.5, -0.5});
    }
    SUBCASE("delta rules: one token from S_0 = 0 writes S_1 = β v kᵀ") {
      for (ScanRule rule : {ScanRule::Delta, ScanRule::Gdn}) {
        Var q(Tensor::from_vector<double>({1, 0}, {1, 1, 1, 2}));
        Var k(Tensor::from_vector<double>({0.6, 0.8}, {1, 1, 1, 2}));
        Var v(Tensor::from_vector<double>({2, -4}, {1, 1, 1, 2}));
        Var beta(Tensor::from_vector<double>({0.5}, {1, 1, 1}));
        Var log_alpha = learns_decay(rule) ? Var(Tensor::from_vector<double>({-0.3}, {1, 1, 1})) : Var();
        Tensor final_state;
        Var o = scan({rule, form, 2}, q, k, v, beta, log_alpha, Tensor(), &final_state);
        std::vector<double> s = final_state.to_vector<double>();
        std::vector<double> expected{0.6, 0.8, -1.2, -1.6};
        for (int i = 0; i < 4; ++i) CHECK(s[size_t(i)] == doctest::Approx(expected[size_t(i)]));
        CHECK(o.data().at(0) == doctest::Approx(0.6));   // S_1 q = (0.6, −1.2)
        CHECK(o.data().at(1) == doctest::Approx(-1.2));
      }
    }
    SUBCASE("gdn with β = 0: pure decay S_t = exp(log α_1 + … + log α_t) S_0") {
      Rng rng(3);
      Var q(Tensor::randn({1, 3, 1, 2}, rng, 1.0, 0.0, DType::F64));
      Var k(Tensor::randn({1, 3, 1, 2}, rng, 1.0, 0.0, DType::F64));
      Var v(Tensor::randn({1, 3, 1, 2}, rng, 1.0, 0.0, DType::F64));
      Var beta(Tensor::zeros({1, 3, 1}, DType::F64));
      Var log_alpha(Tensor::from_vector<double>({-0.1, -0.5, -2.0}, {1, 3, 1}));
      Tensor initial_state = Tensor::from_vector<double>({1, 2, 3, 4}, {1, 1, 2, 2});
      Tensor final_state;
      Var o = scan({ScanRule::Gdn, form, 2}, q, k, v, beta, log_alpha, initial_state, &final_state);
      const double decay = std::exp(-2.6);
      for (int i = 0; i < 4; ++i) CHECK(final_state.at(i) == doctest::Approx(decay * initial_state.at(i)));
      // o_3 = e^{λ_3} S_0 q_3, λ_3 = log α_1 + log α_2 + log α_3
      const double q0 = q.data().at(4), q1 = q.data().at(5);
      CHECK(o.data().at(4) == doctest::Approx(decay * (1 * q0 + 2 * q1)));
      CHECK(o.data().at(5) == doctest::Approx(decay * (3 * q0 + 4 * q1)));
    }
  }
}

TEST_CASE("scan: hand-computed values of the decaying rules") {
  // One head, d = 2, S_0 = I, zero writes (v = 0): the state only decays.
  for (ScanForm form : {ScanForm::Sequential, ScanForm::Chunked}) {
    INFO((form == ScanForm::Chunked ? "chunked, C = 2" : "sequential"));
    Var q(Tensor::from_vector<double>({1, 1, 1, 1, 1, 1}, {1, 3, 1, 2}));
    Var k(Tensor::from_vector<double>({1, 0, 0, 1, 1, 1}, {1, 3, 1, 2}));
    Var v(Tensor::zeros({1, 3, 1, 2}, DType::F64));
    Tensor initial_state = Tensor::from_vector<double>({1, 0, 0, 1}, {1, 1, 2, 2});
    SUBCASE("retention: head h decays by α_h = 1 − 2^(−5−h) per token") {
      // Two heads: the second decays by 0.984375.
      Var q2(Tensor::ones({1, 3, 2, 2}, DType::F64)), k2(Tensor::ones({1, 3, 2, 2}, DType::F64));
      Var v2(Tensor::zeros({1, 3, 2, 2}, DType::F64));
      Tensor s0_2 = Tensor::from_vector<double>({1, 0, 0, 1, 1, 0, 0, 1}, {1, 2, 2, 2});
      Tensor final_state;
      scan({ScanRule::Retnet, form, 2}, q2, k2, v2, Var(), Var(), s0_2, &final_state);
      CHECK(final_state.at(0) == doctest::Approx(std::pow(0.96875, 3)));
      CHECK(final_state.at(4) == doctest::Approx(std::pow(0.984375, 3)));
      CHECK(final_state.at(1) == 0.0);
    }
    SUBCASE("gla: key channel j decays by its own a_tj") {
      // log a: channel 0 by −0.1 per token, channel 1 by −1.
      Var log_alpha(Tensor::from_vector<double>({-0.1, -1, -0.1, -1, -0.1, -1}, {1, 3, 1, 2}));
      Tensor final_state;
      Var o = scan({ScanRule::Gla, form, 2}, q, k, v, Var(), log_alpha, initial_state, &final_state);
      // S_3 = S_0 diag(e^{−0.3}, e^{−3}): the columns (key channels) decay apart.
      CHECK(final_state.at(0) == doctest::Approx(std::exp(-0.3)));
      CHECK(final_state.at(3) == doctest::Approx(std::exp(-3.0)));
      CHECK(final_state.at(1) == 0.0);
      CHECK(o.data().at(0) == doctest::Approx(std::exp(-0.1)));  // o_1 = S_1 q_1, row 0
      CHECK(o.data().at(1) == doctest::Approx(std::exp(-1.0)));
    }
    SUBCASE("mamba2: v k^T written after the decay, one α for the head") {
      Var v1(Tensor::from_vector<double>({0, 0, 2, 0, 0, 0}, {1, 3, 1, 2}));
      Var log_alpha(Tensor::from_vector<double>({-0.5, -0.5, -0.5}, {1, 3, 1}));
      Tensor final_state;
      scan({ScanRule::Mamba2, form, 2}, q, k, v1, Var(), log_alpha, initial_state, &final_state);
      // S_3 = e^{−1.5} I + e^{−0.5} · (2, 0)ᵀ (0, 1)
      CHECK(final_state.at(0) == doctest::Approx(std::exp(-1.5)));
      CHECK(final_state.at(1) == doctest::Approx(2 * std::exp(-0.5)));
      CHECK(final_state.at(3) == doctest::Approx(std::exp(-1.5)));
    }
  }
}

TEST_CASE("scan: only the inputs the rule reads are recorded") {
  Rng rng(9);
  for (ScanRule rule : kRules) {
    ScanCase c = make_case(rule, 1, 3, 2, 4, rng);
    Var q(c.q, true), k(c.k, true), v(c.v, true);
    Var beta = c.beta.defined() ? Var(c.beta, true) : Var();
    Var log_alpha = c.log_alpha.defined() ? Var(c.log_alpha, true) : Var();
    Var o = scan({rule, ScanForm::Chunked, 2}, q, k, v, beta, log_alpha, c.initial_state);
    REQUIRE(o.grad_fn() != nullptr);
    CHECK(o.grad_fn()->kind == OpKind::Scan);
    CHECK(o.grad_fn()->inputs.size() == size_t(3 + uses_beta(rule) + learns_decay(rule)));
  }
}

TEST_CASE("scan: the op keeps the chunked solve's Y, W, U for a delta rule's backward only") {
  Rng rng(12);
  for (ScanRule rule : kRules)
    for (ScanForm form : {ScanForm::Sequential, ScanForm::Chunked}) {
      INFO(rule_name(rule) << (form == ScanForm::Chunked ? ", chunked C = 2" : ", sequential"));
      ScanCase c = make_case(rule, 1, 5, 2, 4, rng);
      auto leaf = [](const Tensor& x, bool grad) { return x.defined() ? Var(x, grad) : Var(); };
      for (bool grad : {false, true}) {
        Var o = scan({rule, form, 2}, leaf(c.q, grad), leaf(c.k, grad), leaf(c.v, grad), leaf(c.beta, grad),
                     leaf(c.log_alpha, grad), c.initial_state);
        if (!grad) {
          CHECK(o.grad_fn() == nullptr);  // inference keeps nothing
          continue;
        }
        REQUIRE(o.grad_fn() != nullptr);
        const bool kept = form == ScanForm::Chunked && uses_beta(rule);
        int listed = 0;
        for (const auto& [field, tensor] : o.grad_fn()->saved()) {
          const std::string name = field;
          if (name != "Y" && name != "W" && name != "U") continue;
          ++listed;
          CHECK_MESSAGE(tensor.defined() == kept, name);
          if (kept) CHECK(tensor.shape() == c.q.shape());
        }
        CHECK(listed == 3);
      }
    }
}

TEST_CASE("scan errors name the problem") {
  auto zeros = [](const Shape& s) { return Var(Tensor::zeros(s, DType::F64)); };
  Var x = zeros({2, 5, 2, 4});
  Var per_head = zeros({2, 5, 2});
  const ScanOptions linear{ScanRule::Linear, ScanForm::Sequential, 4};
  const ScanOptions delta{ScanRule::Delta, ScanForm::Chunked, 4};
  const ScanOptions gated{ScanRule::Gdn, ScanForm::Chunked, 4};
  CHECK_THROWS_WITH_AS(scan(linear, x, zeros({2, 5, 2, 3}), x, Var(), Var()),
                       doctest::Contains("scan: q, k, v must share one shape [B, T, H, d]"), Error);
  Var flat = zeros({5, 2, 4});
  CHECK_THROWS_WITH_AS(scan(linear, flat, flat, flat, Var(), Var()),
                       doctest::Contains("scan: q must be a non-empty [B, T, H, d], got [5, 2, 4]"),
                       Error);
  CHECK_THROWS_WITH_AS(scan(delta, x, x, x, Var(), Var()),
                       doctest::Contains("scan: the delta rule needs beta [B, T, H] = [2, 5, 2]"),
                       Error);
  CHECK_THROWS_WITH_AS(scan(gated, x, x, x, per_head, Var()),
                       doctest::Contains("scan: the gdn rule needs log_alpha [B, T, H]"),
                       Error);
  CHECK_THROWS_WITH_AS(scan(gated, x, x, x, per_head, zeros({2, 5})),
                       doctest::Contains("log_alpha [B, T, H] = [2, 5, 2], got [2, 5]"), Error);
  CHECK_THROWS_WITH_AS(scan(linear, x, x, x, per_head, Var()),
                       doctest::Contains("scan: the linear rule takes no beta"), Error);
  const ScanOptions channel{ScanRule::Gla, ScanForm::Chunked, 4};
  CHECK_THROWS_WITH_AS(scan(channel, x, x, x, Var(), per_head),
                       doctest::Contains("scan: the gla rule needs log_alpha "
                                         "[B, T, H, d] = [2, 5, 2, 4], got [2, 5, 2]"),
                       Error);
  CHECK_THROWS_WITH_AS(scan({ScanRule::Retnet, ScanForm::Chunked, 4}, x, x, x, Var(), per_head),
                       doctest::Contains("scan: the retnet rule takes no log_alpha"), Error);
  Tensor bad_state = Tensor::zeros({2, 2, 4, 3}, DType::F64);
  CHECK_THROWS_WITH_AS(scan(delta, x, x, x, per_head, Var(), bad_state),
                       doctest::Contains("initial_state must be [2, 2, 4, 4], got [2, 2, 4, 3]"),
                       Error);
  CHECK_THROWS_WITH_AS(scan({ScanRule::Delta, ScanForm::Chunked, 0}, x, x, x, per_head, Var()),
                       doctest::Contains("scan: chunk length must be positive, got 0"), Error);
  CHECK_THROWS_WITH_AS(scan(linear, x, Var(Tensor::zeros({2, 5, 2, 4})), x, Var(), Var()),
                       doctest::Contains("scan: dtype mismatch"), Error);
}
