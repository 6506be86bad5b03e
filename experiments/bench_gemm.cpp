// The model-FLOP count of a training step and the machine's GEMM rate.
#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "backend_cpu/openblas.h"
#include "core/kernels.h"
#include "core/rng.h"
#include "experiments/bench.h"

namespace lina {

long long matmul_weights(const ModelConfig& c) {
  const long long C = c.n_embd, inner = (long long)c.n_head * c.head_size;
  const long long kv = (long long)c.n_kv_head * c.head_size, H = c.n_head;
  long long w = C * c.vocab;  // the head (the embedding is a lookup, not a product)
  for (MixerKind k : c.layers) {
    w += 2 * C * c.mlp_hidden;  // mlp.fc, mlp.proj
    if (k == MixerKind::Attention) {
      w += C * inner + 2 * C * kv + inner * C;  // wq, wk, wv (n_kv_head heads), wo
    } else {
      w += 3 * C * inner + inner * C;           // wq, wk, wv, wo
      const ScanRule rule = scan_rule(k);
      if (uses_beta(rule)) w += C * H;  // b_proj (β per head)
      if (uses_gate(rule)) w += C * (gate_per_channel(rule) ? inner : H);  // a_proj (α per head or channel)
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

template <class F>
double median_ms(int repeats, F&& f) {
  f();  // warm-up (first-touch pages, thread pools)
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    auto t0 = Clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

GemmRate measure_gemm(int repeats) {
  GemmRate r;
  Rng rng(7);
  Tensor a = Tensor::randn({r.M, r.K}, rng), b = Tensor::randn({r.K, r.N}, rng);
  Tensor c = Tensor::zeros({r.M, r.N});
  const double flops = 2.0 * double(r.M) * double(r.N) * double(r.K);
  kernels::GemmShape g;
  g.M = r.M, g.N = r.N, g.K = r.K;
  r.lina_ms = median_ms(repeats, [&] { kernels::gemm(g, a, b, c); });
  r.lina_gflops = flops / (r.lina_ms * 1e6);

  r.lina_path = cpu::cpu_gemm_name();
  if (cpu::cpu_gemm() == cpu::CpuGemm::OpenBlas) {  // the same blocks on Eigen
    cpu::set_cpu_gemm(cpu::CpuGemm::Eigen);
    r.eigen_ms = median_ms(repeats, [&] { kernels::gemm(g, a, b, c); });
    r.eigen_gflops = flops / (r.eigen_ms * 1e6);
    cpu::set_cpu_gemm(cpu::CpuGemm::OpenBlas);
  }
  // OpenBLAS on the whole product with its own threads, when installed.
  if (const cpu::OpenBlas* blas = cpu::openblas()) {
    const float *pa = a.data<float>(), *pb = b.data<float>();
    float* pc = c.data<float>();
    const int M = int(r.M), N = int(r.N), K = int(r.K);
    blas->set_num_threads(int(std::max(1u, std::thread::hardware_concurrency())));
    r.openblas_ms = median_ms(repeats, [&] {
      blas->sgemm(cpu::kCblasRowMajor, cpu::kCblasNoTrans, cpu::kCblasNoTrans, M, N, K, 1.0f, pa,
                  K, pb, N, 0.0f, pc, N);
    });
    blas->set_num_threads(1);  // back to one: lina calls it from its own threads
    r.openblas_gflops = flops / (r.openblas_ms * 1e6);
    r.openblas_core = blas->core;
  }
  return r;
}

}  // namespace lina
