// The CUDA backend against the CPU backend. Built as its own executable,
// lina_cuda_tests: without a GPU it prints SKIPPED and exits 77, which ctest
// reports as a skipped test.
//
// The heart of the file is the op table (tests/op_table.cpp), the one
// table of every op and kernel entry point, which tests/test_op_table.cpp
// gradient-checks on the CPU: here every row runs on the CPU and on the GPU
// and every output, every tensor an op saved for its backward and every
// input's gradient are compared (tests/op_check.h), within the row's bound
// (tests/op_table.h: max |cuda − cpu| ≤ 1e-4 · max|cpu|, and each element
// where small entries matter). Every entry point of dispatch/dispatch.h has at
// least one row.
//
// Then: some rows must give the same bits on every CUDA run; a whole training
// step of every preset matches the CPU, 20 steps follow its losses, two runs
// give the same bits, generation token by token equals the parallel forward;
// and after the first step a training step reads back exactly two numbers
// and grows no memory.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <array>
#include <vector>

#include "autograd/functions.h"
#include "backend_cuda/cuda_kernels.h"
#include "dispatch/dispatch.h"
#include "dispatch/layout.h"
#include "experiments/update_plan.h"
#include "models/model.h"
#include "models/optim.h"
#include "tests/harness.h"
#include "tests/op_check.h"
#ifdef LINA_CUDA_SIM
#include "cuda_sim/control.h"  // the thread order of lina's CUDA runtime on the CPU
#endif
// lina_cuda_tests is built from this file alone (CMakeLists.txt): the rows
// of the op table are compiled in here.
#include "tests/op_table.cpp"

using namespace lina;
using test::kCudaTensorBound;
using test::OpRow;
using test::op_table;
using test::RowResult;
using test::run_row;

namespace {

std::vector<double> host_doubles(const Tensor& t) {
  return t.to(Device::Cpu).to(DType::F64).to_vector<double>();
}

std::vector<unsigned char> host_bytes(const Tensor& t) {
  if (!t.defined()) return {};
  Tensor host = t.to(Device::Cpu);
  std::vector<unsigned char> bytes(host.nbytes());
  if (!bytes.empty()) std::memcpy(bytes.data(), host.raw(), bytes.size());
  return bytes;
}

// One result of the CUDA run against the same result of the CPU run, within
// the table's tensor bound.
void check_output(const Tensor& got, const Tensor& want, const std::string& what) {
  test::check_close(what, got, want, kCudaTensorBound);
}

// ---- the model --------------------------------------------------------------------

constexpr int kVocab = 65;

// One batch of ids [B, T] and its targets (the next tokens), made on the host.
std::pair<Tensor, Tensor> random_batch(int64_t B, int64_t T, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> seq(size_t(B * (T + 1)));
  for (int32_t& id : seq) id = int32_t(rng.randint(kVocab));
  std::vector<int32_t> x, y;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      x.push_back(seq[size_t(b * (T + 1) + t)]);
      y.push_back(seq[size_t(b * (T + 1) + t + 1)]);
    }
  return {Tensor::from_vector(x, {B, T}), Tensor::from_vector(y, {B, T})};
}

}  // namespace

// ---- memory & devices -------------------------------------------------------------

TEST_CASE("cuda: a device is present and tensors round-trip exactly") {
  CHECK(cuda::device_count() > 0);
  Rng rng(777);
  Tensor x = Tensor::randn({3, 5, 7}, rng, 1.0, 0.0, DType::F32);
  Tensor g = x.to(Device::Cuda);
  CHECK(g.device() == Device::Cuda);
  CHECK(g.shape() == x.shape());
  CHECK(g.to(Device::Cpu).to_vector<float>() == x.to_vector<float>());       // H2D, D2H
  CHECK(g.clone().to(Device::Cpu).to_vector<float>() == x.to_vector<float>());  // D2D
  Tensor h = Tensor::empty({3, 5, 7}, DType::F32, Device::Cuda);
  h.copy_from(x);
  CHECK(h.to_vector<float>() == x.to_vector<float>());
  // a view at an offset into a device buffer
  std::vector<float> xs = x.to_vector<float>();
  CHECK(Tensor::view_of(g, 5, {4}).to_vector<float>() ==
        std::vector<float>(xs.begin() + 5, xs.begin() + 9));
  CHECK(g.at(10) == x.at(10));
  std::vector<int32_t> ids = {1, -2, 3, 40000};
  CHECK(Tensor::from_vector(ids, {4}, Device::Cuda).to_vector<int32_t>() == ids);
  CHECK(Tensor::empty({0}).to(Device::Cuda).to(Device::Cpu).numel() == 0);
  CHECK_NOTHROW(cuda::synchronize());
}

TEST_CASE("cuda: errors are lina::Error with a clear message") {
  Rng rng(778);
  auto randn = [&](const Shape& s) { return Tensor::randn(s, rng, 1.0, 0.0, DType::F32); };
  CHECK_THROWS_WITH_AS(Tensor::zeros({2}, DType::F64, Device::Cuda),
                       doctest::Contains("float32 only"), lina::Error);
  CHECK_THROWS_WITH_AS(dispatch::binary(BinaryFn::Add, randn({2}), randn({2}).to(Device::Cuda)),
                       doctest::Contains("device mismatch"), lina::Error);
  // far beyond any GPU's memory: the CUDA error comes back as lina::Error ...
  CHECK_THROWS_WITH_AS(Tensor::empty({int64_t(1) << 45}, DType::F32, Device::Cuda),
                       doctest::Contains("cuda::alloc"), lina::Error);
  // ... and does not poison the next launch
  CHECK(Tensor::full({4}, 2.0, DType::F32, Device::Cuda).to_vector<float>() ==
        std::vector<float>(4, 2.0f));
  Shape nine(9, 1);
  nine.back() = 2;
  CHECK_THROWS_WITH_AS(dispatch::binary(BinaryFn::Add, randn(nine).to(Device::Cuda),
                                       randn(nine).to(Device::Cuda)),
                       doctest::Contains("at most 8"), lina::Error);
}

// ---- the table ----------------------------------------------------------------------

TEST_CASE("cuda: every row of the op table matches the CPU: outputs, saved tensors, input gradients") {
  // A failing row is reported and the table goes on; the list of failing
  // rows is the test's result.
  test::check_table_on_cuda(op_table());
}

TEST_CASE("cuda: cross-entropy, embedding, norm and conv gradients, sum_to, sum_squares give the same bits every run") {
  int checked = 0;
  for (const OpRow& row : op_table()) {
    if (!row.same_bits) continue;
    INFO("row: ", row.name());
    const std::vector<RowResult> first = run_row(row, Device::Cuda), second = run_row(row, Device::Cuda);
    REQUIRE(first.size() == second.size());
    for (size_t i = 0; i < first.size(); ++i) {
      INFO(first[i].name);
      CHECK(first[i].value.defined() == second[i].value.defined());
      CHECK(host_bytes(first[i].value) == host_bytes(second[i].value));
    }
    ++checked;
  }
  CHECK(checked >= 6);
}

// ---- a whole training step ------------------------------------------------------------

const char* const kPresets[] = {"attn",   "linear", "delta", "gdn", "hybrid",
                                "retnet", "mamba2", "gla", "gla,gla,gla,attn"};

// The model of `preset` on `device`, with the scan in `form`.
ModelConfig config_of(const std::string& preset, ScanForm form) {
  ModelConfig c = make_config(preset, kVocab);
  c.scan_form = form;
  return c;
}

// One training step of every preset, both scan forms, from the same weights
// and batch on both devices: the loss and every parameter's gradient agree.
TEST_CASE("cuda: one training step of every preset matches the CPU (loss, every gradient)") {
  const uint64_t seed = 1234;
  for (const char* preset : kPresets)
    for (ScanForm form : {ScanForm::Chunked, ScanForm::Sequential}) {
      if (std::string(preset) == "attn" && form == ScanForm::Sequential) continue;  // no scan
      INFO("preset ", preset, form == ScanForm::Chunked ? ", chunked scan" : ", token-by-token scan");
      LanguageModel cpu_model(config_of(preset, form), seed, DType::F32, Device::Cpu);
      LanguageModel gpu_model(config_of(preset, form), seed, DType::F32, Device::Cuda);
      const std::vector<Parameter>& cpu_params = cpu_model.params().parameters();
      const std::vector<Parameter>& gpu_params = gpu_model.params().parameters();
      REQUIRE(cpu_params.size() == gpu_params.size());
      // the initial values are drawn on the host, so both models start equal
      for (size_t i = 0; i < cpu_params.size(); ++i) {
        REQUIRE(gpu_params[i].name == cpu_params[i].name);
        CHECK(host_bytes(gpu_params[i].var.data()) == host_bytes(cpu_params[i].var.data()));
      }
      auto [x, y] = random_batch(4, 70, seed);  // T = 70: not a multiple of the chunk (64)
      Var cpu_loss = cross_entropy(cpu_model.forward(x), y);
      Var gpu_loss = cross_entropy(gpu_model.forward(x.to(Device::Cuda)), y.to(Device::Cuda));
      cpu_loss.backward();
      gpu_loss.backward();
      check_output(gpu_loss.data(), cpu_loss.data(), "loss");
      for (size_t i = 0; i < cpu_params.size(); ++i)
        check_output(gpu_params[i].var.grad(), cpu_params[i].var.grad(),
                     "gradient of " + cpu_params[i].name);
    }
}

TEST_CASE("cuda: clipping and one AdamW update of the attn model match the CPU") {
  const uint64_t seed = 1234;
  LanguageModel cpu_model(make_config("attn", kVocab), seed, DType::F32, Device::Cpu);
  LanguageModel gpu_model(make_config("attn", kVocab), seed, DType::F32, Device::Cuda);
  const std::vector<Parameter>& cpu_params = cpu_model.params().parameters();
  const std::vector<Parameter>& gpu_params = gpu_model.params().parameters();
  auto [x, y] = random_batch(4, 33, seed);
  Var cpu_loss = cross_entropy(cpu_model.forward(x), y);
  Var gpu_loss = cross_entropy(gpu_model.forward(x.to(Device::Cuda)), y.to(Device::Cuda));
  cpu_loss.backward();
  gpu_loss.backward();

  // the gradient norm of each device's own gradients
  double cpu_sq = dispatch::sum_squares(cpu_model.params().grad());
  double gpu_sq = dispatch::sum_squares(gpu_model.params().grad());
  CHECK(std::fabs(gpu_sq - cpu_sq) <= kCudaTensorBound.tolerance * cpu_sq);

  // Clipping and one AdamW update, from the SAME gradients: the first update
  // moves each weight by lr·g/(|g| + eps), eps = 1e-8, which turns a 1e-9
  // difference in a gradient of size 1e-8 (a few such entries exist among
  // 65536) into a 1e-4 difference of the update. The gradients were compared
  // above; here the CPU's are copied to the GPU so the step is compared alone.
  gpu_model.params().grad().copy_from(cpu_model.params().grad());
  AdamW cpu_opt(cpu_model.params()), gpu_opt(gpu_model.params());
  double cpu_norm = clip_grad_norm(cpu_model.params(), 1.0);
  double gpu_norm = clip_grad_norm(gpu_model.params(), 1.0);
  CHECK(std::fabs(gpu_norm - cpu_norm) <= kCudaTensorBound.tolerance * cpu_norm);
  cpu_opt.update(1e-3);
  gpu_opt.update(1e-3);
  for (size_t i = 0; i < cpu_params.size(); ++i)
    check_output(gpu_params[i].var.data(), cpu_params[i].var.data(),
                 "parameter after the update: " + cpu_params[i].name);
}

// `steps` training steps on one fixed-seed batch stream: the loss of every
// step, and the final parameters.
struct Trained {
  std::vector<double> losses;
  std::vector<unsigned char> params;
};
Trained train_steps(const std::string& preset, Device device, int steps) {
  LanguageModel model(make_config(preset, kVocab), 77, DType::F32, device);
  AdamW opt(model.params());
  Trained out;
  for (int step = 0; step < steps; ++step) {
    auto [x, y] = random_batch(8, 64, 1000);  // one batch throughout: the loss must fall
    model.params().zero_grad();
    Var loss = cross_entropy(model.forward(x.to(device)), y.to(device));
    loss.backward();
    clip_grad_norm(model.params(), 1.0);
    out.losses.push_back(loss.item());
    opt.update(1e-3);  // the course's rate: at 3e-3 a memorised batch's loss reaches 0.01 and
                     // float rounding, amplified by AdamW where |g| ~ eps, moves it by 4e-3
  }
  out.params = host_bytes(model.params().data());
  return out;
}

// On lina's CUDA runtime on the CPU each step costs a CPU's seconds: there
// the drift is followed over 8 steps, on a GPU over 20.
#ifdef LINA_CUDA_SIM
constexpr int kFollowedSteps = 8;
#else
constexpr int kFollowedSteps = 20;
#endif

TEST_CASE("cuda: training steps of every preset follow the CPU's losses within 1e-3") {
  for (const char* preset : kPresets) {
    INFO("preset ", std::string(preset));
    Trained cpu = train_steps(preset, Device::Cpu, kFollowedSteps),
            gpu = train_steps(preset, Device::Cuda, kFollowedSteps);
    const double worst = test::max_abs_diff(cpu.losses, gpu.losses);  // +∞ on a NaN
    INFO("max |Δloss| = ", worst, " (first ", cpu.losses.front(), ", last ", cpu.losses.back(), ")");
    CHECK(worst <= 1e-3);
    CHECK(cpu.losses.back() < cpu.losses.front());
  }
}

TEST_CASE("cuda: two training runs of every preset give identical bits") {
  for (const char* preset : kPresets) {
    INFO("preset ", std::string(preset));
    Trained first = train_steps(preset, Device::Cuda, 3), second = train_steps(preset, Device::Cuda, 3);
    CHECK(first.losses == second.losses);
    CHECK(first.params == second.params);
  }
}

// A kernel whose result depends on the order its threads run in is missing
// a barrier (or races). On the simulator the order is ours to choose.
TEST_CASE("cuda: the same bits under every thread order (forward, reverse, shuffled), every preset") {
#ifndef LINA_CUDA_SIM
  MESSAGE("not on the simulator: a GPU does not let the thread order be chosen (cuda-sim runs this case)");
  CHECK(std::string(dispatch::cuda_runtime()) == "cuda");
#else
  using cuda_sim::ThreadOrder;
  struct Setting {
    ThreadOrder order;
    uint64_t seed;
  };
  const Setting others[] = {{ThreadOrder::Reverse, 1}, {ThreadOrder::Shuffle, 1}, {ThreadOrder::Shuffle, 2}};
  cuda_sim::set_thread_order(ThreadOrder::Forward);
  std::vector<Trained> forward;
  std::vector<std::vector<std::vector<unsigned char>>> forward_rows;
  for (const char* preset : kPresets) forward.push_back(train_steps(preset, Device::Cuda, 1));
  for (const OpRow& row : op_table()) {
    if (!row.same_bits) continue;
    std::vector<std::vector<unsigned char>> bytes;
    for (const RowResult& result : run_row(row, Device::Cuda)) bytes.push_back(host_bytes(result.value));
    forward_rows.push_back(bytes);
  }
  for (const Setting& setting : others) {
    cuda_sim::set_thread_order(setting.order, setting.seed);
    INFO("order ", setting.order == ThreadOrder::Reverse ? "reverse" : "shuffle", " seed ", setting.seed);
    for (size_t p = 0; p < std::size(kPresets); ++p) {
      INFO("preset ", std::string(kPresets[p]));
      Trained t = train_steps(kPresets[p], Device::Cuda, 1);
      CHECK(t.losses == forward[p].losses);
      CHECK(t.params == forward[p].params);
    }
    size_t r = 0;
    for (const OpRow& row : op_table()) {
      if (!row.same_bits) continue;
      INFO("row ", row.name());
      const std::vector<RowResult> results = run_row(row, Device::Cuda);
      for (size_t i = 0; i < results.size(); ++i) CHECK(host_bytes(results[i].value) == forward_rows[r][i]);
      ++r;
    }
  }
  cuda_sim::set_thread_order(ThreadOrder::Forward);
#endif
}

// Bad input ends as on the CPU: one line naming the id, never an illegal
// address. The CPU checks at the call; on cuda the kernel finds the id, and
// the message comes at the next read of device memory.
TEST_CASE("cuda: ids and targets out of range end with the CPU's one-line error") {
  auto message_of = [](auto&& call) -> std::string {
    try {
      call();
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  Rng rng(1);
  Tensor weight_cpu = Tensor::randn({65, 8}, rng, 1.0);
  const std::vector<int32_t> ids = {3, 70, 5};
  const std::string want_embedding = "embedding: id 70 out of range for vocabulary 65";
  CHECK(message_of([&] { dispatch::embedding_forward(weight_cpu, Tensor::from_vector(ids, {3})); }) ==
        want_embedding);
  Tensor weight = weight_cpu.to(Device::Cuda);
  CHECK(message_of([&] {
          Tensor out = dispatch::embedding_forward(weight, Tensor::from_vector(ids, {3}, Device::Cuda));
          out.to(Device::Cpu);
        }) == want_embedding);

  const std::vector<int32_t> targets = {1, 2, -4};
  Tensor logits_cpu = Tensor::randn({3, 65}, rng, 1.0);
  const std::string want_target = "cross_entropy: target -4 out of range for vocabulary 65";
  Tensor probs;
  CHECK(message_of([&] {
          dispatch::cross_entropy_forward(logits_cpu, Tensor::from_vector(targets, {3}), Tensor(), probs);
        }) == want_target);
  CHECK(message_of([&] {
          Tensor loss = dispatch::cross_entropy_forward(logits_cpu.to(Device::Cuda),
                                                       Tensor::from_vector(targets, {3}, Device::Cuda), Tensor(), probs);
          loss.to(Device::Cpu);
        }) == want_target);
  // reported once: the next step is clean
  Tensor ok = dispatch::embedding_forward(weight, Tensor::from_vector(std::vector<int32_t>{1, 2}, {2}, Device::Cuda));
  CHECK(std::isfinite(host_doubles(ok)[0]));
}

TEST_CASE("cuda: step-by-step inference equals the parallel forward, every preset") {
  for (const char* preset : kPresets) {
    INFO("preset ", std::string(preset));
    LanguageModel model(make_config(preset, kVocab), 5, DType::F32, Device::Cuda);
    auto [x_host, unused] = random_batch(2, 24, 5);
    Tensor x = x_host.to(Device::Cuda);
    Tensor full = model.forward(x).data();  // [2, 24, vocab]
    InferenceState state = model.new_state(2);
    double worst = 0, largest = 0;
    std::vector<double> all = host_doubles(full);
    for (double v : all) largest = std::max(largest, std::fabs(v));
    for (int64_t t = 0; t < 24; ++t) {
      std::vector<double> step = host_doubles(model.forward(slice(x, 1, t, 1), &state).data());
      std::vector<double> want = host_doubles(slice(full, 1, t, 1));
      worst = std::max(worst, test::max_abs_diff(step, want));  // +∞ on a NaN
    }
    INFO("max |step − parallel| = ", worst, ", max |logit| = ", largest);
    CHECK(worst <= kCudaTensorBound.tolerance * std::max(kCudaTensorBound.floor, largest));
    CHECK(state.position == 24);
  }
}

TEST_CASE("cuda: after the first training step, a step reads back 2 numbers and grows no memory") {
  LanguageModel model(make_config("attn", kVocab), 99, DType::F32, Device::Cuda);
  AdamW opt(model.params());
  auto [x_host, y_host] = random_batch(4, 33, 99);
  Tensor x = x_host.to(Device::Cuda), y = y_host.to(Device::Cuda);

  // Every read of a device value stops the GPU; a step needs exactly two:
  // the gradient norm (clip_grad_norm) and the loss (item()).
  auto train_step = [&] {
    model.params().zero_grad();
    Var loss = cross_entropy(model.forward(x), y);
    loss.backward();
    clip_grad_norm(model.params(), 1.0);
    double value = loss.item();
    opt.update(1e-3);
    return value;
  };

  CHECK(std::isfinite(train_step()));  // the first step fills the memory pool
  const dispatch::DeviceCounters after_first = dispatch::cuda_counters();
  for (int step = 2; step <= 3; ++step) {
    const dispatch::DeviceCounters before = dispatch::cuda_counters();
    CHECK(std::isfinite(train_step()));
    const dispatch::DeviceCounters after = dispatch::cuda_counters();
    INFO("step ", step, ": ", after.allocations - before.allocations, " allocations, pool ",
         before.pool_reserved_bytes, " -> ", after.pool_reserved_bytes, " bytes");
    CHECK(after.device_to_host_copies - before.device_to_host_copies == 2);
    CHECK(after.pool_reserved_bytes <= after_first.pool_reserved_bytes);
  }
}

// The launch budget: kernels launched and pool allocations made by one
// training update after the first, per preset, at B 4 × T 33, as a run
// makes it (experiments/train.cpp update_on_device): the update plan's
// batch and numbers, forward with dropout, backward, Σ g² and the log,
// AdamW clipping to 1. Each ceiling is today's count: a change that
// launches more fails here, and a fusion that launches fewer lowers the
// ceiling with it (the goal for a CUDA-graph step, at most 150 for gdn, holds).
TEST_CASE("cuda: a training step stays within its launch and allocation budget, every preset") {
  struct Budget { const char* preset; int64_t launches, allocations; };
  const Budget budgets[] = {{"attn", 138, 139},   {"linear", 198, 211}, {"delta", 142, 175},
                            {"gdn", 142, 179},    {"hybrid", 141, 169}, {"retnet", 126, 151},
                            {"mamba2", 134, 159}, {"gla", 134, 159}};
  for (const Budget& budget : budgets) {
    LanguageModel model(make_config(budget.preset, kVocab), 7, DType::F32, Device::Cuda);
    AdamW opt(model.params());
    auto [x_host, y_host] = random_batch(4, 33, 7);
    // two updates' batches and AdamW numbers in device memory, as a run's window holds them
    UpdatePlan plan(2, 4, 33, /*masked=*/false, DType::F32, Device::Cuda);
    plan.load({Batch{x_host, y_host, Tensor()}, Batch{x_host, y_host, Tensor()}},
              {opt.scalars(1e-3, 1), opt.scalars(1e-3, 2)}, 0);
    auto train_step = [&](int64_t update) {
      plan.begin();
      model.params().zero_grad();
      model.set_dropout({0.1, 1337, update});
      Var loss = cross_entropy(model.forward(plan.x()), plan.y());
      model.set_dropout({});
      loss.backward(Graph::Free);
      plan.end(loss.data(), model.params().grad());
      opt.update(plan.scalars(), plan.control(), plan.sum_of_squares(), /*max_norm=*/1.0);
      CHECK(std::isfinite(loss.item()));
    };
    train_step(0);  // fills the memory pool
    const dispatch::DeviceCounters before = dispatch::cuda_counters();
    train_step(1);
    const dispatch::DeviceCounters after = dispatch::cuda_counters();
    const int64_t launches = after.launches - before.launches;
    const int64_t allocations = after.allocations - before.allocations;
    MESSAGE(std::string(budget.preset) << ": " << launches << " launches, " << allocations << " pool allocations per step");
    CHECK(launches <= budget.launches);
    CHECK(allocations <= budget.allocations);
  }
}

// The recall loss's mask count: the update plan sums each update's mask on
// the host (load) and begin() copies it beside the mask, so the loss's
// kernel reads one number where every block summed the whole mask. The loss
// and its gradient keep the bits of the count the kernel sums itself, on
// the CPU and on cuda; and the count is the one read (twice it halves both).
TEST_CASE("cuda: the cross-entropy reads the mask's count from the update plan, with the bits of its own sum") {
  const int64_t B = 3, T = 11, V = kVocab;
  Rng rng(21);
  auto [x_host, y_host] = random_batch(B, T, 5);
  std::vector<float> mask_values(size_t(B * T));
  for (size_t i = 0; i < mask_values.size(); ++i) mask_values[i] = i % 3 == 1 ? 1.0f : 0.0f;
  const Tensor mask_host = Tensor::from_vector(mask_values, {B, T});
  const Tensor logits_host = Tensor::randn({B, T, V}, rng, 1.0, 0.0, DType::F32);
  for (Device device : {Device::Cpu, Device::Cuda}) {
    INFO((device == Device::Cpu ? "cpu" : "cuda"));
    UpdatePlan plan(1, B, T, /*masked=*/true, DType::F32, device);
    plan.load({Batch{x_host, y_host, mask_host}}, {std::array<double, 3>{1e-3, 1.0, 1.0}}, 0);
    plan.begin();
    REQUIRE(plan.mask_count().defined());
    CHECK(host_doubles(plan.mask_count()) == std::vector<double>{11.0});  // 33 positions, every third kept
    CHECK(host_bytes(plan.mask()) == host_bytes(mask_host));
    const Tensor logits = logits_host.to(device);
    Tensor summed_grad, given_grad, twice_grad;
    const Tensor summed = dispatch::cross_entropy_forward(logits, plan.y(), plan.mask(), summed_grad);
    const Tensor given = dispatch::cross_entropy_forward(logits, plan.y(), plan.mask(), given_grad, plan.mask_count());
    CHECK(host_bytes(given) == host_bytes(summed));
    CHECK(host_bytes(given_grad) == host_bytes(summed_grad));
    const Tensor twice = dispatch::cross_entropy_forward(logits, plan.y(), plan.mask(), twice_grad,
                                                         Tensor::full({1}, 22.0, DType::F32, device));
    CHECK(host_doubles(twice)[0] == host_doubles(summed)[0] / 2);
    CHECK(host_doubles(twice_grad)[4 * V + 2] == host_doubles(summed_grad)[4 * V + 2] / 2);  // row 4: kept
  }
}

int main(int argc, char** argv) {
  if (!dispatch::cuda_available()) {
    std::printf("SKIPPED: no CUDA GPU available\n");
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}

