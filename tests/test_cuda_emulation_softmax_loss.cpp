// The softmax / log-softmax / cross-entropy / embedding / argmax CUDA kernels
// (backend_cuda/softmax_loss_device.h) run on the host — block kernels with
// run_block_kernel_on_host, the others as a grid-stride loop — and compared
// with the CPU backend. Outputs start as NaN, so an element a kernel forgets
// to write fails the comparison.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backend_cpu/cpu_kernels.h"
#include "backend_cuda/softmax_loss_device.h"
#include "core/rng.h"
#include "core/tensor.h"

using namespace lina;
using namespace lina::cuda;

namespace {

using Floats = std::vector<float>;
using Ints = std::vector<int32_t>;

const float kNaN = std::numeric_limits<float>::quiet_NaN();

Rng& test_rng() {
  static Rng rng(9191);
  return rng;
}

// n normal samples · scale
Floats randn(int64_t n, double scale = 1.0) {
  return Tensor::randn({n}, test_rng(), scale, 0.0, DType::f32).to_vector<float>();
}

// n integers in [0, hi)
Ints random_ids(int64_t n, int32_t hi) {
  Floats u = Tensor::rand({n}, test_rng(), 0.0, 1.0, DType::f32).to_vector<float>();
  Ints ids(u.size());
  for (size_t i = 0; i < u.size(); ++i) ids[i] = std::min(hi - 1, int32_t(u[i] * float(hi)));
  return ids;
}

// What a grid of `threads` threads does in a grid-stride loop over n items:
// thread t visits t, t + threads, … (a small grid, so the loop strides).
template <class PerThread>
void run_grid(int64_t n, PerThread per_thread, int64_t threads = 96) {
  for (int64_t t = 0; t < threads; ++t)
    for (int64_t i = t; i < n; i += threads) per_thread(i);
}

// Every element: |got − want| ≤ 1e-5·max|want| + 1e-6 (NaN fails).
void check_close(const Floats& got, const Floats& want, const std::string& what) {
  REQUIRE(got.size() == want.size());
  double scale = 0.0;
  for (float w : want) scale = std::max(scale, std::fabs(double(w)));
  double tol = 1e-5 * scale + 1e-6;
  int64_t bad = -1;
  for (size_t i = 0; i < got.size() && bad < 0; ++i)
    if (!(std::fabs(double(got[i]) - double(want[i])) <= tol)) bad = int64_t(i);
  INFO(what, ": element ", bad,
       bad >= 0 ? ": got " + std::to_string(got[size_t(bad)]) + ", want " +
                      std::to_string(want[size_t(bad)])
                : std::string());
  CHECK(bad < 0);
}

std::string sizes(int64_t R, int64_t N) {
  return "R=" + std::to_string(R) + " N=" + std::to_string(N);
}

}  // namespace

TEST_CASE("cuda emulation: softmax forward matches the CPU backend") {
  const std::vector<std::pair<int64_t, int64_t>> shapes = {
      {1, 1}, {3, 1}, {5, 7}, {11, 300}, {3, 1000}, {2, 256}, {4, 257}};
  for (auto [R, N] : shapes) {
    Floats x = randn(R * N, 4.0), want(size_t(R * N)), got(size_t(R * N), kNaN);
    cpu::softmax_forward<float>(x.data(), want.data(), R, N, 1, false);
    run_block_kernel_on_host<SoftmaxForwardKernel>({x.data(), got.data(), R, N, 1, false});
    check_close(got, want, "softmax " + sizes(R, N));
  }
}

TEST_CASE("cuda emulation: causal softmax matches the CPU backend and zeroes hidden keys") {
  struct Case {
    int64_t batches, Tq, N;
  };
  // Tq < N (keys before the queries, e.g. a cache) and Tq == N
  const std::vector<Case> cases = {{3, 5, 7}, {2, 7, 7}, {1, 1, 1}, {3, 1, 9},
                                   {2, 3, 300}, {1, 300, 300}, {1, 37, 1000}};
  for (auto [batches, Tq, N] : cases) {
    int64_t R = batches * Tq;
    Floats x = randn(R * N, 4.0), want(size_t(R * N)), got(size_t(R * N), kNaN);
    // hidden keys hold −inf and NaN: they must not leak into the visible ones
    for (int64_t r = 0; r < R; ++r)
      for (int64_t j = visible_keys(r, N, Tq, true); j < N; ++j)
        x[size_t(r * N + j)] = j % 2 ? kNaN : -std::numeric_limits<float>::infinity();
    cpu::softmax_forward<float>(x.data(), want.data(), R, N, Tq, true);
    run_block_kernel_on_host<SoftmaxForwardKernel>({x.data(), got.data(), R, N, Tq, true});
    check_close(got, want, "causal softmax Tq=" + std::to_string(Tq) + " " + sizes(R, N));
    // row i of each [Tq, N] matrix: exactly i + (N − Tq) + 1 nonzero weights summing to 1
    for (int64_t r = 0; r < R; ++r) {
      int64_t visible = r % Tq + (N - Tq) + 1;
      double total = 0.0;
      for (int64_t j = 0; j < N; ++j) {
        float y = got[size_t(r * N + j)];
        if (j >= visible) CHECK(y == 0.0f);
        total += y;
      }
      CHECK(total == doctest::Approx(1.0).epsilon(1e-5));
    }
  }
}

TEST_CASE("cuda emulation: softmax backward matches the CPU backend") {
  for (auto [R, N] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {6, 7}, {5, 300}, {3, 1000}}) {
    Floats y(size_t(R * N)), x = randn(R * N, 3.0), dy = randn(R * N);
    cpu::softmax_forward<float>(x.data(), y.data(), R, N, 1, false);
    Floats want(size_t(R * N)), got(size_t(R * N), kNaN);
    cpu::softmax_backward<float>(y.data(), dy.data(), want.data(), R, N);
    run_block_kernel_on_host<SoftmaxBackwardKernel>({y.data(), dy.data(), got.data(), R, N});
    check_close(got, want, "softmax_backward " + sizes(R, N));
  }
}

TEST_CASE("cuda emulation: log_softmax forward and backward match the CPU backend") {
  for (auto [R, N] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {9, 7}, {5, 300}, {3, 1000}}) {
    Floats x = randn(R * N, 5.0), want(size_t(R * N)), got(size_t(R * N), kNaN);
    cpu::log_softmax_forward<float>(x.data(), want.data(), R, N);
    run_block_kernel_on_host<LogSoftmaxForwardKernel>({x.data(), got.data(), R, N});
    check_close(got, want, "log_softmax " + sizes(R, N));

    Floats dy = randn(R * N), dx_want(size_t(R * N)), dx_got(size_t(R * N), kNaN);
    cpu::log_softmax_backward<float>(want.data(), dy.data(), dx_want.data(), R, N);
    run_block_kernel_on_host<LogSoftmaxBackwardKernel>({want.data(), dy.data(), dx_got.data(), R, N});
    check_close(dx_got, dx_want, "log_softmax_backward " + sizes(R, N));
  }
}

namespace {

// The CUDA cross-entropy forward as softmax_loss.cu sequences it: the per-row
// block kernel into a scratch buffer, then the one-block total.
float emulate_cross_entropy_forward(const Floats& logits, const Ints& targets, const float* mask,
                                    Floats& probs, int64_t R, int64_t V) {
  std::vector<double> row_nll(size_t(std::max<int64_t>(R, 1)), std::nan(""));  // [R]
  float loss = kNaN;
  run_block_kernel_on_host<CrossEntropyRowsKernel>(
      {logits.data(), targets.data(), mask, probs.data(), row_nll.data(), R, V});
  run_block_kernel_on_host<CrossEntropyTotalKernel>({row_nll.data(), mask, &loss, R});
  return loss;
}

// The CUDA cross-entropy backward: the one-block scale, then one thread per element.
void emulate_cross_entropy_backward(const Floats& probs, const Ints& targets, const float* mask,
                                    float dloss, Floats& dlogits, int64_t R, int64_t V) {
  float scale = kNaN;
  run_block_kernel_on_host<CrossEntropyScaleKernel>({mask, &dloss, &scale, R});
  run_grid(R * V, [&](int64_t i) {
    cross_entropy_backward_thread(i, probs.data(), targets.data(), mask, &scale, dlogits.data(), V);
  });
}

enum class MaskKind { None, SomeZeros, AllZero };

Floats make_mask(MaskKind kind, int64_t R) {
  Floats mask(size_t(R), 0.0f);
  if (kind == MaskKind::SomeZeros)
    for (int64_t r = 0; r < R; ++r) mask[size_t(r)] = r % 3 == 1 ? 0.0f : 1.0f;
  return mask;
}

}  // namespace

TEST_CASE("cuda emulation: cross-entropy forward and backward match the CPU backend") {
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 1}, {7, 7}, {37, 300}, {5, 1000}, {300, 7}};
  for (auto [R, V] : shapes) {
    for (MaskKind kind : {MaskKind::None, MaskKind::SomeZeros, MaskKind::AllZero}) {
      std::string what = "cross_entropy " + sizes(R, V) + " mask kind " + std::to_string(int(kind));
      Floats logits = randn(R * V, 3.0);
      Ints targets = random_ids(R, int32_t(V));
      Floats mask_values = make_mask(kind, R);
      const float* mask = kind == MaskKind::None ? nullptr : mask_values.data();

      Floats probs_want(size_t(R * V)), probs_got(size_t(R * V), kNaN);
      float loss_want = kNaN;
      cpu::cross_entropy_forward<float>(logits.data(), targets.data(), mask, probs_want.data(),
                                        &loss_want, R, V);
      float loss_got = emulate_cross_entropy_forward(logits, targets, mask, probs_got, R, V);
      check_close(probs_got, probs_want, what + " probs");
      INFO(what, ": loss got ", loss_got, ", want ", loss_want);
      CHECK(std::fabs(loss_got - loss_want) <= 1e-5 * std::fabs(loss_want) + 1e-6);
      if (kind == MaskKind::AllZero || V == 1) CHECK(loss_got == 0.0f);  // nothing kept / p = 1
      else CHECK(loss_got > 0.0f);

      const float dloss = 0.75f;
      Floats dlogits_want(size_t(R * V)), dlogits_got(size_t(R * V), kNaN);
      cpu::cross_entropy_backward<float>(probs_want.data(), targets.data(), mask, &dloss,
                                         dlogits_want.data(), R, V);
      emulate_cross_entropy_backward(probs_want, targets, mask, dloss, dlogits_got, R, V);
      check_close(dlogits_got, dlogits_want, what + " dlogits");
    }
  }
}

TEST_CASE("cuda emulation: cross-entropy with fractional mask weights matches the CPU backend") {
  const int64_t R = 301, V = 50;
  Floats logits = randn(R * V, 2.0);
  Ints targets = random_ids(R, int32_t(V));
  Floats mask(static_cast<size_t>(R));
  for (int64_t r = 0; r < R; ++r) mask[size_t(r)] = float(r % 4) * 0.25f;  // 0, .25, .5, .75
  Floats probs_want(size_t(R * V)), probs_got(size_t(R * V), kNaN);
  float loss_want = kNaN;
  cpu::cross_entropy_forward<float>(logits.data(), targets.data(), mask.data(), probs_want.data(),
                                    &loss_want, R, V);
  float loss_got = emulate_cross_entropy_forward(logits, targets, mask.data(), probs_got, R, V);
  CHECK(loss_got == doctest::Approx(loss_want).epsilon(1e-5));

  Floats dlogits_want(size_t(R * V)), dlogits_got(size_t(R * V), kNaN);
  const float dloss = -1.5f;
  cpu::cross_entropy_backward<float>(probs_want.data(), targets.data(), mask.data(), &dloss,
                                     dlogits_want.data(), R, V);
  emulate_cross_entropy_backward(probs_want, targets, mask.data(), dloss, dlogits_got, R, V);
  check_close(dlogits_got, dlogits_want, "fractional-mask dlogits");
}

TEST_CASE("cuda emulation: embedding forward and backward (repeated ids) match the CPU backend") {
  struct Case {
    int64_t N, V, C;
  };
  const std::vector<Case> cases = {{1, 1, 1}, {37, 11, 7}, {50, 5, 300}, {9, 40, 1}, {300, 65, 33}};
  for (auto [N, V, C] : cases) {
    std::string what = "N=" + std::to_string(N) + " V=" + std::to_string(V) + " C=" + std::to_string(C);
    Floats weight = randn(V * C);
    Ints ids = random_ids(N, int32_t(V));
    ids[0] = ids[N - 1];  // at least one id repeats (N > 1) or is reused

    Floats out_want(size_t(N * C)), out_got(size_t(N * C), kNaN);
    cpu::embedding_forward<float>(weight.data(), ids.data(), out_want.data(), N, C);
    run_grid(N * C, [&](int64_t i) {
      embedding_forward_thread(i, weight.data(), ids.data(), out_got.data(), C);
    });
    CHECK(out_got == out_want);  // a copy: exact

    Floats dy = randn(N * C), dw_want(size_t(V * C)), dw_got(size_t(V * C), kNaN);
    cpu::embedding_backward<float>(dy.data(), ids.data(), dw_want.data(), N, V, C);
    run_grid(V * C, [&](int64_t i) {
      embedding_backward_thread(i, dy.data(), ids.data(), dw_got.data(), N, C);
    });
    // the same additions in the same order (ids order) as the CPU backend: exact
    INFO(what);
    CHECK(dw_got == dw_want);
  }
}

TEST_CASE("cuda emulation: embedding backward sums repeated ids and zeroes unused rows") {
  const int64_t N = 6, V = 4, C = 3;
  Ints ids = {2, 0, 2, 2, 0, 2};  // id 1 and 3 never appear
  Floats dy(size_t(N * C));
  for (int64_t i = 0; i < N * C; ++i) dy[size_t(i)] = float(i + 1);
  Floats dw(size_t(V * C), kNaN);
  run_grid(V * C, [&](int64_t i) { embedding_backward_thread(i, dy.data(), ids.data(), dw.data(), N, C); });
  // row 0: dy rows 1 and 4; row 2: dy rows 0, 2, 3, 5
  Floats want = {4 + 13, 5 + 14, 6 + 15, 0, 0, 0, 1 + 7 + 10 + 16, 2 + 8 + 11 + 17, 3 + 9 + 12 + 18, 0, 0, 0};
  CHECK(dw == want);
}

TEST_CASE("cuda emulation: argmax_rows takes the first maximum, like the CPU backend") {
  const float inf = std::numeric_limits<float>::infinity();
  SUBCASE("random rows of odd lengths") {
    for (auto [R, N] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {13, 7}, {5, 300}, {3, 1000}}) {
      Floats x = randn(R * N);
      Ints want(static_cast<size_t>(R)), got(size_t(R), -1);
      cpu::argmax_rows<float>(x.data(), want.data(), R, N);
      run_block_kernel_on_host<ArgmaxRowsKernel>({x.data(), got.data(), R, N});
      INFO(sizes(R, N));
      CHECK(got == want);
    }
  }
  SUBCASE("ties within a thread's share, across threads, all equal, -inf, NaN") {
    const int64_t R = 6, N = 700;
    Floats x = randn(R * N);
    auto row = [&](int64_t r) { return x.data() + r * N; };
    // row 0: equal maxima at 600 (thread 88), 259 and 3 (both thread 3): 3 wins
    row(0)[600] = row(0)[259] = row(0)[3] = 9.0f;
    // row 1: equal maxima at 511 (thread 255) and 256 (thread 0's second entry): 256 wins
    row(1)[511] = row(1)[256] = 9.0f;
    // row 2: all equal: 0 wins
    std::fill(row(2), row(2) + N, 1.5f);
    // row 3: all −inf: 0 (the CPU backend's std::max_element)
    std::fill(row(3), row(3) + N, -inf);
    // row 4: the maximum at the last entry
    row(4)[N - 1] = 9.0f;
    // row 5: a NaN after a finite maximum never wins
    row(5)[10] = 9.0f;
    row(5)[20] = kNaN;
    Ints want(static_cast<size_t>(R)), got(size_t(R), -1);
    cpu::argmax_rows<float>(x.data(), want.data(), R, N);
    run_block_kernel_on_host<ArgmaxRowsKernel>({x.data(), got.data(), R, N});
    CHECK(want == Ints{3, 256, 0, 0, int32_t(N - 1), 10});
    CHECK(got == want);
  }
}
