// GELU's backward on the MLP's hidden shape ([64·64, 512] floats): lina's
// unary_backward_fast ("blocks") against the same formula evaluated in
// 256-element stretches on the stack ("stretches"), the change this
// measured; after it, the two columns are the same code.
#include <Eigen/Core>
#include <chrono>
#include <cstdio>
#include <vector>
#include "backend_cpu/unary_fast.h"
#include "core/elementwise_math.h"
using namespace std::chrono;
using Array = Eigen::Array<float, Eigen::Dynamic, 1>;
using In = Eigen::Map<const Array>;
using Out = Eigen::Map<Array>;
constexpr float kGeluC = float(lina::math::Gelu::kC), kGeluA = float(lina::math::Gelu::kA);
constexpr int64_t S = 256;
using Stretch = Eigen::Array<float, Eigen::Dynamic, 1, Eigen::ColMajor, S, 1>;
void gelu_bwd_stretch(const float* x, const float* dy, float* dx, int64_t n) {
  #pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < (n + 16383) / 16384; ++b) {
    int64_t o0 = b * 16384, m0 = std::min<int64_t>(16384, n - o0);
    for (int64_t o = o0; o < o0 + m0; o += S) {
      int64_t m = std::min(S, o0 + m0 - o);
      In X(x + o, m), dY(dy + o, m);
      Stretch th = (kGeluC * (X + kGeluA * X.cube())).tanh();
      Out(dx + o, m) = dY * (0.5f * (1.0f + th) + 0.5f * X * (1.0f - th.square()) * kGeluC * (1.0f + 3.0f * kGeluA * X.square()));
    }
  }
}
int main() {
  const int64_t n = 64 * 64 * 512;
  const int copies = 4;
  std::vector<std::vector<float>> x(copies, std::vector<float>(n)), dy(copies, std::vector<float>(n, 0.01f)), dx(copies, std::vector<float>(n)), dx2(copies, std::vector<float>(n));
  for (auto& v : x) for (int64_t i = 0; i < n; ++i) v[i] = 0.001f * float(i % 4001) - 2.0f;
  for (int r = 0; r < 3; ++r) {
    int reps = 40;
    auto t0 = steady_clock::now();
    for (int i = 0; i < reps; ++i) { int j = i % copies; lina::cpu::unary_backward_fast(lina::UnaryFn::Gelu, x[j].data(), nullptr, dy[j].data(), dx[j].data(), n, 0.f); }
    double a = duration<double>(steady_clock::now() - t0).count() / reps * 1e3;
    t0 = steady_clock::now();
    for (int i = 0; i < reps; ++i) { int j = i % copies; gelu_bwd_stretch(x[j].data(), dy[j].data(), dx2[j].data(), n); }
    double b = duration<double>(steady_clock::now() - t0).count() / reps * 1e3;
    double diff = 0; for (int64_t i = 0; i < n; ++i) diff = std::max(diff, double(std::abs(dx[0][i] - dx2[0][i])));
    printf("gelu backward: blocks %.3f ms, stretches %.3f ms (max diff %g)\n", a, b, diff);
  }
}
