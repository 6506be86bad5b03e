// The fixed-size chunked scan (backend_cpu/scan_chunked_fixed.cpp), forward
// and backward, at the model's training shape: gated delta rule, B64×T64,
// 4 heads of 32, chunks of CHUNK (default 16), no initial state and no dS_T.
// The "before" build compiles the previous scan_chunked_fixed.cpp into the
// binary (git show REV:backend_cpu/scan_chunked_fixed.cpp > old.cpp, then add
// old.cpp to the g++ line), whose definitions the linker then takes instead
// of the library's.
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "backend_cpu/cpu_kernels.h"
#include "backend_cpu/scan_chunk_parts.h"
#ifndef CHUNK
#define CHUNK 16
#endif
using namespace lina;
using namespace std::chrono;
int main() {
  const int64_t B = 64, T = 64, H = 4, d = 32, C = CHUNK, n = B * T * H * d, g = B * T * H,
                chunks = T / C;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-0.3f, 0.3f);
  std::vector<float> q(n), k(n), v(n), beta(g), gate(g), dout(n), o(n), s_final(B * H * d * d),
      states(B * H * chunks * d * d), dq(n), dk(n), dv(n), dbeta(g), dgate(g), ds0(B * H * d * d);
  for (auto* x : {&q, &k, &v, &dout})
    for (auto& e : *x) e = u(rng);
  for (auto& e : beta) e = 0.5f + u(rng);
  for (auto& e : gate) e = -0.1f + 0.1f * u(rng);
  const ScanShape s{B, T, H, d, ScanRule::GatedDelta};
  const ScanInputs<float> in{q.data(), k.data(), v.data(), beta.data(), gate.data()};
  const ScanInputGrads<float> grads{dq.data(), dk.data(), dv.data(), dbeta.data(), dgate.data(), ds0.data()};
  for (int round = 0; round < 5; ++round) {
    const int reps = 50;
    auto t0 = steady_clock::now();
    for (int i = 0; i < reps; ++i)
      cpu::scan_chunk::fixed_forward<float>(s, C, in, nullptr, o.data(), s_final.data(), states.data());
    const double f = duration<double>(steady_clock::now() - t0).count() / reps * 1e3;
    t0 = steady_clock::now();
    for (int i = 0; i < reps; ++i)
      cpu::scan_chunk::fixed_backward<float>(s, C, in, states.data(), dout.data(), nullptr, grads);
    const double b = duration<double>(steady_clock::now() - t0).count() / reps * 1e3;
    printf("gdn scan B64 T64 C%d: forward %.3f ms, backward %.3f ms\n", int(C), f, b);
  }
}
