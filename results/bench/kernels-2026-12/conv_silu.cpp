// The CPU conv + SiLU kernels on the model's shape (B64 T64 C128 K4),
// "hot" (one buffer) and "cold" (16 rotated buffers).
#include <chrono>
#include <cstdio>
#include <vector>
#include <cstdint>
#include "backend_cpu/cpu_kernels.h"
using namespace std::chrono;
int main() {
  const int64_t B = 64, T = 64, C = 128, K = 4, n = B * T * C;
  const int copies = 16;
  std::vector<std::vector<float>> x(copies, std::vector<float>(n, 0.1f)), y(copies, std::vector<float>(n)), dy(copies, std::vector<float>(n, 0.01f)), dx(copies, std::vector<float>(n));
  std::vector<float> w(C * K, 0.2f), dw(C * K);
  for (int hot = 1; hot >= 0; --hot) {
    for (int r = 0; r < 3; ++r) {
      int reps = 200;
      auto t0 = steady_clock::now();
      for (int i = 0; i < reps; ++i) { int j = hot ? 0 : i % copies; lina::cpu::causal_conv1d_silu_forward<float>(x[j].data(), w.data(), y[j].data(), B, T, C, K); }
      double f = duration<double>(steady_clock::now() - t0).count() / reps;
      t0 = steady_clock::now();
      for (int i = 0; i < reps; ++i) { int j = hot ? 0 : i % copies; lina::cpu::causal_conv1d_silu_backward<float>(x[j].data(), w.data(), dy[j].data(), dx[j].data(), dw.data(), B, T, C, K); }
      double b = duration<double>(steady_clock::now() - t0).count() / reps;
      printf("%s fwd %.3f ms bwd %.3f ms\n", hot ? "hot " : "cold", f * 1e3, b * 1e3);
    }
  }
}
