// The CUDA scan kernels, part of lina_cuda_tests (tests/test_cuda_backend.cpp
// holds its main): the chunked form (backend_cuda/scan_chunked.cu) and the
// token-by-token reference beside it (scan_sequential.cu), every write rule,
// against the CPU's token-by-token scan in float64 and against each other.
// The cases vary what the kernels' tiling and pointers can get wrong: T not a
// multiple of the chunk, chunks of 1, 4, 5, 16, 64 tokens and chunks longer
// than a tile (100, 128: cut in two), d = 8, 16, 32, 64, an initial state
// and a final-state gradient given or not, and strong decay.
//
// Each output is compared element by element (tests/harness.h):
//   |cuda − want| ≤ 2e-4·|want| + 2e-5·max|want|
// so a 0.1 % error in any element above 2 % of the largest fails. Run it with
// LINA_CUDA_SIM_ORDER=reverse or shuffle:1 on cuda_sim/ to catch a read that
// a missing __syncthreads() leaves to the thread order.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "dispatch/dispatch.h"
#include "tests/harness.h"

using namespace lina;

namespace {

constexpr double kRel = 2e-4, kFloor = 2e-5;

struct ScanCase {
  int64_t B, T, H, d, chunk;
  bool with_initial_state = true, with_dfinal_state = true;
  double log_alpha_lo = -1.0, log_alpha_hi = -0.01;  // log α, for the rules with a learned decay
  std::string name() const {
    return "[B " + std::to_string(B) + ", T " + std::to_string(T) + ", H " + std::to_string(H) + ", d " +
           std::to_string(d) + "] C = " + std::to_string(chunk) + (with_initial_state ? "" : ", no S_0") +
           (with_dfinal_state ? "" : ", no dS_T") + (log_alpha_lo < -2 ? ", strong decay" : "");
  }
};

const ScanCase kCases[] = {
    {2, 13, 2, 8, 4},                        // three full chunks and one of 1 token
    {1, 13, 3, 8, 5, false, false},          // no S_0, no dS_T
    {2, 70, 2, 32, 16},                      // the default chunk, the last one 6 tokens
    {1, 70, 2, 32, 64, true, false},         // one full tile of 64
    {1, 150, 1, 32, 100},                    // chunks of 100: two tiles of 50 each
    {1, 140, 1, 16, 128, false, true},       // chunks of 128: 64 + 64, then a last chunk of 12
    {1, 9, 1, 8, 1},                         // chunks of one token
    {1, 20, 1, 8, 4096},                     // one chunk, shorter than C
    {1, 33, 2, 64, 64},                      // d = 64: over 48 KB of shared memory
    {1, 40, 2, 32, 16, true, true, -20.0, -5.0},  // strong decay (learned decay only)
};

// What one scan returns, forward and backward, as float64 on the host.
struct ScanResult {
  std::vector<double> o, final_state, saved, dq, dk, dv, dbeta, dg, dinitial_state;
};

std::vector<double> host(const Tensor& t) {
  return t.defined() ? t.to(Device::Cpu).to(DType::F64).to_vector<double>() : std::vector<double>{};
}

// The scan of `rule` in `form` on `device` in `dtype`, on inputs drawn in
// float32 from a fixed seed (so every run sees the same numbers).
ScanResult run_scan(const ScanCase& c, ScanRule rule, ScanForm form, Device device, DType dtype) {
  Rng rng(2025);
  auto normal = [&](const Shape& shape, double std) {
    return Tensor::randn(shape, rng, std, 0.0, DType::F32).to(dtype).to(device);
  };
  auto uniform = [&](const Shape& shape, double lo, double hi) {
    return Tensor::rand(shape, rng, lo, hi, DType::F32).to(dtype).to(device);
  };
  const Shape act{c.B, c.T, c.H, c.d}, heads{c.B, c.T, c.H}, state{c.B, c.H, c.d, c.d};
  const double key_scale = 1.0 / std::sqrt(double(c.d));
  Tensor q = normal(act, key_scale), k = normal(act, key_scale), v = normal(act, 1.0);
  Tensor beta = uses_beta(rule) ? uniform(heads, 0.1, 0.9) : Tensor();
  Tensor log_alpha = learns_decay(rule)
                         ? uniform(decays_per_channel(rule) ? act : heads, c.log_alpha_lo, c.log_alpha_hi)
                         : Tensor();
  Tensor initial_state = normal(state, 0.1), dout = normal(act, 1.0), dfinal_state = normal(state, 0.1);

  ScanOptions options{rule, form, int(c.chunk)};
  Tensor final_state;
  dispatch::ScanSaved saved;
  Tensor o = dispatch::scan_forward(options, q, k, v, beta, log_alpha, c.with_initial_state ? initial_state : Tensor(), final_state, &saved);
  dispatch::ScanGrads gr =
      dispatch::scan_backward(options, q, k, v, beta, log_alpha, saved, dout, c.with_dfinal_state ? dfinal_state : Tensor());
  return {host(o),     host(final_state), host(saved.states), host(gr.dq),   host(gr.dk),
          host(gr.dv), host(gr.dbeta), host(gr.dlog_alpha), host(gr.dinitial_state)};
}

// The states entering each chunk, [B, H, ⌈T/C⌉, d, d], out of the
// token-by-token form's S_0 … S_{T−1} [B, H, T, d, d].
std::vector<double> chunk_starts(const std::vector<double>& states, const ScanCase& c) {
  const int64_t chunks = (c.T + c.chunk - 1) / c.chunk, dd = c.d * c.d;
  std::vector<double> out;
  for (int64_t bh = 0; bh < c.B * c.H; ++bh)
    for (int64_t n = 0; n < chunks; ++n) {
      auto first = states.begin() + (bh * c.T + n * c.chunk) * dd;
      out.insert(out.end(), first, first + dd);
    }
  return out;
}

void check_result(const std::string& what, const ScanResult& got, const ScanResult& want,
                  bool chunked_states) {
  const std::pair<const char*, std::vector<double> ScanResult::*> fields[] = {
      {"o", &ScanResult::o},   {"S_T", &ScanResult::final_state}, {"dq", &ScanResult::dq},
      {"dk", &ScanResult::dk}, {"dv", &ScanResult::dv},       {"dβ", &ScanResult::dbeta},
      {"d log a", &ScanResult::dg}, {"dS_0", &ScanResult::dinitial_state}};
  for (const auto& [name, field] : fields)
    test::check_each_close(what + ": " + name, got.*field, want.*field, kRel, kFloor);
  if (!chunked_states) test::check_each_close(what + ": saved states", got.saved, want.saved, kRel, kFloor);
}

const ScanRule kRules[] = {ScanRule::Linear, ScanRule::Delta,  ScanRule::Gdn,
                           ScanRule::Retnet, ScanRule::Mamba2, ScanRule::Gla};

}  // namespace

TEST_CASE("cuda scan: both forms against the CPU in float64 and each other, every rule") {
  for (const ScanCase& c : kCases)
    for (ScanRule rule : kRules) {
      if (c.log_alpha_lo < -2 && !learns_decay(rule)) continue;
      const std::string what = std::string(scan_rule_name(rule)) + " " + c.name();
      INFO(what);
      const ScanResult want = run_scan(c, rule, ScanForm::Sequential, Device::Cpu, DType::F64);
      const ScanResult sequential = run_scan(c, rule, ScanForm::Sequential, Device::Cuda, DType::F32);
      const ScanResult chunked = run_scan(c, rule, ScanForm::Chunked, Device::Cuda, DType::F32);
      check_result(what + ", cuda token by token vs cpu", sequential, want, false);
      check_result(what + ", cuda chunked vs cpu", chunked, want, true);
      check_result(what + ", cuda chunked vs cuda token by token", chunked, sequential, true);
      // the chunk-start states are the token-by-token states at t = 0, C, 2C, …
      test::check_each_close(what + ": chunk_states", chunked.saved, chunk_starts(want.saved, c), kRel,
                             kFloor);
    }
}

TEST_CASE("cuda scan: a missing value fails the comparison") {
  // The comparison itself must catch what it is for: a 0.1 % error in one
  // element, and a NaN (dynamic shared memory starts as NaN on cuda_sim/).
  std::vector<double> want = {1.0, -0.5, 0.25}, off = want, nan = want;
  off[2] *= 1.001;
  nan[1] = NAN;
  auto within = [&](const std::vector<double>& got) {
    double largest = 0;
    for (double w : want) largest = std::max(largest, std::fabs(w));
    for (size_t i = 0; i < got.size(); ++i)
      if (!(std::fabs(got[i] - want[i]) <= kRel * std::fabs(want[i]) + kFloor * largest)) return false;
    return true;
  };
  CHECK(within(want));
  CHECK_FALSE(within(off));
  CHECK_FALSE(within(nan));
}
