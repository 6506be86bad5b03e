// The CUDA update as a graph (experiments/update_plan.h, backend_cuda/graph.cu):
// replaying the captured update gives the eager update's bits, allocates
// nothing, launches one graph and reads nothing back but the window's log;
// a capture that would wait for the device or allocate fails in one line.
// The cuda-sim build runs these (its CI stage picks the "--device cuda"
// cases); without a CUDA device they skip.
#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/safetensors.h"
#include "dispatch/dispatch.h"
#include "tests/cli_run.h"
#include "tests/temp_dir.h"

using namespace lina;
using namespace lina::test;

namespace {

const std::string kData = std::string(LINA_SOURCE_DIR) + "/data/tinyshakespeare.txt";

struct GraphRun {
  nlohmann::json json;
  SafetensorsFile checkpoint;
};

// 20 updates of `preset` on `task` with --cuda-graph `graph`.
GraphRun run_20(const TempDir& dir, const std::string& preset, const std::string& task, const std::string& graph) {
  const std::string out = dir.file(graph);
  Result r = run("train --preset " + preset + " --task " + task + " --device cuda --cuda-graph " + graph +
                 " --steps 20 --batch 2" +
                 (task == "recall" ? " --pairs 4 --keys 8 --values 8 --fresh-batches 1 --probe-batches 1"
                                   : " --data " + kData + " --context 16 --extrap-batches 0") +
                 " --eval-every 20 --eval-batches 1" +
                 " --quiet --out " + out);
  INFO(r.output);
  REQUIRE(r.code == 0);
  const std::string base = out + "/cuda/" + task + "_" + preset + (task == "recall" ? "_p4_k8_v8" : "");
  GraphRun g;
  g.json = nlohmann::json::parse(std::ifstream(base + ".json"));
  g.checkpoint = load_safetensors(base + ".safetensors");
  return g;
}

// A host tensor's bytes.
std::vector<unsigned char> bytes_of(const Tensor& t) {
  std::vector<unsigned char> out(t.nbytes());
  switch (t.dtype()) {
    case DType::F32: std::memcpy(out.data(), t.data<float>(), out.size()); break;
    case DType::F64: std::memcpy(out.data(), t.data<double>(), out.size()); break;
    case DType::I32: std::memcpy(out.data(), t.data<int32_t>(), out.size()); break;
  }
  return out;
}

// Every tensor of the two checkpoints (weights, AdamW's moments) the same bytes.
void check_same_checkpoint(const SafetensorsFile& a, const SafetensorsFile& b) {
  REQUIRE(a.tensors.size() == b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const Tensor &x = a.tensors[i].second, &y = b.tensors[i].second;
    INFO("tensor ", a.tensors[i].first);
    REQUIRE(a.tensors[i].first == b.tensors[i].first);
    CHECK(bytes_of(x) == bytes_of(y));
  }
}

}  // namespace

TEST_CASE("--device cuda: the replayed graph update equals the eager one bit for bit over 20 updates, every preset") {
  if (!dispatch::cuda_available()) {
    MESSAGE("SKIPPED: no CUDA device here (the cuda-sim build runs this case)");
    return;
  }
  struct Case { const char* preset; const char* task; };
  const Case cases[] = {{"attn", "lm"},   {"linear", "lm"}, {"delta", "lm"},  {"gdn", "lm"},   {"hybrid", "lm"},
                        {"retnet", "lm"}, {"mamba2", "lm"}, {"gla", "lm"},    {"gdn", "recall"}};
  for (const Case& c : cases) {
    const std::string what = std::string(c.preset) + " " + c.task;
    INFO(what);
    TempDir dir("cuda-graph");
    GraphRun eager = run_20(dir, c.preset, c.task, "off"), graph = run_20(dir, c.preset, c.task, "on");
    REQUIRE(graph.json["loss_curve"].size() == 20);
    CHECK(graph.json["loss_curve"] == eager.json["loss_curve"]);  // losses, gradient norms, lrs: exactly
    CHECK(graph.json["eval"].back()["val_loss"] == eager.json["eval"].back()["val_loss"]);
    check_same_checkpoint(graph.checkpoint, eager.checkpoint);
    // Per replayed update (updates 4 to 20): one graph launch and nothing
    // else from the host, no allocation, one read back per window (17 updates).
    const nlohmann::json& step = graph.json["cuda_step"];
    INFO(step.dump());
    CHECK(step["graph"] == true);
    CHECK(step["updates"] == 17);
    CHECK(step["graph_launches"].get<double>() == 1.0);
    CHECK(step["launches"].get<double>() == 0.0);
    CHECK(step["allocations"].get<double>() == 0.0);
    CHECK(step["device_to_host_copies"].get<double>() * 17 == doctest::Approx(1.0));
    CHECK(step["kernels"].get<double>() == eager.json["cuda_step"]["launches"].get<double>());
    // the eager run times one update kernel by kernel: every launch is there
    int64_t timed = 0;
    for (const nlohmann::json& k : eager.json["cuda_step"]["kernel_ms"]) timed += k["launches"].get<int64_t>();
    CHECK(double(timed) == eager.json["cuda_step"]["launches"].get<double>());
  }
}

TEST_CASE("--device cuda: a capture that waits for the device or allocates fails in one line, a run goes on without it, and the stream goes on") {
  if (!dispatch::cuda_available()) {
    MESSAGE("SKIPPED: no CUDA device here (the cuda-sim build runs this case)");
    return;
  }
  Tensor t = Tensor::zeros({8}, DType::F32, Device::Cuda);
  {
    dispatch::CudaGraph g;
    CHECK_THROWS_WITH_AS(g.capture([&] { (void)t.to_vector<float>(); }), doctest::Contains("cudaStreamSynchronize"), Error);
    CHECK_FALSE(g.captured());
  }
  {
    dispatch::CudaGraph g;
    CHECK_THROWS_WITH_AS(g.capture([&] { (void)Tensor::zeros({1234}, DType::F32, Device::Cuda); }),
                         doctest::Contains("its rehearsal did not make"), Error);
  }
  // A run whose capture is refused (LINA_CUDA_SYNC=1 waits after every
  // launch) says why and trains on kernel by kernel.
  {
    TempDir dir("cuda-graph-refused");
    Result r = run("train --preset gdn --task lm --device cuda --steps 4 --batch 2 --context 16 --eval-every 4"
                   " --eval-batches 1 --extrap-batches 0 --data " + kData + " --out " + dir.file("run"),
                   "LINA_CUDA_SYNC=1");
    INFO(r.output);
    CHECK(r.code == 0);
    CHECK(r.output.find("the capture failed, going on kernel by kernel") != std::string::npos);
    const nlohmann::json j = nlohmann::json::parse(std::ifstream(dir.file("run") + "/cuda/lm_gdn.json"));
    CHECK(j["cuda_graph"] == false);
    CHECK(j["cuda_graph_error"].get<std::string>().find("LINA_CUDA_SYNC=1") != std::string::npos);
    CHECK(j["steps_done"] == 4);
  }
  // After these, the stream captures and replays as before: a rehearsed
  // allocation is found again, and each replay adds 1 to t.
  dispatch::CudaGraph g;
  auto add_one = [&] {
    Tensor one = Tensor::zeros({8}, DType::F32, Device::Cuda);
    dispatch::fill(one, 1.0);
    dispatch::add_inplace(t, one);
  };
  g.rehearse(add_one);
  g.capture(add_one);
  REQUIRE(g.captured());
  CHECK(g.kernels() == 3);  // zeros, fill, add_inplace
  const dispatch::DeviceCounters before = dispatch::cuda_counters();
  g.replay();
  g.replay();
  const dispatch::DeviceCounters after = dispatch::cuda_counters();
  CHECK(after.graph_launches - before.graph_launches == 2);
  CHECK(after.launches - before.launches == 0);
  CHECK(after.allocations - before.allocations == 0);
  CHECK(t.to_vector<float>() == std::vector<float>(8, 3.0f));  // rehearsal 1, capture 0, replays 2
}

// --stop-at 7 ends the first window (20 updates) part way, as a signal
// would: the run saves update 7 and puts the batch generator back, so the
// resumed run (a fresh process: eager, rehearsed, captured again) draws the
// same batches and ends on the straight run's bits.
TEST_CASE("--device cuda: a run stopped inside a window and resumed equals the straight run bit for bit") {
  if (!dispatch::cuda_available()) {
    MESSAGE("SKIPPED: no CUDA device here (the cuda-sim build runs this case)");
    return;
  }
  TempDir dir("cuda-graph-resume");
  const std::string common = " --device cuda --data " + kData +
                             " --batch 2 --context 16 --eval-every 20 --eval-batches 1 --extrap-batches 0 --quiet";
  Result straight = run("train --preset hybrid --task lm --steps 20" + common + " --out " + dir.file("straight"));
  REQUIRE(straight.code == 0);
  Result first = run("train --preset hybrid --task lm --steps 20 --stop-at 7" + common + " --out " + dir.file("stopped"));
  INFO(first.output);
  REQUIRE(first.code == 0);
  const std::string stopped = dir.file("stopped") + "/cuda/lm_hybrid";
  CHECK(nlohmann::json::parse(std::ifstream(stopped + ".json"))["steps_done"] == 7);
  Result resumed = run("train --resume " + stopped + ".safetensors --quiet");
  INFO(resumed.output);
  REQUIRE(resumed.code == 0);
  const nlohmann::json a = nlohmann::json::parse(std::ifstream(dir.file("straight") + "/cuda/lm_hybrid.json"));
  const nlohmann::json b = nlohmann::json::parse(std::ifstream(stopped + ".json"));
  CHECK(b["steps_done"] == 20);
  CHECK(a["loss_curve"] == b["loss_curve"]);
  check_same_checkpoint(load_safetensors(dir.file("straight") + "/cuda/lm_hybrid.safetensors"),
                        load_safetensors(stopped + ".safetensors"));
}

// The loss that overflows inside a window (20 updates, no checkpoint in it):
// end_update refuses that update and the rest of the window on the device,
// and the window's log read names it, as the CPU's run does.
TEST_CASE("--device cuda: an update whose loss is not finite is refused inside the window and named") {
  if (!dispatch::cuda_available()) {
    MESSAGE("SKIPPED: no CUDA device here (the cuda-sim build runs this case)");
    return;
  }
  TempDir dir("cuda-graph-diverge");
  Result r = run("train --preset gdn --task recall --device cuda --steps 20 --lr 1e5 --batch 2 --pairs 4 --keys 8 "
                 "--values 8 --eval-every 100 --eval-batches 1 --fresh-batches 1 --probe-batches 1 --quiet --out " +
                 dir.file("run"));
  INFO(r.output);
  CHECK(r.code != 0);
  CHECK(r.output.find("training diverged at step") != std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(std::ifstream(dir.file("run") + "/cuda/recall_gdn_p4_k8_v8.json"));
  REQUIRE(j.contains("diverged"));
  const int bad = j["diverged"]["step"].get<int>();
  CHECK(r.output.find("at step " + std::to_string(bad) + " ") != std::string::npos);
  CHECK(j["loss_curve"].size() == size_t(bad - 1));  // the updates before it, each finite
  CHECK(j["steps_done"] == bad - 1);
}
