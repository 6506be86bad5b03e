// The small products of backend_cpu/small_matmul.h, which the chunked scan
// (backend_cpu/scan_chunked.cpp) and the fused attention
// (backend_cpu/attention.cpp) are built from, against plain loops: the
// fixed-size products, triangular solves, lane sums and transpose, and the
// run-time-size product.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend_cpu/small_matmul.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "tests/harness.h"

using namespace lina;
using namespace lina::test;

TEST_CASE("small products with run-time sizes: every remainder of rows, vectors and columns against plain loops") {
  Rng rng(6);
  // (M, N, K): whole blocks; leftover rows, vectors and columns; one row; N below one vector
  const int sizes[][3] = {{16, 32, 32}, {7, 45, 13}, {1, 64, 5}, {9, 3, 17}, {16, 19, 64}};
  for (const auto& size : sizes) {
    const int M = size[0], N = size[1], K = size[2], lda = K + 3, lda_t = M + 2, ldb = N + 5, ldc = N + 1;
    INFO("M " << M << " N " << N << " K " << K);
    const std::vector<float> A = random_vector<float>(M * lda, rng, -1, 1),
                             At = random_vector<float>(K * lda_t, rng, -1, 1),
                             B = random_vector<float>(K * ldb, rng, -1, 1),
                             C0 = random_vector<float>(M * ldc, rng, -1, 1);
    std::vector<float> want = C0, want_t = C0;  // A B, and C0 + Aᵀ B with At read as K×M
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) {
        double p = 0, pt = 0;
        for (int k = 0; k < K; ++k) {
          p += double(A[i * lda + k]) * B[k * ldb + j];
          pt += double(At[k * lda_t + i]) * B[k * ldb + j];
        }
        want[size_t(i * ldc + j)] = float(p);
        want_t[size_t(i * ldc + j)] = float(C0[size_t(i * ldc + j)] + pt);
      }
    std::vector<float> got = C0, got_t = C0;  // columns past N must stay C0's
    cpu::small::matmul_dynamic(M, N, K, A.data(), lda, B.data(), ldb, got.data(), ldc);
    cpu::small::matmul_dynamic<true, cpu::small::Store::Add>(M, N, K, At.data(), lda_t, B.data(), ldb,
                                                            got_t.data(), ldc);
    check_close("A B", got, want, 1e-5);
    check_close("C + Aᵀ B", got_t, want_t, 1e-5);
  }
}

TEST_CASE("small products: matmul, transposed matmul, triangular solves, lane sums and transpose against plain loops") {
  Rng rng(5);
  constexpr int M = 16, N = 32, K = 16;
  const std::vector<float> A = random_vector<float>(M * K, rng, -1, 1),
                           B = random_vector<float>(K * N, rng, -1, 1),
                           C0 = random_vector<float>(M * N, rng, -1, 1);
  std::vector<float> want(M * N), want_t(M * N);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double p = 0, pt = 0;  // (A B)_ij and (Aᵀ B)_ij, A read as K×M for the second
      for (int k = 0; k < K; ++k) {
        p += double(A[i * K + k]) * B[k * N + j];
        pt += double(A[k * M + i]) * B[k * N + j];
      }
      want[i * N + j] = float(p);
      want_t[i * N + j] = float(C0[i * N + j] - pt);
    }
  std::vector<float> got(M * N), got_t = C0;
  cpu::small::matmul<M, N, K>(A.data(), K, B.data(), N, got.data(), N);
  cpu::small::matmul<M, N, K, true, cpu::small::Store::Sub>(A.data(), M, B.data(), N, got_t.data(), N);
  check_close("A B", got, want, 1e-6);
  check_close("C − Aᵀ B", got_t, want_t, 1e-6);

  // (I + A) X = B and (I + A)ᵀ X = B for a strictly lower A: multiply back.
  constexpr int C = 16, W = 32;
  std::vector<float> Al = random_vector<float>(C * C, rng, -0.3, 0.3);
  for (int r = 0; r < C; ++r)
    for (int i = r; i < C; ++i) Al[size_t(r * C + i)] = 0;  // strictly lower
  const std::vector<float> rhs = random_vector<float>(C * W, rng, -1, 1);
  for (bool transposed : {false, true}) {
    std::vector<float> X = rhs;
    if (transposed) cpu::small::solve_unit_lower_transposed<C, W>(Al.data(), C, X.data(), W);
    else cpu::small::solve_unit_lower<C, W>(Al.data(), C, X.data(), W);
    std::vector<float> back(C * W);  // (I + A) X, or (I + A)ᵀ X
    for (int r = 0; r < C; ++r)
      for (int j = 0; j < W; ++j) {
        double sum = X[size_t(r * W + j)];
        for (int i = 0; i < C; ++i)
          sum += double(transposed ? Al[size_t(i * C + r)] : Al[size_t(r * C + i)]) * X[size_t(i * W + j)];
        back[size_t(r * W + j)] = float(sum);
      }
    check_close(transposed ? "(I + A)ᵀ X" : "(I + A) X", back, rhs, 1e-5);
  }

  // N = 16: one vector per row, the 16 rows formed together
  const std::vector<float> B32x16 = random_vector<float>(32 * 16, rng, -1, 1);
  std::vector<float> sq(16 * 16), sq_want(16 * 16);
  cpu::small::matmul<16, 16, 32>(B.data(), 32, B32x16.data(), 16, sq.data(), 16);  // B read as 16×32
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      double p = 0;
      for (int k = 0; k < 32; ++k) p += double(B[size_t(i * 32 + k)]) * B32x16[size_t(k * 16 + j)];
      sq_want[size_t(i * 16 + j)] = float(p);
    }
  check_close("16×16 A B", sq, sq_want, 1e-6);

  // sum_of_lanes_each of lanes_of_dot: row r of X (64×16 doubles) times y, in blocks of kLanes<double> rows
  const std::vector<double> Xr = random_vector<double>(64 * 16, rng, -1, 1),
                            y = random_vector<double>(16, rng, -1, 1);
  std::vector<cpu::small::Vec<double>> vecs(64);
  std::vector<double> row_sum(64), want_sum(64);
  for (int r = 0; r < 64; ++r) {
    vecs[size_t(r)] = cpu::small::lanes_of_dot<16>(Xr.data() + r * 16, y.data());
    for (int j = 0; j < 16; ++j) want_sum[size_t(r)] += Xr[size_t(r * 16 + j)] * y[size_t(j)];
  }
  cpu::small::sum_of_lanes_each<64>(vecs.data(), row_sum.data());
  check_close("sum_of_lanes_each of lanes_of_dot", row_sum, want_sum, 1e-12);

  // sum_of_lanes: powers of two, so any order of addition gives the exact sum and
  // every lane counts once (a lane dropped or added twice changes the sum)
  // (as many lanes as the machine's SIMD register holds: 16 floats with AVX-512, 8 with AVX2)
  constexpr int Lf = cpu::small::kLanes<float>, Ld = cpu::small::kLanes<double>;
  cpu::small::Vec<float> lanes;
  for (int j = 0; j < Lf; ++j) lanes[j] = float(1 << j);
  CHECK(cpu::small::sum_of_lanes<float>(lanes) == float((1 << Lf) - 1));
  cpu::small::Vec<double> lanes_d;
  for (int j = 0; j < Ld; ++j) lanes_d[j] = double(1 << j);
  CHECK(cpu::small::sum_of_lanes<double>(lanes_d) == double((1 << Ld) - 1));

  std::vector<double> X = random_vector<double>(16 * 48, rng, -1, 1), Xt(48 * 16);
  cpu::small::transpose<16, 32>(X.data(), 48, Xt.data());  // the first 32 of 48 columns
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 32; ++j) REQUIRE(Xt[j * 16 + i] == X[i * 48 + j]);
}
