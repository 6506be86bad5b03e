// The tiled CUDA attention (backend_cuda/attention.cu) against the
// one-thread-per-row reference beside it (attention_reference.cu), part of
// lina_cuda_tests (tests/test_cuda_backend.cpp holds its main). The cases
// vary what the tiling can get wrong: as many queries as keys and fewer
// (cached keys), key and query counts that are not a multiple of the tile
// (32), grouped-query heads (H = 4 over Hkv = 2 or 1), dropout on and off,
// head sizes 1, 5, 32, 64, 128 (over 48 KB of shared memory) and 130 (past
// the tiles: the reference itself runs).
//
// Every output buffer starts as NaN, so an element the kernels never write
// fails. Bounds, each tensor against the reference's:
//   forward (out, lse: the rows' log-sum-exp, all the backward keeps of the
//     softmax): max|tiled − reference| ≤ 1e-5 · max|reference| (the online
//     softmax sums in another order);
//   backward (dscores, dq, dk, dv), both from the reference's lse: the sums
//     run in the reference's order but D = Σ_j P_j dP_j (a warp's butterfly
//     per key tile), and the rebuilt probabilities are the reference's
//     expression, so D's rounding and the multiply-adds the compiler fuses
//     are all that differ (-ffp-contract=off fuses none on cuda_sim/):
//     within 1e-6 · max|reference| there, 1e-5 on a GPU.
// On cuda_sim/ the tiled kernels also give the same bits under every thread
// order (a missing __syncthreads() leaves a read to the order).
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "backend_cuda/cuda_kernels.h"
#include "core/kernel_args.h"
#include "tests/harness.h"
#ifdef LINA_CUDA_SIM
#include "cuda_sim/control.h"
#endif

using namespace lina;

namespace {

constexpr double kForwardBound = 1e-5;  // of the largest |reference| value
#ifdef LINA_CUDA_SIM
constexpr double kBackwardBound = 1e-6;  // the same order of sums but D's: a few roundings apart
constexpr double kSameSumsBound = 0.0;   // the same sums, the same expressions, no fused multiply-adds
#else
constexpr double kBackwardBound = kForwardBound;
constexpr double kSameSumsBound = kForwardBound;
#endif

struct AttentionCase {
  int64_t B, Tq, Tk, H, Hkv, d;
  double dropout;
  std::string name() const {
    return "[B " + std::to_string(B) + ", Tq " + std::to_string(Tq) + ", Tk " + std::to_string(Tk) + ", H " +
           std::to_string(H) + ", Hkv " + std::to_string(Hkv) + ", d " + std::to_string(d) + "]" +
           (dropout > 0 ? " dropout " + std::to_string(dropout) : "");
  }
};

const AttentionCase kCases[] = {
    {1, 40, 40, 2, 2, 32, 0.0},   // Tq = Tk, one whole tile and 8 rows
    {2, 64, 64, 4, 4, 1, 0.0},    // d = 1, whole tiles
    {2, 5, 37, 4, 2, 5, 0.2},     // cached keys, two heads per KV head, dropout
    {1, 33, 70, 4, 1, 64, 0.0},   // four heads on one KV head, keys over three tiles
    {1, 70, 70, 4, 2, 5, 0.3},    // three query tiles, dropout
    {1, 1, 50, 4, 2, 32, 0.1},    // one new token over a cache
    {1, 20, 45, 2, 1, 128, 0.0},  // the largest tiled head: over 48 KB of shared memory
    {1, 9, 9, 2, 1, 130, 0.0},    // past the tiles: the reference runs
};

// The case's inputs on the device, drawn from a fixed seed.
struct Inputs {
  AttentionShape s;
  Tensor q, k, v, dout;
};
Inputs make_inputs(const AttentionCase& c) {
  Rng rng(2026);
  auto normal = [&](const Shape& shape) {
    return Tensor::randn(shape, rng, 1.0, 0.0, DType::F32).to(Device::Cuda);
  };
  Inputs in;
  in.s = AttentionShape{c.B, c.Tq, c.Tk, c.H, c.Hkv, c.d, 1.0 / std::sqrt(double(c.d)), {}};
  in.s.dropout = DropoutKey{c.dropout, 1234, 5, 2};
  in.q = normal({c.B, c.Tq, c.H, c.d});
  in.k = normal({c.B, c.Tk, c.Hkv, c.d});
  in.v = normal({c.B, c.Tk, c.Hkv, c.d});
  in.dout = normal({c.B, c.Tq, c.H, c.d});
  return in;
}

Tensor nan_buffer(const Shape& shape) { return Tensor::full(shape, NAN, DType::F32, Device::Cuda); }
std::vector<double> host(const Tensor& t) { return t.to(Device::Cpu).to(DType::F64).to_vector<double>(); }

struct Forward {
  std::vector<double> out, lse;
  Tensor lse_on_device;
};
Forward run_forward(const Inputs& in, bool reference) {
  const AttentionShape& s = in.s;
  Tensor out = nan_buffer(in.q.shape()), lse = nan_buffer({s.B, s.H, s.Tq});
  auto forward = reference ? cuda::attention_forward_reference : cuda::attention_forward;
  forward(s, in.q.data<float>(), in.k.data<float>(), in.v.data<float>(), lse.data<float>(), out.data<float>());
  return {host(out), host(lse), lse};
}

struct Backward {
  std::vector<double> dscores, dq, dk, dv;
};
Backward run_backward(const Inputs& in, const Tensor& lse, bool reference) {
  const AttentionShape& s = in.s;
  Tensor dscores = nan_buffer({s.B, s.H, s.Tq, s.Tk}), dq = nan_buffer(in.q.shape()), dk = nan_buffer(in.k.shape()),
         dv = nan_buffer(in.v.shape());
  auto backward = reference ? cuda::attention_backward_reference : cuda::attention_backward;
  backward(s, in.q.data<float>(), in.k.data<float>(), in.v.data<float>(), lse.data<float>(),
           in.dout.data<float>(), dscores.data<float>(), dq.data<float>(), dk.data<float>(), dv.data<float>());
  return {host(dscores), host(dq), host(dk), host(dv)};
}

void check_backward(const std::string& what, const Backward& got, const Backward& want, double bound,
                    double dv_bound) {
  test::check_close(what + ": dscores", got.dscores, want.dscores, bound, 0.0);
  test::check_close(what + ": dq", got.dq, want.dq, bound, 0.0);
  test::check_close(what + ": dk", got.dk, want.dk, bound, 0.0);
  test::check_close(what + ": dv", got.dv, want.dv, dv_bound, 0.0);
}
void check_backward(const std::string& what, const Backward& got, const Backward& want, double bound) {
  check_backward(what, got, want, bound, bound);
}

}  // namespace

TEST_CASE("cuda attention: the tiled kernels against the per-row reference") {
  for (const AttentionCase& c : kCases) {
    INFO(c.name());
    const Inputs in = make_inputs(c);
    const Forward want = run_forward(in, /*reference=*/true), got = run_forward(in, /*reference=*/false);
    test::check_close(c.name() + ": out", got.out, want.out, kForwardBound, 0.0);
    test::check_close(c.name() + ": lse", got.lse, want.lse, kForwardBound, 0.0);
    // both backwards from the reference's lse, so only their own sums differ
    // dv = Σ P M dout never meets D: the reference's bits on cuda_sim/
    check_backward(c.name(), run_backward(in, want.lse_on_device, false),
                   run_backward(in, want.lse_on_device, true), kBackwardBound, kSameSumsBound);
  }
}

#ifdef LINA_CUDA_SIM
TEST_CASE("cuda attention: the tiled kernels give the same bits under every thread order") {
  const AttentionCase cases[] = {kCases[2], kCases[3], kCases[4]};
  const cuda_sim::ThreadOrder order_before = cuda_sim::thread_order();
  for (const AttentionCase& c : cases) {
    INFO(c.name());
    const Inputs in = make_inputs(c);
    cuda_sim::set_thread_order(cuda_sim::ThreadOrder::Forward);
    const Forward want = run_forward(in, false);
    const Backward want_grads = run_backward(in, want.lse_on_device, false);
    for (auto [order, name] : {std::pair{cuda_sim::ThreadOrder::Reverse, "reverse"},
                               std::pair{cuda_sim::ThreadOrder::Shuffle, "shuffled"}}) {
      cuda_sim::set_thread_order(order, 7);
      const Forward got = run_forward(in, false);
      test::check_close(c.name() + ", " + name + ": out", got.out, want.out, 0.0, 0.0);
      test::check_close(c.name() + ", " + name + ": lse", got.lse, want.lse, 0.0, 0.0);
      check_backward(c.name() + ", " + name, run_backward(in, want.lse_on_device, false), want_grads, 0.0);
    }
  }
  cuda_sim::set_thread_order(order_before);
}
#endif
