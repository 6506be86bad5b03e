// The serial SiLU forward and backward on 524,288 floats, called on rows of
// 128 (as the fused conv does) and of 16384.
#include <chrono>
#include <cstdio>
#include <vector>
#include <cstdint>
#include "backend_cpu/unary_fast.h"
using namespace std::chrono;
int main() {
  const int64_t n = 64 * 64 * 128;
  std::vector<float> x(n), y(n), dy(n, 0.5f), dx(n);
  for (int64_t i = 0; i < n; ++i) x[i] = 0.001f * float(i % 8001 - 4000);
  for (int64_t row : {128, 16384}) {
    for (int r = 0; r < 3; ++r) {
      auto t0 = steady_clock::now();
      for (int rep = 0; rep < 20; ++rep) for (int64_t o = 0; o < n; o += row) lina::cpu::silu_forward_serial(x.data() + o, y.data() + o, row);
      double f = duration<double>(steady_clock::now() - t0).count() / 20;
      t0 = steady_clock::now();
      for (int rep = 0; rep < 20; ++rep) for (int64_t o = 0; o < n; o += row) lina::cpu::silu_backward_serial(x.data() + o, dy.data() + o, dx.data() + o, row);
      double b = duration<double>(steady_clock::now() - t0).count() / 20;
      printf("rows of %ld: silu fwd %.3f ms (%.2f ns/elt) bwd %.3f ms\n", row, f * 1e3, f * 1e9 / n, b * 1e3);
    }
  }
}
