// copy_strided on the shapes of gdn's β/α split ([64, 64, 4] out of [64, 64, 8])
// and of a head permute ([64, 64, 4, 32] -> [64, 4, 64, 32]).
#include <chrono>
#include <cstdio>
#include <vector>
#include "backend_cpu/cpu_kernels.h"
using namespace std::chrono;
template <class F> double ms(F f) { for (int i = 0; i < 5; ++i) f(); auto t0 = steady_clock::now(); for (int i = 0; i < 200; ++i) f(); return duration<double>(steady_clock::now() - t0).count() / 200 * 1e3; }
int main() {
  std::vector<float> a(64 * 64 * 8, 1.f), b(64 * 64 * 4), c(64 * 64 * 128, 1.f), d(64 * 64 * 128);
  const int64_t shape[] = {64, 64, 4}, ss[] = {512, 8, 1}, ds[] = {256, 4, 1};
  const int64_t pshape[] = {64, 4, 64, 32}, pss[] = {64 * 128, 32, 128, 1}, pds[] = {4 * 64 * 32, 64 * 32, 32, 1};
  for (int r = 0; r < 3; ++r)
    printf("slice [64,64,4] of [64,64,8]: %.4f ms; permute [64,64,4,32] -> [64,4,64,32]: %.4f ms\n",
           ms([&] { lina::cpu::copy_strided<float>(a.data(), ss, b.data(), ds, shape, 3, false); }),
           ms([&] { lina::cpu::copy_strided<float>(c.data(), pss, d.data(), pds, pshape, 4, false); }));
}
