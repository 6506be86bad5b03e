// One layer's β and α projections (x [4096, 128], 4 outputs each): forward,
// dX (added into x's gradient) and dW, as two products or as one of 8 outputs.
#include <chrono>
#include <cstdio>
#include <vector>
#include <cstdint>
#include "backend_cpu/cpu_kernels.h"
using namespace std::chrono;
int main() {
  const int64_t M = 4096, K = 128;
  const int copies = 16;
  std::vector<std::vector<float>> x(copies, std::vector<float>(M * K, 0.1f)), dxa(copies, std::vector<float>(M * K)), dxb(copies, std::vector<float>(M * K)), gx(copies, std::vector<float>(M * K, 0.3f));
  std::vector<float> w(8 * K, 0.02f), dw(8 * K), y(M * 8), dy(M * 8, 0.01f), y4(M * 4), y4b(M * 4);
  for (int r = 0; r < 5; ++r) {
    const int reps = 200;
    auto t0 = steady_clock::now();
    for (int i = 0; i < reps; ++i) {
      int j = i % copies;
      // two projections of N = 4: forward, dX of each then added into x's gradient, dW of each
      lina::cpu::gemm<float>(1, M, 4, K, x[j].data(), false, 0, w.data(), true, 0, y4.data(), 0, 1.f, 0.f);
      lina::cpu::gemm<float>(1, M, 4, K, x[j].data(), false, 0, w.data() + 4 * K, true, 0, y4b.data(), 0, 1.f, 0.f);
      lina::cpu::gemm<float>(1, M, K, 4, dy.data(), false, 0, w.data(), false, 0, dxa[j].data(), 0, 1.f, 0.f);
      lina::cpu::gemm<float>(1, M, K, 4, dy.data() + M * 4, false, 0, w.data() + 4 * K, false, 0, dxb[j].data(), 0, 1.f, 0.f);
      for (int64_t e = 0; e < M * K; ++e) gx[j][e] += dxa[j][e];
      for (int64_t e = 0; e < M * K; ++e) gx[j][e] += dxb[j][e];
      lina::cpu::gemm<float>(1, 4, K, M, dy.data(), true, 0, x[j].data(), false, 0, dw.data(), 0, 1.f, 0.f);
      lina::cpu::gemm<float>(1, 4, K, M, dy.data() + M * 4, true, 0, x[j].data(), false, 0, dw.data() + 4 * K, 0, 1.f, 0.f);
    }
    double two = duration<double>(steady_clock::now() - t0).count() / reps;
    t0 = steady_clock::now();
    for (int i = 0; i < reps; ++i) {
      int j = i % copies;
      lina::cpu::gemm<float>(1, M, 8, K, x[j].data(), false, 0, w.data(), true, 0, y.data(), 0, 1.f, 0.f);
      lina::cpu::gemm<float>(1, M, K, 8, dy.data(), false, 0, w.data(), false, 0, dxa[j].data(), 0, 1.f, 0.f);
      for (int64_t e = 0; e < M * K; ++e) gx[j][e] += dxa[j][e];
      lina::cpu::gemm<float>(1, 8, K, M, dy.data(), true, 0, x[j].data(), false, 0, dw.data(), 0, 1.f, 0.f);
    }
    double one = duration<double>(steady_clock::now() - t0).count() / reps;
    printf("beta and alpha as two products: %.3f ms, as one: %.3f ms (per layer, fwd + bwd)\n", two * 1e3, one * 1e3);
  }
}
