// The scan's CUDA block programs — token by token (backend_cuda/scan_device.h)
// and chunked (backend_cuda/scan_chunked_device.h, and
// scan_chunked_gated_device.h for a decay per key channel) — run on the host with
// run_block_program_on_host, items in forward and in reverse order, and
// compared with the CPU kernels of the same form: output, final state, saved
// states and every gradient, for every rule. Chunk lengths that do not divide
// T (and T < C), with and without S_0 and dS_T, and strongly forgetting gates
// in float32. Outputs start as NaN, so an element a program forgets to write
// fails the comparison.
//
// Tolerance, per tensor: |got − want| ≤ 1e-4·max|want| + 1e-5. The programs
// and the CPU kernels do the same float32 arithmetic in different summation
// orders (plain loops against Eigen's blocked products), which moves results
// by a few ulps per product, compounded over the recurrence; 1e-4 of the
// tensor's scale leaves room for that and still catches any wrong term.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backend_cpu/cpu_kernels.h"
#include "backend_cuda/scan_chunked_device.h"
#include "backend_cuda/scan_chunked_gated_device.h"
#include "core/rng.h"
#include "core/tensor.h"

using namespace lina;
using namespace lina::cuda;

namespace {

using Floats = std::vector<float>;

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const ScanRule kRules[] = {ScanRule::Linear,    ScanRule::Delta,       ScanRule::GatedDelta,
                           ScanRule::Retention, ScanRule::GatedLinear, ScanRule::ChannelGatedLinear};

// Entries of the log-gate: one per head and token, or per key channel too.
int64_t gate_count(const ScanShape& s) {
  return s.B * s.T * s.H * (gate_per_channel(s.rule) ? s.d : 1);
}

Rng& test_rng() {
  static Rng rng(4242);
  return rng;
}

Floats randn(int64_t n, double scale = 1.0) {
  return Tensor::randn({n}, test_rng(), scale, 0.0, DType::f32).to_vector<float>();
}
Floats uniform(int64_t n, double lo, double hi) {
  return Tensor::rand({n}, test_rng(), lo, hi, DType::f32).to_vector<float>();
}

// One problem: shape, chunk length and inputs in the model's regime
// (docs/recurrence.md §5.1): q, k scaled by 1/√d, unit-norm keys for the delta
// rules, β = σ(N(0, 1)), g = log σ(z) with z ~ U(−3, 6), or g ~ U(lo, hi)
// for the strong-decay cases.
struct Problem {
  ScanShape s;
  int64_t C = 0;
  Floats q, k, v, beta, g, s0, dout, ds_final;  // s0 / ds_final empty = null
};

struct ProblemSpec {
  int64_t B, T, H, d, C;
  bool with_s0, with_ds_final;
  double g_lo = 0.0, g_hi = 0.0;  // both 0: the model's gates
};

Problem make_problem(ScanRule rule, const ProblemSpec& spec) {
  Problem p;
  p.s = ScanShape{spec.B, spec.T, spec.H, spec.d, rule};
  p.C = spec.C;
  const int64_t d = spec.d, rows = spec.B * spec.T * spec.H, states = spec.B * spec.H * d * d;
  const double scale = 1.0 / std::sqrt(double(d));
  p.q = randn(rows * d, scale);
  p.k = randn(rows * d, scale);
  p.v = randn(rows * d);
  p.dout = randn(rows * d);
  if (spec.with_s0) p.s0 = randn(states, 0.5);
  if (spec.with_ds_final) p.ds_final = randn(states);
  if (uses_beta(rule)) {
    for (int64_t row = 0; row < rows; ++row) {
      float norm = 0.0f;
      for (int64_t j = 0; j < d; ++j) norm += p.k[size_t(row * d + j)] * p.k[size_t(row * d + j)];
      for (int64_t j = 0; j < d; ++j) p.k[size_t(row * d + j)] /= std::sqrt(norm);
    }
    p.beta = randn(rows);
    for (float& b : p.beta) b = 1.0f / (1.0f + std::exp(-b));
  }
  if (uses_gate(rule)) {
    if (spec.g_lo == 0.0 && spec.g_hi == 0.0) {
      p.g = uniform(gate_count(p.s), -3.0, 6.0);
      for (float& g : p.g) g = -std::log1p(std::exp(-g));
    } else {
      p.g = uniform(gate_count(p.s), spec.g_lo, spec.g_hi);
    }
  }
  return p;
}

const float* or_null(const Floats& x) { return x.empty() ? nullptr : x.data(); }
float* or_null(Floats& x) { return x.empty() ? nullptr : x.data(); }

ScanInputs<float> inputs(const Problem& p) {
  return {p.q.data(), p.k.data(), p.v.data(), or_null(p.beta), or_null(p.g)};
}

// Everything a forward and backward produce (dbeta / dg empty when unused).
struct Results {
  Floats o, s_final, saved, dq, dk, dv, dbeta, dg, ds0;
};

Results empty_results(const Problem& p, bool chunked, float fill) {
  const ScanShape& s = p.s;
  const int64_t rows = s.B * s.T * s.H, dd = s.d * s.d;
  const int64_t saved_states = chunked ? (s.T + p.C - 1) / p.C : s.T;
  Results r;
  r.o.assign(size_t(rows * s.d), fill);
  r.s_final.assign(size_t(s.B * s.H * dd), fill);
  r.saved.assign(size_t(s.B * s.H * saved_states * dd), fill);
  r.dq = r.dk = r.dv = r.o;
  if (uses_beta(s.rule)) r.dbeta.assign(size_t(rows), fill);
  if (uses_gate(s.rule)) r.dg.assign(size_t(gate_count(s)), fill);
  r.ds0 = r.s_final;
  return r;
}

ScanInputGrads<float> grads(Results& r) {
  return {r.dq.data(), r.dk.data(), r.dv.data(), or_null(r.dbeta), or_null(r.dg), r.ds0.data()};
}

Results run_cpu(const Problem& p, bool chunked) {
  Results r = empty_results(p, chunked, 0.0f);
  const ScanInputs<float> in = inputs(p);
  if (chunked) {
    cpu::scan_chunked_forward<float>(p.s, p.C, in, or_null(p.s0), r.o.data(), r.s_final.data(),
                                     r.saved.data());
    cpu::scan_chunked_backward<float>(p.s, p.C, in, r.saved.data(), p.dout.data(),
                                      or_null(p.ds_final), grads(r));
  } else {
    cpu::scan_sequential_forward<float>(p.s, in, or_null(p.s0), r.o.data(), r.s_final.data(),
                                        r.saved.data());
    cpu::scan_sequential_backward<float>(p.s, in, r.saved.data(), p.dout.data(),
                                         or_null(p.ds_final), grads(r));
  }
  return r;
}

// A pair of block programs on the host; the backward reads the states its
// own forward saved.
template <class Forward, class Backward>
Results run_program_pair(const Problem& p, bool chunked, ItemOrder order) {
  Results r = empty_results(p, chunked, kNaN);
  ScanArgs args;
  args.s = p.s;
  args.chunk = p.C;
  args.in = inputs(p);
  args.s0 = or_null(p.s0);
  args.o = r.o.data();
  args.s_final = r.s_final.data();
  args.saved_out = r.saved.data();
  run_block_program_on_host<Forward>(args, order);

  args.o = args.s_final = args.saved_out = nullptr;
  args.saved = r.saved.data();
  args.dout = p.dout.data();
  args.ds_final = or_null(p.ds_final);
  args.grads = grads(r);
  run_block_program_on_host<Backward>(args, order);
  return r;
}

// The programs backend_cuda/scan.cu launches for this rule and form.
Results run_programs(const Problem& p, bool chunked, ItemOrder order) {
  if (!chunked) return run_program_pair<ScanSequentialForward, ScanSequentialBackward>(p, false, order);
  Results r;
  with_chunked_programs(p.s.rule, [&](auto programs) {
    using Programs = decltype(programs);
    r = run_program_pair<typename Programs::Forward, typename Programs::Backward>(p, true, order);
  });
  return r;
}

// Per tensor: |got − want| ≤ 1e-4·max|want| + 1e-5 for every element (NaN fails).
void check_close(const Floats& got, const Floats& want, const std::string& what) {
  REQUIRE(got.size() == want.size());
  double scale = 0.0;
  for (float w : want) scale = std::max(scale, std::fabs(double(w)));
  const double tol = 1e-4 * scale + 1e-5;
  int64_t bad = -1;
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(double(got[i]) - double(want[i]));
    if (!(err <= tol) && bad < 0) bad = int64_t(i);
    if (err > worst || std::isnan(err)) worst = err;
  }
  INFO(what, ": element ", bad,
       bad >= 0 ? ": got " + std::to_string(got[size_t(bad)]) + ", want " +
                      std::to_string(want[size_t(bad)]) + ", tolerance " + std::to_string(tol) +
                      ", worst error " + std::to_string(worst)
                : std::string());
  CHECK(bad < 0);
}

void check_finite(const Floats& x, const std::string& what) {
  const bool finite = std::all_of(x.begin(), x.end(), [](float v) { return std::isfinite(v); });
  INFO(what);
  CHECK(finite);
}

std::string describe(ScanRule rule, bool chunked, ItemOrder order, const ProblemSpec& spec) {
  return std::string(chunked ? "chunked " : "sequential ") + scan_rule_name(rule) +
         (order == ItemOrder::Reverse ? ", items reversed" : ", items in order") +
         ", B=" + std::to_string(spec.B) + " T=" + std::to_string(spec.T) +
         " H=" + std::to_string(spec.H) + " d=" + std::to_string(spec.d) +
         " C=" + std::to_string(spec.C) + (spec.with_s0 ? ", S_0" : "") +
         (spec.with_ds_final ? ", dS_T" : "");
}

void check_results(const Results& got, const Results& want, const std::string& what,
                   bool require_finite) {
  check_close(got.o, want.o, what + ": o");
  check_close(got.s_final, want.s_final, what + ": final state");
  check_close(got.saved, want.saved, what + ": saved states");
  check_close(got.dq, want.dq, what + ": dq");
  check_close(got.dk, want.dk, what + ": dk");
  check_close(got.dv, want.dv, what + ": dv");
  check_close(got.dbeta, want.dbeta, what + ": dbeta");
  check_close(got.dg, want.dg, what + ": dg");
  check_close(got.ds0, want.ds0, what + ": ds0");
  if (require_finite)
    for (const Floats* x : {&got.o, &got.s_final, &got.dq, &got.dk, &got.dv, &got.dbeta, &got.dg,
                            &got.ds0})
      check_finite(*x, what + ": all finite");
}

// Both forms of `rule` on one problem, in both item orders, against the CPU.
void check_against_cpu(ScanRule rule, const ProblemSpec& spec, bool require_finite = false) {
  const Problem p = make_problem(rule, spec);
  for (bool chunked : {false, true}) {
    const Results want = run_cpu(p, chunked);
    for (ItemOrder order : {ItemOrder::Forward, ItemOrder::Reverse})
      check_results(run_programs(p, chunked, order), want, describe(rule, chunked, order, spec),
                    require_finite);
  }
}

// The per-channel chunked programs are written for any rule without the
// delta correction (a per-head decay is the same decay on every channel):
// run them on the rules whose GPU path takes the Γ-matrix programs too.
void check_gated_programs_against_cpu(ScanRule rule, const ProblemSpec& spec) {
  const Problem p = make_problem(rule, spec);
  const Results want = run_cpu(p, true);
  for (ItemOrder order : {ItemOrder::Forward, ItemOrder::Reverse})
    check_results(run_program_pair<ScanChunkedGatedForward, ScanChunkedGatedBackward>(p, true, order),
                  want, "per-channel programs, " + describe(rule, true, order, spec), false);
}

}  // namespace

TEST_CASE("cuda emulation: scan block programs match the CPU, chunk not dividing T") {
  const ProblemSpec specs[] = {
      {2, 13, 2, 5, 4, true, true},    // T = 13, C = 4: last chunk of 1
      {1, 13, 3, 6, 4, false, false},  // no S_0, no dS_T
      {1, 12, 1, 4, 4, true, false},   // C divides T
      {2, 3, 1, 6, 4, false, true},    // T < C: one short chunk
      {1, 1, 1, 3, 4, true, true},     // a single token
  };
  for (ScanRule rule : kRules)
    for (const ProblemSpec& spec : specs) check_against_cpu(rule, spec);
}

TEST_CASE("cuda emulation: scan block programs match the CPU at the model's size (d 32, C 64, T 70)") {
  for (ScanRule rule : kRules) check_against_cpu(rule, {1, 70, 1, 32, 64, true, true});
}

TEST_CASE("cuda emulation: scan block programs stay finite under strongly forgetting gates") {
  // α = exp(g) down to e^−20 per token: λ over a chunk reaches −80 (γ
  // underflows), which only the segment sums in log space survive.
  for (ScanRule rule : {ScanRule::GatedDelta, ScanRule::GatedLinear, ScanRule::ChannelGatedLinear}) {
    check_against_cpu(rule, {2, 13, 2, 8, 4, true, true, -20.0, -5.0}, true);
    check_against_cpu(rule, {1, 21, 1, 8, 16, false, true, -20.0, -5.0}, true);
  }
}

TEST_CASE("cuda emulation: the per-channel chunked scan programs match the CPU on every rule without the delta correction") {
  for (ScanRule rule : {ScanRule::Linear, ScanRule::Retention, ScanRule::GatedLinear,
                        ScanRule::ChannelGatedLinear}) {
    check_gated_programs_against_cpu(rule, {2, 13, 2, 5, 4, true, true});
    check_gated_programs_against_cpu(rule, {1, 70, 1, 32, 64, true, true});
    check_gated_programs_against_cpu(rule, {2, 3, 1, 6, 4, false, false});
  }
}
