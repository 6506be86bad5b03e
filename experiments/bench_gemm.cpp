// The model-FLOP count of a training step and the machine's GEMM rate.
#include <algorithm>
#include <chrono>
#include <sstream>
#include <string>
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

// One product (g, batch entries one after another) on OpenBLAS with as
// many threads as the machine has; then back to one thread, as lina calls it
// from its own threads.
void openblas_own_threads(const cpu::OpenBlas& blas, const dispatch::GemmShape& g, const float* a,
                          const float* b, float* c, float beta) {
  blas.set_num_threads(int(std::max(1u, std::thread::hardware_concurrency())));
  const int lda = int(g.ta ? g.M : g.K), ldb = int(g.tb ? g.K : g.N);  // row-major, as stored
  for (int64_t i = 0; i < g.batch; ++i)
    blas.sgemm(cpu::kCblasRowMajor, g.ta ? cpu::kCblasTrans : cpu::kCblasNoTrans,
               g.tb ? cpu::kCblasTrans : cpu::kCblasNoTrans, int(g.M), int(g.N), int(g.K), 1.0f,
               a + i * g.stride_a, lda, b + i * g.stride_b, ldb, beta, c + i * g.stride_c, int(g.N));
  blas.set_num_threads(1);
}

// Two ways of doing the same work, timed in alternating pairs (the first
// way first, then the second way first), so that both see the same moments
// of whatever else runs on the machine. The medians of each, and the median
// of the pairs' ratios second/first (> 1: the first way is faster).
struct PairedTimes {
  double first_ms = 0, second_ms = 0, second_over_first = 0;
};
template <class F, class G>
PairedTimes paired_times(int repeats, F&& first, G&& second) {
  std::vector<double> a, b, ratio;
  for (int i = 0; i < 2 * repeats; ++i) {
    const bool first_first = i % 2 == 0;
    double ms[2];
    for (int turn = 0; turn < 2; ++turn) {
      const bool run_first = (turn == 0) == first_first;
      // Both thread pools spin a while after a product before they sleep
      // (OpenBLAS's up to about 2^28 cycles); a pause first keeps one
      // way's idle threads off the cores the other is timed on, and an
      // untimed run then wakes this way's threads and the cores.
      std::this_thread::sleep_for(std::chrono::milliseconds(150));
      run_first ? first() : second();
      ms[run_first ? 0 : 1] = run_first ? timed_ms(first) : timed_ms(second);
    }
    a.push_back(ms[0]);
    b.push_back(ms[1]);
    ratio.push_back(ms[1] / ms[0]);
  }
  return {median(a), median(b), median(ratio)};
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
  auto openblas_threads = [&] {
    openblas_own_threads(*blas, g, a.data<float>(), b.data<float>(), c.data<float>(), 0.0f);
  };
  if (!blas) {
    r.lina_ms = median_ms(repeats, lina_path);
  } else {
    const PairedTimes t = paired_times(repeats, lina_path, openblas_threads);
    r.lina_ms = t.first_ms;
    r.openblas_ms = t.second_ms;
    r.openblas_gflops = flops / (r.openblas_ms * 1e6);
    r.lina_over_openblas = t.second_over_first;
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

// ---- the step's own products ----------------------------------------------------------------

namespace {

// The product a profile names "16256x688x128 B^T +=" (M×N×K, the operands
// read transposed, "batch N", += for beta 1: dispatch::gemm's profile
// detail); false for a name it does not recognise.
bool parse_product(const std::string& name, dispatch::GemmShape& g, bool& accumulate) {
  std::istringstream in(name);
  char x1 = 0, x2 = 0;
  if (!(in >> g.M >> x1 >> g.N >> x2 >> g.K) || x1 != 'x' || x2 != 'x') return false;
  accumulate = false;
  for (std::string word; in >> word;) {
    if (word == "A^T") g.ta = true;
    else if (word == "B^T") g.tb = true;
    else if (word == "+=") accumulate = true;
    else if (word == "batch" && in >> g.batch) continue;
    else return false;
  }
  if (g.batch > 1) g.stride_a = g.M * g.K, g.stride_b = g.K * g.N, g.stride_c = g.M * g.N;
  return g.M > 0 && g.N > 0 && g.K > 0 && g.batch > 0;
}

}  // namespace

std::vector<ProductTiming> measure_products(const std::vector<std::string>& shapes, int repeats) {
  std::vector<ProductTiming> out;
  const cpu::OpenBlas* blas = cpu::openblas();
  if (!blas || cpu::cpu_gemm() != cpu::CpuGemm::OpenBlas) return out;
  Rng rng(7);
  for (const std::string& name : shapes) {
    dispatch::GemmShape g;
    bool accumulate = false;
    if (!parse_product(name, g, accumulate)) continue;
    Tensor a = Tensor::randn({g.batch, g.M * g.K}, rng), b = Tensor::randn({g.batch, g.K * g.N}, rng);
    Tensor c = Tensor::zeros({g.batch, g.M * g.N});
    const float beta = accumulate ? 1.0f : 0.0f;
    auto lina_path = [&] { dispatch::gemm(g, a, b, c, 1.0, beta); };
    auto openblas_threads = [&] {
      openblas_own_threads(*blas, g, a.data<float>(), b.data<float>(), c.data<float>(), beta);
    };
    const PairedTimes t = paired_times(repeats, lina_path, openblas_threads);
    out.push_back({name, t.first_ms, t.second_ms, t.second_over_first});
  }
  return out;
}

}  // namespace lina
