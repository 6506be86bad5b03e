// The dX products of one layer's q, k and v (dY 4096x128 by W 128x128 each),
// summed as the autograd walk did (each product into a new tensor, then
// add_inplace) and as it does now (the second and third added by the GEMM,
// beta = 1). Median of 15 rounds of 20.
#include <chrono>
#include <cstdio>
#include <vector>
#include <cstdint>
#include <algorithm>
#include "backend_cpu/cpu_kernels.h"
#include "core/kernels.h"
#include "core/tensor.h"
using namespace std::chrono;
int main() {
  const int64_t M = 4096, K = 128, N = 128;
  const int copies = 4;
  std::vector<lina::Tensor> dy, dx, tmp;
  for (int j = 0; j < copies * 3; ++j) dy.push_back(lina::Tensor::full({M, N}, 0.01, lina::DType::f32));
  lina::Tensor w = lina::Tensor::full({N, K}, 0.02, lina::DType::f32);
  std::vector<double> ra, rb;
  for (int r = 0; r < 15; ++r) {
    const int reps = 20;
    auto t0 = steady_clock::now();
    for (int i = 0; i < reps; ++i) {
      const int j = i % copies;
      lina::kernels::GemmShape g{1, M, K, N};
      lina::Tensor acc = lina::Tensor::empty({M, K}, lina::DType::f32);
      lina::kernels::gemm(g, dy[3 * j], w, acc);
      for (int p = 1; p < 3; ++p) {
        lina::Tensor t = lina::Tensor::empty({M, K}, lina::DType::f32);
        lina::kernels::gemm(g, dy[3 * j + p], w, t);
        lina::kernels::add_inplace(acc, t);
      }
    }
    ra.push_back(duration<double>(steady_clock::now() - t0).count() / reps * 1e3);
    t0 = steady_clock::now();
    for (int i = 0; i < reps; ++i) {
      const int j = i % copies;
      lina::kernels::GemmShape g{1, M, K, N};
      lina::Tensor acc = lina::Tensor::empty({M, K}, lina::DType::f32);
      lina::kernels::gemm(g, dy[3 * j], w, acc);
      for (int p = 1; p < 3; ++p) lina::kernels::gemm(g, dy[3 * j + p], w, acc, 1.0, 1.0);
    }
    rb.push_back(duration<double>(steady_clock::now() - t0).count() / reps * 1e3);
  }
  std::sort(ra.begin(), ra.end()); std::sort(rb.begin(), rb.end());
  printf("dX of q, k, v: products then adds %.3f ms, products adding (beta 1) %.3f ms (medians of 15)\n", ra[7], rb[7]);
}
