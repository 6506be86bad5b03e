// The CUDA causal attention (backend_cuda/attention_device.h) emulated on the
// host: its per-thread functions run in grid-stride order and are compared
// with the CPU kernel (backend_cpu/attention.cpp). Outputs start as NaN, so
// an element a thread forgets to write fails the comparison. No GPU needed.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend_cpu/cpu_kernels.h"
#include "backend_cuda/attention_device.h"

using namespace lina;
using namespace lina::cuda;
using Buffer = std::vector<float>;

namespace {

Buffer randn(int64_t n) {
  static std::mt19937 gen(777);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Buffer b(static_cast<size_t>(n));
  for (float& x : b) x = normal(gen);
  return b;
}
Buffer nans(int64_t n) { return Buffer(static_cast<size_t>(n), std::numeric_limits<float>::quiet_NaN()); }

// A grid of 96 threads striding over n items, as a small GPU grid would.
template <class PerThread>
void run_grid(int64_t n, PerThread per_thread) {
  const int64_t threads = 96;
  for (int64_t t = 0; t < threads; ++t)
    for (int64_t i = t; i < n; i += threads) per_thread(i);
}

void check_close(const Buffer& got, const Buffer& want, const char* what) {
  REQUIRE(got.size() == want.size());
  double scale = 0;
  for (float w : want) scale = std::max(scale, double(std::fabs(w)));
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double diff = std::fabs(double(got[i]) - double(want[i]));
    if (!(diff <= worst)) worst = std::isnan(diff) ? INFINITY : diff;
  }
  INFO(what << ": worst difference " << worst << " against max " << scale);
  CHECK(worst <= 1e-5 * scale + 1e-6);
}

}  // namespace

TEST_CASE("cuda attention (host emulation) equals the CPU kernel, forward and backward") {
  const AttentionShape shapes[] = {
      {2, 5, 5, 4, 2, 8, 0.35},      // grouped-query heads
      {1, 3, 7, 2, 2, 4, 0.5},       // cached keys
      {1, 70, 70, 4, 2, 32, 0.177},  // more than one CPU tile
      {1, 1, 9, 4, 1, 4, 1.0},       // one new token over a cache
  };
  for (const AttentionShape& s : shapes) {
    INFO("B " << s.B << " Tq " << s.Tq << " Tk " << s.Tk << " H " << s.H << " Hkv " << s.Hkv);
    const int64_t nq = s.B * s.Tq * s.H * s.d, nkv = s.B * s.Tk * s.Hkv * s.d;
    const int64_t np = s.B * s.H * s.Tq * s.Tk;
    Buffer q = randn(nq), k = randn(nkv), v = randn(nkv), dout = randn(nq);

    Buffer probs_cpu(np), out_cpu(nq), ds_cpu(np), dq_cpu(nq), dk_cpu(nkv), dv_cpu(nkv);
    cpu::attention_forward<float>(s, q.data(), k.data(), v.data(), probs_cpu.data(), out_cpu.data());
    cpu::attention_backward<float>(s, q.data(), k.data(), v.data(), probs_cpu.data(), dout.data(),
                                   ds_cpu.data(), dq_cpu.data(), dk_cpu.data(), dv_cpu.data());

    Buffer probs = nans(np), out = nans(nq), ds = nans(np), dq = nans(nq), dk = nans(nkv), dv = nans(nkv);
    run_grid(s.B * s.H * s.Tq, [&](int64_t r) {
      attention_forward_thread(r, s, q.data(), k.data(), v.data(), probs.data(), out.data());
    });
    run_grid(s.B * s.H * s.Tq, [&](int64_t r) {
      attention_backward_query_thread(r, s, k.data(), v.data(), probs.data(), dout.data(),
                                      ds.data(), dq.data());
    });
    run_grid(s.B * s.Hkv * s.Tk, [&](int64_t r) {
      attention_backward_key_thread(r, s, q.data(), probs.data(), dout.data(), ds.data(),
                                    dk.data(), dv.data());
    });
    check_close(probs, probs_cpu, "probs");
    check_close(out, out_cpu, "out");
    check_close(ds, ds_cpu, "dscores");
    check_close(dq, dq_cpu, "dq");
    check_close(dk, dk_cpu, "dk");
    check_close(dv, dv_cpu, "dv");
  }
}
