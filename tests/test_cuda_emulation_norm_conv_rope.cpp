// The CUDA rms_norm, l2_norm, conv1d, conv1d + SiLU, rope, AdamW, scale and deterministic
// copy_strided kernels, emulated on the host: the per-thread functions and
// block kernels of backend_cuda/*_device.h run here exactly as the GPU runs
// them (grid-stride loops, phases thread by thread) and are compared with the
// CPU backend (backend_cpu/cpu_kernels.h). No GPU needed.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend_cpu/cpu_kernels.h"
#include "backend_cuda/block_kernel.h"
#include "backend_cuda/kernels_device.h"
#include "backend_cuda/norm_conv_rope_device.h"
#include "backend_cuda/optim_device.h"

using namespace lina::cuda;
using Buffer = std::vector<float>;

namespace {

std::mt19937& rng() {
  static std::mt19937 gen(20261201);
  return gen;
}

Buffer randn(int64_t n, float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, scale);
  Buffer b(static_cast<size_t>(n));
  for (float& v : b) v = normal(rng());
  return b;
}

Buffer uniform(int64_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  Buffer b(static_cast<size_t>(n));
  for (float& v : b) v = dist(rng());
  return b;
}

// A grid of `threads` threads running a grid-stride loop over n items.
template <class PerThread>
void run_grid(int64_t n, PerThread per_thread, int64_t threads = 96) {
  for (int64_t t = 0; t < threads; ++t)
    for (int64_t i = t; i < n; i += threads) per_thread(i);
}

// max |got − want| ≤ rtol · max(max |want|, min_scale) (the GPU-vs-CPU
// criterion), NaN fails. A long sum passes min_scale = Σ|terms|: its rounding
// scales with the terms, not with a total that may cancel to near zero.
void check_close(const Buffer& got, const Buffer& want, const std::string& what,
                 double rtol = 1e-5, double min_scale = 0.0) {
  REQUIRE(got.size() == want.size());
  double scale = min_scale, worst = 0.0;
  int64_t worst_at = -1;
  for (size_t i = 0; i < want.size(); ++i) scale = std::max(scale, std::fabs(double(want[i])));
  for (size_t i = 0; i < want.size(); ++i) {
    double d = std::fabs(double(got[i]) - double(want[i]));
    if (!(d <= worst)) {  // also catches NaN
      worst = std::isnan(d) ? INFINITY : d;
      worst_at = int64_t(i);
    }
  }
  INFO(what, ": worst element ", worst_at, " off by ", worst, ", max |want| ", scale);
  CHECK(worst <= rtol * scale + 1e-30);
}

bool same_bits(const Buffer& a, const Buffer& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::string dims(std::initializer_list<int64_t> d) {
  std::string s = "[";
  for (int64_t v : d) s += (s.size() > 1 ? ", " : "") + std::to_string(v);
  return s + "]";
}

const std::vector<int64_t> kRows = {1, 7, 33, 257};  // 257: three dw chunks of 128 rows
const std::vector<int64_t> kLengths = {1, 5, 32, 128, 300};

}  // namespace

// ---- rms_norm ------------------------------------------------------------------------

namespace {
// dw as the GPU computes it: chunk partials, then their fixed-order sum.
Buffer emulate_rms_norm_dw(const Buffer& x, const Buffer& rstd, const Buffer& dy, int64_t rows,
                           int64_t n, int64_t threads) {
  const int64_t chunks = row_chunks(rows);
  Buffer partial(size_t(chunks * n), NAN), dw(size_t(n), NAN);
  run_grid(chunks * n, [&](int64_t i) {
    rms_norm_dw_partial_thread(i, x.data(), rstd.data(), dy.data(), partial.data(), rows, n);
  }, threads);
  run_grid(n, [&](int64_t e) { sum_partials_thread(e, partial.data(), chunks, n, dw.data()); },
           threads);
  return dw;
}
}  // namespace

TEST_CASE("cuda emulation: rms_norm forward and backward match the CPU backend") {
  const float eps = 1e-6f;
  for (int64_t rows : kRows)
    for (int64_t n : kLengths) {
      const std::string what = "rms_norm " + dims({rows, n});
      Buffer x = randn(rows * n, 2.0f), w = randn(n), dy = randn(rows * n);

      Buffer y_want(x.size()), rstd_want(static_cast<size_t>(rows));
      lina::cpu::rms_norm_forward<float>(x.data(), w.data(), y_want.data(), rstd_want.data(), rows,
                                         n, eps);
      Buffer y(x.size(), NAN), rstd(size_t(rows), NAN);
      run_block_kernel_on_host<RmsNormForward>({x.data(), w.data(), y.data(), rstd.data(), rows, n, eps});
      check_close(y, y_want, what + " y");
      check_close(rstd, rstd_want, what + " rstd");

      Buffer dx_want(x.size()), dw_want(static_cast<size_t>(n));
      lina::cpu::rms_norm_backward<float>(x.data(), w.data(), rstd_want.data(), dy.data(),
                                          dx_want.data(), dw_want.data(), rows, n);
      Buffer dx(x.size(), NAN);
      run_block_kernel_on_host<RmsNormBackwardDx>(
          {x.data(), w.data(), rstd.data(), dy.data(), dx.data(), rows, n});
      check_close(dx, dx_want, what + " dx");
      Buffer dw = emulate_rms_norm_dw(x, rstd, dy, rows, n, 96);
      check_close(dw, dw_want, what + " dw");
      // the grid size changes which thread does what, never the sum's order
      CHECK(same_bits(dw, emulate_rms_norm_dw(x, rstd, dy, rows, n, 5)));
    }
}

// ---- l2_norm -------------------------------------------------------------------------------

TEST_CASE("cuda emulation: l2_norm forward and backward (scale 1 and 1/√32) match the CPU backend") {
  const float eps = 1e-6f;
  for (float scale : {1.0f, 1.0f / std::sqrt(32.0f)})
  for (int64_t rows : kRows)
    for (int64_t n : kLengths) {
      const std::string what = "l2_norm " + dims({rows, n}) + " scale " + std::to_string(scale);
      Buffer x = randn(rows * n, 3.0f), dy = randn(rows * n);
      // row 1 is (nearly) zero: ‖x‖ ≤ ε, the branch y = s x / ε
      if (rows > 1)
        for (int64_t i = 0; i < n; ++i) x[size_t(n + i)] = i == 0 ? 1e-8f : 0.0f;

      Buffer y_want(x.size()), norm_want(static_cast<size_t>(rows));
      lina::cpu::l2_norm_forward<float>(x.data(), y_want.data(), norm_want.data(), rows, n, eps,
                                        scale);
      Buffer y(x.size(), NAN), norm(size_t(rows), NAN);
      run_block_kernel_on_host<L2NormForward>({x.data(), y.data(), norm.data(), rows, n, eps, scale});
      check_close(y, y_want, what + " y");
      check_close(norm, norm_want, what + " norm");

      Buffer dx_want(x.size());
      lina::cpu::l2_norm_backward<float>(x.data(), norm_want.data(), dy.data(), dx_want.data(),
                                         rows, n, eps, scale);
      Buffer dx(x.size(), NAN);
      run_block_kernel_on_host<L2NormBackward>(
          {x.data(), norm.data(), dy.data(), dx.data(), rows, n, eps, scale});
      check_close(dx, dx_want, what + " dx");
      if (rows > 1) CHECK(dx[size_t(n)] == scale * dy[size_t(n)] / eps);  // the ‖x‖ ≤ ε row
    }
}

// ---- causal conv1d ---------------------------------------------------------------------------

namespace {
struct ConvDims {
  int64_t B, T, C, K;
};

Buffer emulate_conv_dw(const Buffer& x, const Buffer& dy, ConvDims d, int64_t threads) {
  const int64_t chunks = row_chunks(d.B * d.T);
  Buffer partial(size_t(chunks * d.K * d.C), NAN), dw(size_t(d.C * d.K), NAN);
  run_grid(chunks * d.K * d.C, [&](int64_t i) {
    causal_conv1d_dw_partial_thread(i, x.data(), dy.data(), partial.data(), d.B, d.T, d.C, d.K);
  }, threads);
  run_grid(d.C * d.K, [&](int64_t i) {
    causal_conv1d_dw_sum_thread(i, partial.data(), dw.data(), chunks, d.C, d.K);
  }, threads);
  return dw;
}
}  // namespace

// The conv's shapes, for the conv alone and fused with SiLU: one token or
// many, one tap or four, a T that is not a multiple of the dw row chunk.
// C = 80: the CPU's vector path (a group of four 16-float vectors, then one)
// with rows of a sequence on both sides of a 128-row chunk boundary.
const std::vector<ConvDims> kConvCases = {{1, 1, 1, 1},  {1, 7, 3, 1},   {2, 13, 5, 4}, {1, 3, 4, 4},
                                          {3, 50, 32, 4}, {2, 131, 7, 4}, {2, 70, 80, 4}};

// The GPU's conv backward programs on the gradient g of the conv's output
// (dy, or the fused op's dz): dx, then dw from its two passes, against the
// CPU's dx_want, dw_want; dw the same bits with another thread count.
static void check_conv_backward_programs(const Buffer& x, const Buffer& w, const Buffer& g,
                                         const Buffer& dx_want, const Buffer& dw_want, ConvDims d,
                                         const std::string& what) {
  const int64_t count = d.B * d.T * d.C;
  Buffer dx(size_t(count), NAN);
  run_grid(count, [&](int64_t i) {
    causal_conv1d_dx_thread(i, w.data(), g.data(), dx.data(), d.T, d.C, d.K);
  });
  check_close(dx, dx_want, what + " dx");
  Buffer dw = emulate_conv_dw(x, g, d, 96);
  check_close(dw, dw_want, what + " dw");
  CHECK(same_bits(dw, emulate_conv_dw(x, g, d, 5)));
}

TEST_CASE("cuda emulation: causal conv1d forward and backward match the CPU backend") {
  for (ConvDims d : kConvCases) {
    const std::string what = "conv1d B, T, C, K = " + dims({d.B, d.T, d.C, d.K});
    const int64_t count = d.B * d.T * d.C;
    Buffer x = randn(count), w = randn(d.C * d.K), dy = randn(count);

    Buffer y_want(static_cast<size_t>(count));
    lina::cpu::causal_conv1d_forward<float>(x.data(), w.data(), y_want.data(), d.B, d.T, d.C, d.K);
    Buffer y(size_t(count), NAN);
    run_grid(count, [&](int64_t i) {
      causal_conv1d_forward_thread(i, x.data(), w.data(), y.data(), d.T, d.C, d.K);
    });
    check_close(y, y_want, what + " y");
    // causality: the first token sees only itself, through the last tap
    CHECK(y[0] == w[size_t(d.K - 1)] * x[0]);

    Buffer dx_want(static_cast<size_t>(count)), dw_want(size_t(d.C * d.K));
    lina::cpu::causal_conv1d_backward<float>(x.data(), w.data(), dy.data(), dx_want.data(),
                                             dw_want.data(), d.B, d.T, d.C, d.K);
    check_conv_backward_programs(x, w, dy, dx_want, dw_want, d, what);
  }
}

// ---- causal conv1d + SiLU, fused ----------------------------------------------------------------

TEST_CASE("cuda emulation: fused conv1d + SiLU forward and backward match the CPU backend") {
  for (ConvDims d : kConvCases) {
    const std::string what = "conv1d_silu B, T, C, K = " + dims({d.B, d.T, d.C, d.K});
    const int64_t count = d.B * d.T * d.C;
    Buffer x = randn(count), w = randn(d.C * d.K), dy = randn(count);

    Buffer y_want(static_cast<size_t>(count));
    lina::cpu::causal_conv1d_silu_forward<float>(x.data(), w.data(), y_want.data(), d.B, d.T, d.C,
                                                 d.K);
    Buffer y(size_t(count), NAN);
    run_grid(count, [&](int64_t i) {
      causal_conv1d_silu_forward_thread(i, x.data(), w.data(), y.data(), d.T, d.C, d.K);
    });
    check_close(y, y_want, what + " y");

    Buffer dx_want(static_cast<size_t>(count)), dw_want(size_t(d.C * d.K));
    lina::cpu::causal_conv1d_silu_backward<float>(x.data(), w.data(), dy.data(), dx_want.data(),
                                                  dw_want.data(), d.B, d.T, d.C, d.K);
    // as the GPU runs it: dz into a scratch, then the conv's dx and dw programs on dz
    Buffer dz(size_t(count), NAN);
    run_grid(count, [&](int64_t i) {
      causal_conv1d_silu_dz_thread(i, x.data(), w.data(), dy.data(), dz.data(), d.T, d.C, d.K);
    });
    check_conv_backward_programs(x, w, dz, dx_want, dw_want, d, what);
  }
}

// ---- rope ------------------------------------------------------------------------------------

TEST_CASE("cuda emulation: rope (pos0 > 0, inverse) matches the CPU backend") {
  struct RopeDims {
    int64_t B, T, H, D;
  };
  for (RopeDims d : {RopeDims{1, 1, 1, 2}, RopeDims{2, 5, 3, 8}, RopeDims{1, 7, 2, 32},
                     RopeDims{2, 3, 1, 128}})
    for (int64_t pos0 : {int64_t(0), int64_t(17), int64_t(1000)})
      for (bool inverse : {false, true}) {
        const std::string what = "rope B, T, H, D = " + dims({d.B, d.T, d.H, d.D}) + " pos0 " +
                                 std::to_string(pos0) + (inverse ? " inverse" : "");
        const int64_t count = d.B * d.T * d.H * d.D, pairs = count / 2;
        const double base = 10000.0;
        Buffer x = randn(count);
        Buffer y_want(static_cast<size_t>(count));
        lina::cpu::rope_apply<float>(x.data(), y_want.data(), d.B, d.T, d.H, d.D, pos0, base,
                                     inverse);
        Buffer y(size_t(count), NAN);
        run_grid(pairs, [&](int64_t i) {
          rope_thread(i, x.data(), y.data(), d.T, d.H, d.D, pos0, base, inverse);
        });
        check_close(y, y_want, what);

        // rotating back recovers x
        Buffer back(size_t(count), NAN);
        run_grid(pairs, [&](int64_t i) {
          rope_thread(i, y.data(), back.data(), d.T, d.H, d.D, pos0, base, !inverse);
        });
        check_close(back, x, what + " round trip");
      }
}

// ---- AdamW and scale ----------------------------------------------------------------------------

TEST_CASE("cuda emulation: AdamW steps (with and without weight decay) match the CPU backend") {
  const float lr = 1e-2f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  for (int64_t n : {int64_t(1), int64_t(300), int64_t(1000)})
    for (float wd : {0.0f, 0.1f}) {
      const std::string what = "adamw n " + std::to_string(n) + " wd " + std::to_string(wd);
      Buffer p_want = randn(n), m_want(size_t(n), 0.0f), v_want(size_t(n), 0.0f);
      Buffer p = p_want, m = m_want, v = v_want;
      const float p_before = p[0];
      float first_move = 0.0f;
      for (int step = 1; step <= 3; ++step) {
        Buffer g = randn(n, 0.5f);
        const float bc1 = 1.0f - std::pow(beta1, float(step));
        const float bc2 = 1.0f - std::pow(beta2, float(step));
        lina::cpu::adamw_step<float>(p_want.data(), g.data(), m_want.data(), v_want.data(), nullptr, n, lr,
                                     beta1, beta2, eps, wd, bc1, bc2);
        AdamWArgs args =
            make_adamw_args(p.data(), g.data(), m.data(), v.data(), nullptr, n, lr, beta1, beta2, eps, wd,
                            bc1, bc2);
        run_grid(n, [&](int64_t i) { adamw_thread(i, args); });
        if (step == 1) first_move = p[0] - p_before;
      }
      check_close(p, p_want, what + " p", 1e-6);
      check_close(m, m_want, what + " m", 1e-6);
      check_close(v, v_want, what + " v", 1e-6);
      // the first step moves a parameter by −lr·wd·p (decay) and ±lr (m̂ / √v̂ = ±1)
      CHECK(std::fabs(first_move + lr * wd * p_before) == doctest::Approx(lr).epsilon(1e-3));
    }
}

TEST_CASE("cuda emulation: scale matches the CPU backend") {
  Buffer x = randn(1000), want = x;
  lina::cpu::scale<float>(want.data(), 1000, -0.37f);
  run_grid(1000, [&](int64_t i) { scale_thread(i, x.data(), -0.37f); });
  CHECK(same_bits(x, want));
  CHECK(x[3] != 0.0f);
}

TEST_CASE("cuda emulation: clip_to_norm computes the factor like the CPU backend") {
  for (double max_norm : {0.5, 1e6}) {  // clipped, and left alone
    Buffer x = randn(1000), want = x;
    double sum_of_squares = 0.0;
    lina::cpu::sum_squares<float>(x.data(), 1000, &sum_of_squares);
    lina::cpu::clip_to_norm<float>(want.data(), 1000, &sum_of_squares, max_norm);
    run_grid(1000, [&](int64_t i) { clip_to_norm_thread(i, x.data(), &sum_of_squares, max_norm); });
    CHECK(same_bits(x, want));
    double after = 0.0;
    lina::cpu::sum_squares<float>(x.data(), 1000, &after);
    if (max_norm < 1) CHECK(std::sqrt(after) == doctest::Approx(max_norm).epsilon(1e-4));
    else CHECK(after == sum_of_squares);
  }
}

// ---- copy_strided without atomics ---------------------------------------------------------------

TEST_CASE("cuda emulation: copy_strided accumulates over zero destination strides, one pass or chunked") {
  struct Case {
    std::string what;
    std::vector<int64_t> extent, src_strides, dst_strides;
    int64_t dst_size;
  };
  const std::vector<Case> cases = {
      // [4, 300, 3, 5] summed to [3]: 6000 terms per element, the chunked path
      {"sum [4, 300, 3, 5] -> [3]", {4, 300, 3, 5}, {4500, 15, 5, 1}, {0, 0, 1, 0}, 3},
      // kept and reduced dimensions interleaved: [2, 3, 4, 5] -> [2, 4]
      {"sum [2, 3, 4, 5] -> [2, 4]", {2, 3, 4, 5}, {60, 20, 5, 1}, {4, 0, 1, 0}, 8},
      // everything reduced: one destination element
      {"sum [6, 70] -> []", {6, 70}, {70, 1}, {0, 0}, 1},
      // a transposed source, [9, 40] read as [40, 9], summed over its 40 rows
      {"sum transposed [40, 9] -> [9]", {40, 9}, {1, 40}, {0, 1}, 9},
  };
  for (const Case& c : cases) {
    int64_t n = 1;
    for (int64_t e : c.extent) n *= e;
    const int ndim = int(c.extent.size());
    Buffer src = randn(n), dst0 = randn(c.dst_size);
    double sum_abs = 0.0;  // the scale of the sums' rounding
    for (float x : src) sum_abs += std::fabs(double(x));

    Buffer want = dst0;
    lina::cpu::copy_strided<float>(src.data(), c.src_strides.data(), want.data(),
                                   c.dst_strides.data(), c.extent.data(), ndim, true);

    CopyStridedArgs args = make_copy_strided_args(src.data(), c.src_strides.data(), dst0.data(),
                                                  c.dst_strides.data(), c.extent.data(), ndim, true);
    CHECK(args.kept_n == c.dst_size);
    CHECK(args.kept_n * args.reduced_n == n);

    // one pass: one thread per destination element
    Buffer one_pass = dst0;
    args.dst = one_pass.data();
    run_grid(args.kept_n, [&](int64_t k) { copy_strided_thread(k, args); });
    check_close(one_pass, want, c.what + " (one pass)", 1e-5, sum_abs);

    // chunked: the chunk count the launcher would pick, at least 2 here
    const int64_t chunks = std::max<int64_t>(2, copy_strided_chunks(args));
    Buffer chunked = dst0, partial(size_t(chunks * args.kept_n), NAN);
    args.dst = chunked.data();
    auto run_chunked = [&](int64_t threads) {
      run_grid(chunks * args.kept_n,
               [&](int64_t i) { copy_strided_chunk_thread(i, args, partial.data()); }, threads);
      run_grid(args.kept_n,
               [&](int64_t k) { copy_strided_finish_thread(k, args, partial.data(), chunks); },
               threads);
    };
    run_chunked(96);
    check_close(chunked, want, c.what + " (chunked)", 1e-5, sum_abs);
    // same bits whatever the grid
    Buffer first = chunked;
    chunked = dst0;
    run_chunked(3);
    CHECK(same_bits(chunked, first));
  }
  // the launcher chunks only the long sums of few elements
  std::vector<int64_t> extent = {4, 300, 3, 5}, ss = {4500, 15, 5, 1}, ds = {0, 0, 1, 0};
  CopyStridedArgs big = make_copy_strided_args(nullptr, ss.data(), nullptr, ds.data(),
                                               extent.data(), 4, true);
  CHECK(copy_strided_chunks(big) == (6000 + kReducedPerChunk - 1) / kReducedPerChunk);
  big.accumulate = false;
  CHECK(copy_strided_chunks(big) == 1);
}

TEST_CASE("cuda emulation: copy_strided copy onto a zero destination stride keeps the last write") {
  // src [3, 4] written onto dst [4] with the first dimension broadcast away:
  // the CPU leaves row 2 (its last write); so must the one-thread-per-element copy.
  std::vector<int64_t> extent = {3, 4}, ss = {4, 1}, ds = {0, 1};
  Buffer src = randn(12), want = randn(4), got = want;
  lina::cpu::copy_strided<float>(src.data(), ss.data(), want.data(), ds.data(), extent.data(), 2,
                                 false);
  CopyStridedArgs args =
      make_copy_strided_args(src.data(), ss.data(), got.data(), ds.data(), extent.data(), 2, false);
  run_grid(args.kept_n, [&](int64_t k) { copy_strided_thread(k, args); });
  CHECK(same_bits(got, want));
  CHECK(got[1] == src[9]);
}
