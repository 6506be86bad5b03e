// fixed-size vs Eigen chunked scan (results/bench/scan-fixed/README.md): forward and backward
// times (best of 60, one thread) and the largest relative difference per output.
// g++ -O3 -march=native -fopenmp -DNDEBUG -std=c++17 -I. -I/usr/include/eigen3 \
//   results/bench/scan-fixed/scan_fixed_microbench.cpp build/cpu/liblina_engine.a -ldl
// ./a.out C RULE [T]   (RULE: 0 linear, 1 delta, 2 gated delta, 3 retention, 4 gated linear)

#include <chrono>
#include <cstdio>
#include <vector>
#include <random>
#include <cmath>
#include <cstdlib>
#include "backend_cpu/scan_chunk_parts.h"
using namespace lina;
using namespace lina::cpu::scan_chunk;
int main(int argc, char** argv) {
  int64_t B = 64, T = argc > 3 ? atoi(argv[3]) : 64, H = 4, d = 32, C = argc > 1 ? atoi(argv[1]) : 16;
  ScanRule rule = argc > 2 ? ScanRule(atoi(argv[2])) : ScanRule::GatedDelta;
  ScanShape s{B, T, H, d, rule};
  int64_t n = B * T * H * d, g = B * T * H, N = (T + C - 1) / C;
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0, 1);
  auto vec = [&](int64_t m, float sc) { std::vector<float> x(m); for (auto& e : x) e = sc * nd(rng); return x; };
  auto q = vec(n, 0.2f), k = vec(n, 0.2f), v = vec(n, 1.f), beta = vec(g, 0.f), gate = vec(g, 0.f), dout = vec(n, 1.f), dsf = vec(B*H*d*d, 0.1f);
  for (auto& e : beta) e = 0.2f + 0.6f * std::abs(nd(rng)) / 3;
  for (auto& e : gate) e = -0.2f * std::abs(nd(rng));
  struct Out { std::vector<float> o, sf, st, dq, dk, dv, db, dg, ds0; };
  auto make = [&] { Out r; r.o.resize(n); r.sf.resize(B*H*d*d); r.st.resize(B*H*N*d*d); r.dq.resize(n); r.dk.resize(n); r.dv.resize(n); r.db.resize(g); r.dg.resize(g); r.ds0.resize(B*H*d*d); return r; };
  Out a = make(), b = make();
  ScanInputs<float> in{q.data(), k.data(), v.data(), beta.data(), gate.data()};
  auto run = [&](Out& r, bool fixed, double& tf, double& tb) {
    ScanInputGrads<float> gr{r.dq.data(), r.dk.data(), r.dv.data(), r.db.data(), r.dg.data(), r.ds0.data()};
    tf = tb = 1e9;
    for (int rep = 0; rep < 60; ++rep) {
      auto t0 = std::chrono::steady_clock::now();
      if (fixed) fixed_forward<float>(s, C, in, nullptr, r.o.data(), r.sf.data(), r.st.data());
      else if (!uses_beta(rule)) gated_forward<float>(s, C, in, nullptr, r.o.data(), r.sf.data(), r.st.data()); else delta_forward_eigen<float>(s, C, in, nullptr, r.o.data(), r.sf.data(), r.st.data());
      auto t1 = std::chrono::steady_clock::now();
      if (fixed) fixed_backward<float>(s, C, in, r.st.data(), dout.data(), dsf.data(), gr);
      else if (!uses_beta(rule)) gated_backward<float>(s, C, in, r.st.data(), dout.data(), dsf.data(), gr); else delta_backward_eigen<float>(s, C, in, r.st.data(), dout.data(), dsf.data(), gr);
      auto t2 = std::chrono::steady_clock::now();
      tf = std::min(tf, std::chrono::duration<double, std::milli>(t1 - t0).count());
      tb = std::min(tb, std::chrono::duration<double, std::milli>(t2 - t1).count());
    }
  };
  double af, ab, bf, bb;
  run(a, false, af, ab);
  run(b, true, bf, bb);
  auto diff = [](const std::vector<float>& x, const std::vector<float>& y) { double m = 0, s = 0; for (size_t i = 0; i < x.size(); ++i) { m = std::max(m, (double)std::abs(x[i]-y[i])); s = std::max(s, (double)std::abs(x[i])); } return m / (s + 1e-30); };
  printf("C=%ld T=%ld rule=%d eigen fwd %.3f bwd %.3f | fixed fwd %.3f bwd %.3f\n", (long)C, (long)T, int(rule), af, ab, bf, bb);
  printf("rel max diff: o %.2g sf %.2g st %.2g dq %.2g dk %.2g dv %.2g db %.2g dg %.2g ds0 %.2g\n", diff(a.o,b.o), diff(a.sf,b.sf), diff(a.st,b.st), diff(a.dq,b.dq), diff(a.dk,b.dk), diff(a.dv,b.dv), diff(a.db,b.db), diff(a.dg,b.dg), diff(a.ds0,b.ds0));
}
