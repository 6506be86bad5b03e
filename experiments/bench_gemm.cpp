// The model-FLOP count of a training step and the machine's GEMM rate.
#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "backend_cpu/openblas.h"
#include "core/rng.h"
#include "dispatch/dispatch.h"
#include "experiments/bench.h"
#include "models/mixer.h"

namespace lina {

long long matmul_weights(const ModelConfig& c) {
  const long long C = c.n_embd, inner = (long long)c.n_head * c.head_size;
  const long long kv = (long long)c.n_kv_head * c.head_size, H = c.n_head;
  long long w = C * c.vocab;  // the head (the embedding is a lookup, not a product)
  for (const MixerRow* m : c.layers) {
    w += 3 * C * c.mlp_hidden;  // ffn.gate, ffn.up, ffn.down (SwiGLU)
    if (!m->recurrent) {
      w += C * inner + 2 * C * kv + inner * C;  // q_proj, k_proj, v_proj (n_kv_head heads), o_proj
    } else {
      w += 3 * C * inner + C * inner + inner * C;  // q_proj, k_proj, v_proj, g_proj, o_proj
      const ScanRule rule = m->rule;
      if (uses_beta(rule)) w += C * H;  // b_proj (β per head)
      if (learns_decay(rule)) w += C * (decays_per_channel(rule) ? inner : H);  // a_proj (α per head or channel)
    }
  }
  return w;
}

double model_flops_per_step(const ModelConfig& c, int batch, int context) {
  // 6 = 2 (a multiply-add) × 3 (forward, and two products in backward)
  double per_token = 6.0 * double(matmul_weights(c));
  const double hd = double(c.n_head) * c.head_size;
  // attention: QKᵀ and PV are 2·T·hd each per token forward, half of it
  // causal, ×3 for backward: 6·hd·T. Recurrent: one state write and one read
  // of hd·head_size each (2 FLOPs per entry), ×3 for backward: 12·hd·head_size.
  per_token += c.attention_layers() * 6.0 * hd * context;
  per_token += c.recurrent_layers() * 12.0 * hd * c.head_size;
  return per_token * double(batch) * double(context);
}

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class F>
double timed_ms(F&& f) {
  auto t0 = Clock::now();
  f();
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

template <class F>
double median_ms(int repeats, F&& f) {
  f();  // warm-up (first-touch pages, thread pools)
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) ms.push_back(timed_ms(f));
  return median(ms);
}

}  // namespace

GemmRate measure_gemm(int repeats) {
  GemmRate r;
  Rng rng(7);
  Tensor a = Tensor::randn({r.M, r.K}, rng), b = Tensor::randn({r.K, r.N}, rng);
  Tensor c = Tensor::zeros({r.M, r.N});
  const double flops = 2.0 * double(r.M) * double(r.N) * double(r.K);
  dispatch::GemmShape g;
  g.M = r.M, g.N = r.N, g.K = r.K;
  auto lina_path = [&] { dispatch::gemm(g, a, b, c); };
  r.lina_path = cpu::cpu_gemm_name();

  // OpenBLAS on the whole product with its own threads, when installed.
  const cpu::OpenBlas* blas = cpu::openblas();
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  auto openblas_threads = [&] {
    blas->set_num_threads(int(cpus));
    blas->sgemm(cpu::kCblasRowMajor, cpu::kCblasNoTrans, cpu::kCblasNoTrans, int(r.M), int(r.N),
                int(r.K), 1.0f, a.data<float>(), int(r.K), b.data<float>(), int(r.N), 0.0f,
                c.data<float>(), int(r.N));
    blas->set_num_threads(1);  // back to one: lina calls it from its own threads
  };
  if (!blas) {
    r.lina_ms = median_ms(repeats, lina_path);
  } else {
    // The two paths in alternating pairs (lina first, then OpenBLAS first), so
    // that both see the same moments of whatever else runs on the machine;
    // the ratio is the median of the pairs' ratios.
    std::vector<double> lina, theirs, ratio;
    for (int i = 0; i < 2 * repeats; ++i) {
      const bool lina_first = i % 2 == 0;
      double ms[2];
      for (int turn = 0; turn < 2; ++turn) {
        const bool run_lina = (turn == 0) == lina_first;
        // Both thread pools spin a while after a product before they sleep
        // (OpenBLAS's up to about 2^28 cycles); a pause first keeps one
        // path's idle threads off the cores the other is timed on, and an
        // untimed product then wakes this path's threads and the cores.
        std::this_thread::sleep_for(std::chrono::milliseconds(150));
        run_lina ? lina_path() : openblas_threads();
        ms[run_lina ? 0 : 1] = run_lina ? timed_ms(lina_path) : timed_ms(openblas_threads);
      }
      lina.push_back(ms[0]);
      theirs.push_back(ms[1]);
      ratio.push_back(ms[1] / ms[0]);  // > 1: lina's path is faster
    }
    r.lina_ms = median(lina);
    r.openblas_ms = median(theirs);
    r.openblas_gflops = flops / (r.openblas_ms * 1e6);
    r.lina_over_openblas = median(ratio);
    r.openblas_core = blas->core;
  }
  r.lina_gflops = flops / (r.lina_ms * 1e6);

  if (cpu::cpu_gemm() == cpu::CpuGemm::OpenBlas) {  // the same blocks on Eigen
    cpu::set_cpu_gemm(cpu::CpuGemm::Eigen);
    r.eigen_ms = median_ms(repeats, lina_path);
    r.eigen_gflops = flops / (r.eigen_ms * 1e6);
    cpu::set_cpu_gemm(cpu::CpuGemm::OpenBlas);
  }
  return r;
}

}  // namespace lina
