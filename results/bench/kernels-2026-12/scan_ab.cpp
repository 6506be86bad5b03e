// The fixed-size chunked scan of two revisions in one process (gdn, B64 T64
// H4 d32 C16, no S_0, no dS_T), built by scan_ab.sh:
// rounds alternate the old kernel (lina::cpu::scan_chunk) and the new one
// (lina::cpu::scan_chunk_new); prints min times and the median per-round ratio,
// and the largest difference between the two kernels' outputs.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>
#include "backend_cpu/cpu_kernels.h"
#include "backend_cpu/scan_chunk_parts.h"
namespace lina::cpu::scan_chunk_new {
template <class T> bool fixed_forward(const ScanShape&, int64_t, const ScanInputs<T>&, const T*, T*, T*, T*);
template <class T> bool fixed_backward(const ScanShape&, int64_t, const ScanInputs<T>&, const T*, const T*, const T*, const ScanInputGrads<T>&);
}
using namespace lina;
using namespace std::chrono;
int main() {
  const int64_t B = 64, T = 64, H = 4, d = 32, C = 16, n = B * T * H * d, g = B * T * H, chunks = T / C;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-0.3f, 0.3f);
  std::vector<float> q(n), k(n), v(n), beta(g), gate(g), dout(n);
  for (auto* x : {&q, &k, &v, &dout}) for (auto& e : *x) e = u(rng);
  for (auto& e : beta) e = 0.5f + u(rng);
  for (auto& e : gate) e = -0.1f + 0.1f * u(rng);
  struct Out { std::vector<float> o, sf, st, dq, dk, dv, db, dg, ds0; };
  Out out[2];
  for (auto& x : out) { x.o.resize(n); x.sf.resize(B*H*d*d); x.st.resize(B*H*chunks*d*d); x.dq.resize(n); x.dk.resize(n); x.dv.resize(n); x.db.resize(g); x.dg.resize(g); x.ds0.resize(B*H*d*d); }
  const ScanShape s{B, T, H, d, ScanRule::GatedDelta};
  const ScanInputs<float> in{q.data(), k.data(), v.data(), beta.data(), gate.data()};
  auto fwd = [&](int which) { Out& x = out[which]; if (which) cpu::scan_chunk_new::fixed_forward<float>(s, C, in, nullptr, x.o.data(), x.sf.data(), x.st.data()); else cpu::scan_chunk::fixed_forward<float>(s, C, in, nullptr, x.o.data(), x.sf.data(), x.st.data()); };
  auto bwd = [&](int which) { Out& x = out[which]; const ScanInputGrads<float> gr{x.dq.data(), x.dk.data(), x.dv.data(), x.db.data(), x.dg.data(), x.ds0.data()}; if (which) cpu::scan_chunk_new::fixed_backward<float>(s, C, in, x.st.data(), dout.data(), nullptr, gr); else cpu::scan_chunk::fixed_backward<float>(s, C, in, x.st.data(), dout.data(), nullptr, gr); };
  double best[2][2] = {{1e9, 1e9}, {1e9, 1e9}};
  std::vector<double> rf, rb;
  const int rounds = 21, reps = 8;
  for (int r = 0; r < rounds; ++r) {
    double t[2][2];
    for (int w = 0; w < 2; ++w) {
      auto t0 = steady_clock::now();
      for (int i = 0; i < reps; ++i) fwd(w);
      t[w][0] = duration<double>(steady_clock::now() - t0).count() / reps * 1e3;
      t0 = steady_clock::now();
      for (int i = 0; i < reps; ++i) bwd(w);
      t[w][1] = duration<double>(steady_clock::now() - t0).count() / reps * 1e3;
      for (int p = 0; p < 2; ++p) best[w][p] = std::min(best[w][p], t[w][p]);
    }
    rf.push_back(t[1][0] / t[0][0]);
    rb.push_back(t[1][1] / t[0][1]);
  }
  std::sort(rf.begin(), rf.end()); std::sort(rb.begin(), rb.end());
  printf("forward  old %.3f new %.3f ms (min of %d); new/old median %.3f [%.3f, %.3f]\n", best[0][0], best[1][0], rounds, rf[rounds/2], rf[rounds/4], rf[3*rounds/4]);
  printf("backward old %.3f new %.3f ms (min of %d); new/old median %.3f [%.3f, %.3f]\n", best[0][1], best[1][1], rounds, rb[rounds/2], rb[rounds/4], rb[3*rounds/4]);
  auto diff = [](const std::vector<float>& a, const std::vector<float>& b) { double m = 0, s = 0; for (size_t i = 0; i < a.size(); ++i) { m = std::max(m, double(std::fabs(a[i] - b[i]))); s = std::max(s, double(std::fabs(b[i]))); } return m / std::max(1.0, s); };
  printf("max rel diff new vs old: o %.2e states %.2e dq %.2e dk %.2e dv %.2e dbeta %.2e dg %.2e\n", diff(out[1].o, out[0].o), diff(out[1].st, out[0].st), diff(out[1].dq, out[0].dq), diff(out[1].dk, out[0].dk), diff(out[1].dv, out[0].dv), diff(out[1].db, out[0].db), diff(out[1].dg, out[0].dg));
}
