// The fixed-size chunked scan (backend_cpu/scan_chunked_fixed.cpp) against
// its references, the Eigen chunked scans (backend_cpu/scan_chunked.cpp for
// the delta rules, scan_chunked_gated.cpp for the others): output, final
// state, saved chunk states and every gradient, in float32 and float64, for
// every rule it serves, at the model's head size, for the chunk lengths it is
// compiled for, with T a multiple of C, not a multiple, and shorter than C.
// Also the small products it is built from, and the run-time-size product
// of backend_cpu/attention.cpp, against plain loops.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend_cpu/scan_chunk_parts.h"
#include "backend_cpu/small_matmul.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "tests/harness.h"

using namespace lina;
using namespace lina::cpu::scan_chunk;
using namespace lina::test;

namespace {

// With `ends`, a nonzero S_0 and dS_T; without, none (null), as in training:
// the first chunk then starts from a zero state and the last receives a zero
// dS', and the fixed-size scan skips the products with them.
template <class T>
void compare(ScanRule rule, int64_t C, int64_t T_len, bool ends, double tolerance) {
  const int64_t B = 2, H = 3, d = 32, n = B * T_len * H * d, gates = B * T_len * H;
  const int64_t chunks = (T_len + C - 1) / C;
  const ScanShape s{B, T_len, H, d, rule};
  Rng rng(uint64_t(100 * C + T_len + int(rule)));
  // Keys of norm about 1, β in (0, 1), log-gates in (−0.5, 0): the model's
  // regime, every path of the backward exercised.
  const std::vector<T> q = random_vector<T>(n, rng, -0.3, 0.3), k = random_vector<T>(n, rng, -0.3, 0.3),
                       v = random_vector<T>(n, rng, -1, 1), beta = random_vector<T>(gates, rng, 0, 1),
                       g = random_vector<T>(gates, rng, -0.5, 0), s0 = random_vector<T>(B * H * d * d, rng, -0.5, 0.5),
                       dout = random_vector<T>(n, rng, -1, 1),
                       ds_final = random_vector<T>(B * H * d * d, rng, -1, 1);
  const ScanInputs<T> in{q.data(), k.data(), v.data(), uses_beta(rule) ? beta.data() : nullptr,
                         uses_gate(rule) ? g.data() : nullptr};
  const T* S0 = ends ? s0.data() : nullptr;
  const T* dS_T = ends ? ds_final.data() : nullptr;
  auto run = [&](bool fixed) {
    std::vector<T> o(n), s_final(B * H * d * d), states(B * H * chunks * d * d), dq(n), dk(n),
        dv(n), dbeta(gates), dg(gates, T(0)), ds0(B * H * d * d);
    const ScanInputGrads<T> grads{dq.data(), dk.data(), dv.data(),
                                  uses_beta(rule) ? dbeta.data() : nullptr,
                                  uses_gate(rule) ? dg.data() : nullptr, ds0.data()};
    if (fixed) {
      REQUIRE(fixed_forward(s, C, in, S0, o.data(), s_final.data(), states.data()));
      REQUIRE(fixed_backward(s, C, in, states.data(), dout.data(), dS_T, grads));
    } else if (!uses_beta(rule)) {
      gated_forward(s, C, in, S0, o.data(), s_final.data(), states.data());
      gated_backward(s, C, in, states.data(), dout.data(), dS_T, grads);
    } else {
      delta_forward_eigen(s, C, in, S0, o.data(), s_final.data(), states.data());
      delta_backward_eigen(s, C, in, states.data(), dout.data(), dS_T, grads);
    }
    return std::vector<std::vector<T>>{o, s_final, states, dq, dk, dv, dbeta, dg, ds0};
  };
  const auto fixed = run(true), eigen = run(false);
  const char* names[] = {"o", "S_T", "chunk states", "dq", "dk", "dv", "dbeta", "dg", "dS_0"};
  for (size_t i = 0; i < fixed.size(); ++i) check_close(names[i], fixed[i], eigen[i], tolerance);
}

}  // namespace

TEST_CASE("fixed-size chunked scan: the same results as the Eigen chunked scans") {
  for (ScanRule rule : {ScanRule::Linear, ScanRule::Delta, ScanRule::Gdn,
                        ScanRule::Retnet, ScanRule::Mamba2})
    for (int64_t C : {16, 64})
      for (int64_t T_len : {64, 70, 10, 128})
        for (bool ends : {true, false}) {
          INFO(scan_rule_name(rule) << ", C = " << C << ", T = " << T_len
                                    << (ends ? ", with S_0 and dS_T" : ", from S_0 = 0"));
          compare<float>(rule, C, T_len, ends, 2e-5);
          compare<double>(rule, C, T_len, ends, 1e-12);
        }
}

TEST_CASE("fixed-size chunked scan: compiled for the model's head size, chunk lengths and per-head decays only") {
  const ScanShape s{1, 8, 1, 32, ScanRule::Delta};
  const ScanInputs<float> none{};
  // For anything else the kernel declines before touching any pointer.
  CHECK_FALSE(fixed_forward<float>(s, 8, none, nullptr, nullptr, nullptr, nullptr));
  CHECK_FALSE(fixed_forward<float>(ScanShape{1, 8, 1, 16, ScanRule::Delta}, 16, none, nullptr,
                                   nullptr, nullptr, nullptr));
  CHECK_FALSE(fixed_forward<float>(ScanShape{1, 8, 1, 32, ScanRule::Gla}, 16,
                                   none, nullptr, nullptr, nullptr, nullptr));
  CHECK_FALSE(fixed_backward<float>(s, 32, none, nullptr, nullptr, nullptr, {}));
}

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
