#include <Eigen/Core>
#include <omp.h>
#include <chrono>
#include <cstdio>
using namespace Eigen;
using RM = Matrix<float, Dynamic, Dynamic, RowMajor>;
void run(int M, int K, int N, bool ta, bool tb, const char* what) {
  RM A = ta ? RM(RM::Random(K, M)) : RM(RM::Random(M, K)), B = tb ? RM(RM::Random(N, K)) : RM(RM::Random(K, N)), C(M, N), C2(M, N);
  int iters = std::max(3, int(4e9 / (2.0 * M * N * K)));
  auto prod = [&](auto& Cb, auto const& Ab, auto const& Bb) {
    if (!ta && !tb) Cb.noalias() += Ab * Bb;
    else if (ta && !tb) Cb.noalias() += Ab.transpose() * Bb;
    else if (!ta && tb) Cb.noalias() += Ab * Bb.transpose();
  };
  auto eigen2 = [&] { C.setZero(); prod(C, A, B); };
  // split: rows of C (M) when M large, else columns of C (N)
  auto split = [&] {
    #pragma omp parallel num_threads(2)
    {
      int t = omp_get_thread_num();
      if (M >= N) {
        int m0 = t * (M / 2), m = t ? M - M / 2 : M / 2;
        auto Cb = C2.middleRows(m0, m);
        Cb.setZero();
        if (!ta) { auto Ab = A.middleRows(m0, m); prod(Cb, Ab, B); }
        else { auto Ab = A.middleCols(m0, m); prod(Cb, Ab, B); }
      } else {
        int n0 = t * (N / 2), n = t ? N - N / 2 : N / 2;
        auto Cb = C2.middleCols(n0, n);
        Cb.setZero();
        if (!tb) { auto Bb = B.middleCols(n0, n); prod(Cb, A, Bb); }
        else { auto Bb = B.middleRows(n0, n); prod(Cb, A, Bb); }
      }
    }
  };
  auto time = [&](auto f) { f(); auto t0 = std::chrono::steady_clock::now(); for (int i = 0; i < iters; ++i) f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters; };
  double te = time(eigen2), ts = time(split);
  double fl = 2.0 * M * N * K;
  std::printf("%-24s %5dx%5dx%5d: eigen-2t %6.1f  split %6.1f GFLOP/s  (%.3f vs %.3f ms) diff %g\n", what, M, K, N, fl / te / 1e9, fl / ts / 1e9, te * 1e3, ts * 1e3, (C - C2).cwiseAbs().maxCoeff());
}
int main() {
  Eigen::setNbThreads(2);
  run(4096, 512, 2048, false, false, "big");
  run(4096, 128, 128, false, true, "fwd qkvo");
  run(4096, 128, 512, false, true, "fwd mlp up");
  run(4096, 512, 128, false, true, "fwd mlp down");
  run(4096, 128, 65, false, true, "fwd head");
  run(4096, 128, 128, false, false, "dX qkvo");
  run(4096, 512, 128, false, false, "dX mlp up");
  run(4096, 128, 512, false, false, "dX mlp down");
  run(128, 4096, 128, true, false, "dW qkvo");
  run(512, 4096, 128, true, false, "dW mlp up");
  run(128, 4096, 512, true, false, "dW mlp down");
}
