// The CPU backend's float products on OpenBLAS (backend_cpu/openblas.h)
// against the same products on Eigen, the reference: every transpose
// combination, β = 0, 1 and ½, products below and above the size that is
// cut into one block per thread, a batch with a shared right matrix, and a
// long inner dimension as in the weight gradients. Skipped, saying so, where
// libopenblas.so.0 is not installed.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "backend_cpu/cpu_kernels.h"
#include "backend_cpu/openblas.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "tests/harness.h"

using namespace lina;

namespace {

std::vector<float> random_floats(int64_t n, Rng& rng) {
  return Tensor::rand({n}, rng, -1.0, 1.0, DType::F32).to_vector<float>();
}

// C = alpha·op(A)·op(B) + beta·C on the given GEMM, from the same inputs.
std::vector<float> product(cpu::CpuGemm gemm, int64_t batch, int64_t M, int64_t N, int64_t K,
                           bool ta, bool tb, bool shared_b, float beta, uint64_t seed) {
  Rng rng(seed);
  const std::vector<float> a = random_floats(batch * M * K, rng),
                           b = random_floats((shared_b ? 1 : batch) * K * N, rng);
  std::vector<float> c = random_floats(batch * M * N, rng);
  REQUIRE(cpu::set_cpu_gemm(gemm));
  cpu::gemm<float>(batch, M, N, K, a.data(), ta, M * K, b.data(), tb, shared_b ? 0 : K * N,
                   c.data(), M * N, 0.75f, beta);
  return c;
}

}  // namespace

TEST_CASE("float products: OpenBLAS and Eigen agree") {
  const cpu::CpuGemm before = cpu::cpu_gemm();
  if (!cpu::openblas()) {
    MESSAGE("SKIPPED: libopenblas.so.0 is not installed, the float products run on Eigen");
    CHECK_FALSE(cpu::set_cpu_gemm(cpu::CpuGemm::OpenBlas));
    return;
  }
  struct Shape {
    int64_t batch, M, N, K;
    bool shared_b;
  };
  const Shape shapes[] = {
      {1, 5, 7, 3, false},       // tiny: one block
      {1, 4096, 128, 128, false},  // a projection at B64×T64: one block per thread
      {1, 128, 128, 4096, false},  // its weight gradient's size (the long inner dimension)
      {1, 33, 200, 17, false},   // odd sizes, cut by columns
      {6, 9, 11, 13, true},      // a batch with one shared right matrix
  };
  for (const Shape& s : shapes)
    for (int transposes = 0; transposes < 4; ++transposes)
      for (float beta : {0.0f, 1.0f, 0.5f}) {
        const bool ta = transposes & 1, tb = transposes & 2;
        INFO("batch " << s.batch << ", " << s.M << "x" << s.N << "x" << s.K << ", ta " << ta
                      << ", tb " << tb << ", beta " << beta);
        const uint64_t seed = uint64_t(s.M * 7 + s.K + transposes);
        const std::vector<float> blas =
            product(cpu::CpuGemm::OpenBlas, s.batch, s.M, s.N, s.K, ta, tb, s.shared_b, beta, seed);
        const std::vector<float> eigen =
            product(cpu::CpuGemm::Eigen, s.batch, s.M, s.N, s.K, ta, tb, s.shared_b, beta, seed);
        const double err = test::max_abs_diff(blas, eigen);  // +∞ on a NaN
        // sums of K products of numbers in [−1, 1]: float rounding grows like √K
        CHECK(err <= 2e-6 * double(s.K));
      }
  cpu::set_cpu_gemm(before);
  CHECK(cpu::cpu_gemm() == before);
}

// A product whose K is much longer than C's sides (a weight gradient) is cut
// along K, each thread's part summed into C in thread order. Against a plain
// loop in double, on either GEMM, with 2 and 3 threads (an uneven cut), every
// transpose combination and β; and the same bits on a second run.
TEST_CASE("products cut along a long inner dimension match a plain loop, and repeat bit for bit") {
  const cpu::CpuGemm before = cpu::cpu_gemm();
#ifndef _OPENMP
  MESSAGE("SKIPPED: built without OpenMP, no product is cut over threads");
  return;
#else
  const int threads_before = omp_get_max_threads();
  struct Shape {
    int64_t M, N, K;
  };
  for (cpu::CpuGemm gemm : {cpu::CpuGemm::Eigen, cpu::CpuGemm::OpenBlas}) {
    if (!cpu::set_cpu_gemm(gemm)) {
      MESSAGE("SKIPPED: the OpenBLAS half (libopenblas.so.0 is not installed)");
      continue;
    }
    for (int threads : {2, 3}) {
      omp_set_num_threads(threads);
      for (Shape s : {Shape{128, 128, 4096}, Shape{4, 128, 4096}, Shape{40, 24, 5001}})
        for (int transposes = 0; transposes < 4; ++transposes)
          for (float beta : {0.0f, 1.0f, 0.5f}) {
            const bool ta = transposes & 1, tb = transposes & 2;
            INFO(cpu::cpu_gemm_name() << ", " << threads << " threads, " << s.M << "x" << s.N << "x"
                                      << s.K << ", ta " << ta << ", tb " << tb << ", beta " << beta);
            Rng rng(uint64_t(s.M + s.K + transposes));
            const std::vector<float> a = random_floats(s.M * s.K, rng), b = random_floats(s.K * s.N, rng),
                                     c0 = random_floats(s.M * s.N, rng);
            std::vector<float> c = c0, again = c0;
            cpu::gemm<float>(1, s.M, s.N, s.K, a.data(), ta, 0, b.data(), tb, 0, c.data(), 0, 0.75f, beta);
            cpu::gemm<float>(1, s.M, s.N, s.K, a.data(), ta, 0, b.data(), tb, 0, again.data(), 0, 0.75f, beta);
            CHECK(c == again);
            std::vector<double> want(c.size());
            for (int64_t i = 0; i < s.M; ++i)
              for (int64_t j = 0; j < s.N; ++j) {
                double sum = 0;
                for (int64_t k = 0; k < s.K; ++k)
                  sum += double(ta ? a[size_t(k * s.M + i)] : a[size_t(i * s.K + k)]) *
                         double(tb ? b[size_t(j * s.K + k)] : b[size_t(k * s.N + j)]);
                want[size_t(i * s.N + j)] = 0.75 * sum + double(beta) * double(c0[size_t(i * s.N + j)]);
              }
            const double err = test::max_abs_diff(c, want);  // +∞ on a NaN
            CHECK(err <= 2e-6 * double(s.K));
          }
    }
  }
  omp_set_num_threads(threads_before);
  cpu::set_cpu_gemm(before);
  CHECK(cpu::cpu_gemm() == before);
#endif
}
