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

#include "backend_cpu/cpu_kernels.h"
#include "backend_cpu/openblas.h"
#include "core/rng.h"
#include "core/tensor.h"

using namespace lina;

namespace {

std::vector<float> random_floats(int64_t n, Rng& rng) {
  return Tensor::rand({n}, rng, -1.0, 1.0, DType::f32).to_vector<float>();
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
    MESSAGE("skipped: libopenblas.so.0 is not installed, the float products run on Eigen");
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
        double err = 0;
        for (size_t i = 0; i < eigen.size(); ++i)
          err = std::max(err, double(std::fabs(blas[i] - eigen[i])));
        // sums of K products of numbers in [−1, 1]: float rounding grows like √K
        CHECK(err <= 2e-6 * double(s.K));
      }
  cpu::set_cpu_gemm(before);
  CHECK(cpu::cpu_gemm() == before);
}
