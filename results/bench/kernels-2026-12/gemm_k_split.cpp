// lina::cpu::gemm on weight-gradient shapes (C = AᵀB, K = 4096 tokens),
// against the same product cut along K by hand ("K-split" lines). Built
// against the engine before and after gemm cut long-K products along K, the
// "M/N-split" line (lina's own gemm) gives the before/after (README.md).
#include <chrono>
#include <cstdio>
#include <vector>
#include <cstdint>
#include <omp.h>
#include "backend_cpu/cpu_kernels.h"
using namespace std::chrono;
int main() {
  struct S { int64_t M, N, K; };
  for (S s : {S{128, 128, 4096}, S{512, 128, 4096}, S{128, 512, 4096}, S{4, 128, 4096}}) {
    const int copies = 16;
    std::vector<std::vector<float>> A(copies, std::vector<float>(s.M * s.K, 0.01f)), B(copies, std::vector<float>(s.K * s.N, 0.02f));
    std::vector<float> C(s.M * s.N), P(2 * s.M * s.N);
    for (int split = 0; split < 2; ++split) {
      double best = 1e9;
      for (int r = 0; r < 3; ++r) {
        const int reps = 200;
        auto t0 = steady_clock::now();
        for (int i = 0; i < reps; ++i) {
          int j = i % copies;
          if (!split) {
            lina::cpu::gemm<float>(1, s.M, s.N, s.K, A[j].data(), true, 0, B[j].data(), false, 0, C.data(), 0, 1.f, 0.f);
          } else {
            const int64_t half = s.K / 2;
#pragma omp parallel num_threads(2)
            {
              int t = omp_get_thread_num();
              // A stored K×M (ta), B stored K×N: rows [t·half, (t+1)·half) of each
              lina::cpu::gemm<float>(1, s.M, s.N, half, A[j].data() + t * half * s.M, true, 0, B[j].data() + t * half * s.N, false, 0, P.data() + t * s.M * s.N, 0, 1.f, 0.f);
#pragma omp barrier
#pragma omp for
              for (int64_t e = 0; e < s.M * s.N; ++e) C[e] = P[e] + P[s.M * s.N + e];
            }
          }
        }
        best = std::min(best, duration<double>(steady_clock::now() - t0).count() / reps);
      }
      printf("%ldx%ldx%ld ta %s %.3f ms %.1f GFLOP/s\n", s.M, s.N, s.K, split ? "K-split" : "M/N-split", best * 1e3, 2.0 * s.M * s.N * s.K / best / 1e9);
    }
  }
}
