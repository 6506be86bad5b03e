// The CPU conv + SiLU + per-head L2 kernels on the model's q/k shape
// (B64 T64 C128 K4, heads of 32).
#include <chrono>
#include <cstdio>
#include <vector>
#include <cstdint>
#include "backend_cpu/cpu_kernels.h"
using namespace std::chrono;
int main() {
  const int64_t B = 64, T = 64, C = 128, K = 4, n = B * T * C;
  const int copies = 8;
  std::vector<std::vector<float>> x(copies, std::vector<float>(n, 0.1f)), y(copies, std::vector<float>(n)), dy(copies, std::vector<float>(n, 0.01f)), dx(copies, std::vector<float>(n));
  for (auto& v : x) for (int64_t i = 0; i < n; ++i) v[i] = 0.01f * float((i * 7919) % 201 - 100);
  std::vector<float> w(C * K, 0.2f), dw(C * K), norm(n / 32);
  for (int r = 0; r < 3; ++r) {
    int reps = 100;
    auto t0 = steady_clock::now();
    for (int i = 0; i < reps; ++i) { int j = i % copies; lina::cpu::causal_conv1d_silu_l2_forward<float>(x[j].data(), w.data(), y[j].data(), norm.data(), B, T, C, K, 32, 1e-12f, 0.17f); }
    double f = duration<double>(steady_clock::now() - t0).count() / reps;
    t0 = steady_clock::now();
    for (int i = 0; i < reps; ++i) { int j = i % copies; lina::cpu::causal_conv1d_silu_l2_backward<float>(x[j].data(), w.data(), norm.data(), dy[j].data(), dx[j].data(), dw.data(), B, T, C, K, 32, 1e-12f, 0.17f); }
    double b = duration<double>(steady_clock::now() - t0).count() / reps;
    printf("fwd %.3f ms bwd %.3f ms\n", f * 1e3, b * 1e3);
  }
}
