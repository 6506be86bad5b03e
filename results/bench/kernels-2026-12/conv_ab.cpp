// The conv kernels of two revisions in one process (B64 T64 C128 K4, heads of
// 32), built by conv_ab.sh: rounds alternate the old (lina::cpu) and the new
// (lina::cpu_new) kernels.
#include <chrono>
#include <cstdio>
#include <vector>
#include <cstdint>
#include <algorithm>
#include "backend_cpu/cpu_kernels.h"
namespace lina::cpu_new {
template <class T> void causal_conv1d_silu_l2_forward(const T*, const T*, T*, T*, int64_t, int64_t, int64_t, int64_t, int64_t, T, T);
template <class T> void causal_conv1d_silu_l2_backward(const T*, const T*, const T*, const T*, T*, T*, int64_t, int64_t, int64_t, int64_t, int64_t, T, T);
template <class T> void causal_conv1d_silu_forward(const T*, const T*, T*, int64_t, int64_t, int64_t, int64_t);
template <class T> void causal_conv1d_silu_backward(const T*, const T*, const T*, T*, T*, int64_t, int64_t, int64_t, int64_t);
template <class T> void rms_norm_forward(const T*, const T*, T*, T*, int64_t, int64_t, T);
template <class T> void rms_norm_backward(const T*, const T*, const T*, const T*, T*, T*, int64_t, int64_t);
}
using namespace std::chrono;
const int64_t B = 64, T = 64, C = 128, K = 4, n = B * T * C;
const int copies = 4;
std::vector<std::vector<float>> x(copies, std::vector<float>(n, 0.1f)), y(copies, std::vector<float>(n)), dy(copies, std::vector<float>(n, 0.01f)), dx(copies, std::vector<float>(n));
std::vector<float> w(C * K, 0.2f), dw(C * K), norm(n / 32);
template <class F> double timed(F f) { auto t0 = steady_clock::now(); for (int i = 0; i < 10; ++i) f(i % copies); return duration<double>(steady_clock::now() - t0).count() / 10 * 1e3; }
int main() {
  for (auto& v : x) for (int64_t i = 0; i < n; ++i) v[i] = 0.01f * float((i * 7919) % 201 - 100);
  for (int64_t i = 0; i < n; ++i) dy[1][size_t(i)] = 0.01f * float((i * 104729) % 37 - 18);  // a gradient that varies
  double best[2][6]; for (auto& r : best) for (auto& e : r) e = 1e9;
  std::vector<double> ratio[6];
  std::vector<float> rstd(n / 32), rw(128, 1.1f);
  for (int r = 0; r < 30; ++r) {
    double t[2][6];
    for (int v = 0; v < 2; ++v) {
      t[v][0] = timed([&](int j) { if (v) lina::cpu_new::causal_conv1d_silu_l2_forward<float>(x[j].data(), w.data(), y[j].data(), norm.data(), B, T, C, K, 32, 1e-12f, 0.17f); else lina::cpu::causal_conv1d_silu_l2_forward<float>(x[j].data(), w.data(), y[j].data(), norm.data(), B, T, C, K, 32, 1e-12f, 0.17f); });
      t[v][1] = timed([&](int j) { if (v) lina::cpu_new::causal_conv1d_silu_l2_backward<float>(x[j].data(), w.data(), norm.data(), dy[j].data(), dx[j].data(), dw.data(), B, T, C, K, 32, 1e-12f, 0.17f); else lina::cpu::causal_conv1d_silu_l2_backward<float>(x[j].data(), w.data(), norm.data(), dy[j].data(), dx[j].data(), dw.data(), B, T, C, K, 32, 1e-12f, 0.17f); });
      t[v][2] = timed([&](int j) { if (v) lina::cpu_new::causal_conv1d_silu_forward<float>(x[j].data(), w.data(), y[j].data(), B, T, C, K); else lina::cpu::causal_conv1d_silu_forward<float>(x[j].data(), w.data(), y[j].data(), B, T, C, K); });
      // rms_norm over heads of 32 (the recurrent mixers' o_norm), forward and backward
      t[v][4] = timed([&](int j) { if (v) lina::cpu_new::rms_norm_forward<float>(x[j].data(), rw.data(), y[j].data(), rstd.data(), n / 32, 32, 1e-5f); else lina::cpu::rms_norm_forward<float>(x[j].data(), rw.data(), y[j].data(), rstd.data(), n / 32, 32, 1e-5f); });
      t[v][5] = timed([&](int j) { if (v) lina::cpu_new::rms_norm_backward<float>(x[j].data(), rw.data(), rstd.data(), dy[j].data(), dx[j].data(), dw.data(), n / 32, 32); else lina::cpu::rms_norm_backward<float>(x[j].data(), rw.data(), rstd.data(), dy[j].data(), dx[j].data(), dw.data(), n / 32, 32); });
      t[v][3] = timed([&](int j) { if (v) lina::cpu_new::causal_conv1d_silu_backward<float>(x[j].data(), w.data(), dy[j].data(), dx[j].data(), dw.data(), B, T, C, K); else lina::cpu::causal_conv1d_silu_backward<float>(x[j].data(), w.data(), dy[j].data(), dx[j].data(), dw.data(), B, T, C, K); });
    }
    for (int k = 0; k < 6; ++k) { for (int v = 0; v < 2; ++v) best[v][k] = std::min(best[v][k], t[v][k]); ratio[k].push_back(t[1][k] / t[0][k]); }
  }
  // the same bits? both versions on copy 0, gradients compared element by element
  std::vector<float> dx_new(n), dw_new(C * K), y_new(n), norm_new(n / 32);
  lina::cpu::causal_conv1d_silu_l2_forward<float>(x[0].data(), w.data(), y[0].data(), norm.data(), B, T, C, K, 32, 1e-12f, 0.17f);
  lina::cpu_new::causal_conv1d_silu_l2_forward<float>(x[0].data(), w.data(), y_new.data(), norm_new.data(), B, T, C, K, 32, 1e-12f, 0.17f);
  const bool fwd_same = y[0] == y_new && norm == norm_new;
  lina::cpu::causal_conv1d_silu_l2_backward<float>(x[0].data(), w.data(), norm.data(), dy[1].data(), dx[0].data(), dw.data(), B, T, C, K, 32, 1e-12f, 0.17f);
  lina::cpu_new::causal_conv1d_silu_l2_backward<float>(x[0].data(), w.data(), norm.data(), dy[1].data(), dx_new.data(), dw_new.data(), B, T, C, K, 32, 1e-12f, 0.17f);
  const bool l2_same = dx[0] == dx_new && dw == dw_new;
  lina::cpu::causal_conv1d_silu_backward<float>(x[0].data(), w.data(), dy[1].data(), dx[0].data(), dw.data(), B, T, C, K);
  lina::cpu_new::causal_conv1d_silu_backward<float>(x[0].data(), w.data(), dy[1].data(), dx_new.data(), dw_new.data(), B, T, C, K);
  const bool silu_same = dx[0] == dx_new && dw == dw_new;
  printf("same bits: conv_silu_l2 fwd %s, conv_silu_l2 bwd %s, conv_silu bwd %s\n", fwd_same ? "yes" : "NO",
         l2_same ? "yes" : "NO", silu_same ? "yes" : "NO");
  const char* name[] = {"conv_silu_l2 fwd", "conv_silu_l2 bwd", "conv_silu fwd", "conv_silu bwd", "rms_norm32 fwd", "rms_norm32 bwd"};
  for (int k = 0; k < 6; ++k) { std::sort(ratio[k].begin(), ratio[k].end()); printf("%-18s old %.3f new %.3f ms (min); new/old median of per-round ratios %.3f [q1 %.3f q3 %.3f]\n", name[k], best[0][k], best[1][k], ratio[k][15], ratio[k][7], ratio[k][22]); }
}
