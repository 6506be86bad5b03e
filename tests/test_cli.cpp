// The `lina` binary end to end: --device cuda, the flags that choose a form
// of an op (each trains like the default), resuming from a checkpoint gives
// the same losses as an uninterrupted run, to the bit, lm's eval and sample,
// and a clean stop on a signal. Bad input, options out of range and bad
// checkpoints: tests/test_cli_input.cpp.
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/safetensors.h"
#include "dispatch/dispatch.h"
#include "tests/cli_run.h"

namespace fs = std::filesystem;

using namespace lina::test;

namespace {

// A tiny recall evaluation: one held-out batch, one fresh, one per probed size.
const std::string kTinyEval = " --eval-batches 1 --fresh-batches 1 --probe-batches 1";
// A tiny run (lm; recall).
const std::string kTinyLm = " --steps 4 --batch 2 --eval-every 2 --eval-batches 1 --quiet";
const std::string kTiny = kTinyLm + " --fresh-batches 1 --probe-batches 1";

}  // namespace

// --device cuda: one clear line where lina was built without CUDA or no GPU
// is present, a short run that trains where one is.
TEST_CASE("--device cuda: built without CUDA, no GPU present, GPU present") {
  fs::path d = temp_dir("cuda");
  const std::string train = "train --preset gdn --task recall --batch 4 --steps 5 --eval-every 5" + kTinyEval +
                            " --device cuda --out " + d.string();
#ifndef LINA_WITH_CUDA
  MESSAGE("lina was built without CUDA: expecting that error");
  expect_error(train, "lina was built without CUDA");
#else
  if (!lina::dispatch::cuda_available()) {
    MESSAGE("built with CUDA, no GPU present: expecting that error");
    expect_error(train, "no CUDA GPU is available (no device found)");
  } else {
    MESSAGE("GPU present: expecting a run that trains");
    Result r = run(train);
    INFO(r.output);
    CHECK(r.code == 0);
    CHECK(fs::exists(d / "cuda" / "recall_gdn.json"));
    nlohmann::json j = nlohmann::json::parse(std::ifstream(d / "cuda" / "recall_gdn.json"));
    CHECK(j["cuda_runtime"] == lina::dispatch::cuda_runtime());
    // updates 4 and 5, replays of the captured graph, counted: one graph
    // launch each and no kernel launched from the host, no allocation, the
    // window's one read back shared by the two
    CHECK(j["cuda_graph"] == true);
    const nlohmann::json& step = j["cuda_step"];
    INFO(step.dump());
    CHECK(step["updates"] == 2);
    CHECK(step["kernels"].get<double>() > 0);
    CHECK(step["launches"].get<double>() == 0);
    CHECK(step["graph_launches"].get<double>() == 1);
    CHECK(step["allocations"].get<double>() == 0);
    CHECK(step["device_to_host_copies"].get<double>() == 0.5);
    CHECK(step["ms"].get<double>() > 0);
    CHECK(step["ms"].get<double>() * 2 <= 1e3 * j["train_time_s"].get<double>());
  }
#endif
}

// --tf32: the matrix products read their operands with a 10-bit mantissa
// (cuda-sim rounds them as the tensor cores do), so the losses move off
// float32's, by its own tolerance: 1e-2 relative over 6 updates of gdn.
TEST_CASE("--device cuda: --tf32 changes the losses within its tolerance, and is refused on the CPU") {
  expect_error("train --preset gdn --task lm --tf32 --device cpu" + kTinyLm, "--tf32 is for --device cuda");
  if (!lina::dispatch::cuda_available()) {
    MESSAGE("SKIPPED: no CUDA device here (the cuda-sim build runs the TF32 run)");
    return;
  }
  const std::string data = std::string(LINA_SOURCE_DIR) + "/data/tinyshakespeare.txt";
  std::vector<double> losses[2];
  for (int tf32 = 0; tf32 < 2; ++tf32) {
    fs::path out = temp_dir(tf32 ? "tf32-on" : "tf32-off");
    Result r = run(std::string("train --task lm --preset gdn --device cuda --data ") + data +
                   " --steps 6 --batch 2 --context 16 --eval-every 6 --eval-batches 1 --extrap-batches 0 --quiet" +
                   (tf32 ? " --tf32" : "") + " --out " + out.string());
    INFO(r.output);
    REQUIRE(r.code == 0);
    nlohmann::json j = nlohmann::json::parse(std::ifstream(out / "cuda" / "lm_gdn.json"));
    CHECK(j["tf32"] == bool(tf32));
    for (const auto& point : j["loss_curve"]) losses[tf32].push_back(point["loss"].get<double>());
  }
  REQUIRE(losses[0].size() == 6);
  REQUIRE(losses[1].size() == 6);
  CHECK(losses[0] != losses[1]);  // the flag acts
  for (size_t i = 0; i < 6; ++i) {
    INFO("update ", i + 1, ": float32 ", losses[0][i], ", tf32 ", losses[1][i]);
    CHECK(std::fabs(losses[0][i] - losses[1][i]) <= 1e-2 * std::fabs(losses[0][i]));
  }
}

// The same runs on both devices: the losses of every step agree (float32 on
// both sides, summation orders differ). On the cuda-sim build this runs the
// real CUDA kernels on the CPU; without any CUDA it is skipped.
TEST_CASE("--device cuda trains every preset with the CPU's losses") {
  if (!lina::dispatch::cuda_available()) {
    MESSAGE("SKIPPED: no CUDA device here (the cuda-sim build runs this case)");
    return;
  }
  const std::string data = std::string(LINA_SOURCE_DIR) + "/data/tinyshakespeare.txt";
  for (const char* preset : {"attn", "linear", "delta", "gdn", "hybrid", "retnet", "mamba2", "gla"}) {
    INFO("preset ", preset);
    std::vector<double> losses[2];
    const char* devices[2] = {"cpu", "cuda"};
    for (int d = 0; d < 2; ++d) {
      fs::path out = temp_dir(std::string("same-losses-") + preset + "-" + devices[d]);
      Result r = run(std::string("train --task lm --preset ") + preset + " --device " + devices[d] +
                     " --data " + data + " --steps 6 --batch 2 --context 16 --eval-every 6 --eval-batches 1" +
                     " --extrap-batches 0 --quiet --out " + out.string());
      INFO(r.output);
      REQUIRE(r.code == 0);
      nlohmann::json j = nlohmann::json::parse(std::ifstream(out / devices[d] / (std::string("lm_") + preset + ".json")));
      for (const auto& point : j["loss_curve"]) losses[d].push_back(point["loss"].get<double>());
    }
    REQUIRE(losses[0].size() == 6);
    REQUIRE(losses[1].size() == 6);
    for (size_t i = 0; i < 6; ++i) {
      INFO("step ", i + 1, ": cpu ", losses[0][i], ", cuda ", losses[1][i]);
      CHECK(std::fabs(losses[0][i] - losses[1][i]) <= 1e-4 * std::fabs(losses[0][i]));
    }
  }
}

TEST_CASE("recall --pairs/--keys: recorded in the json and in the file name") {
  fs::path d = temp_dir("pairs");
  Result r = run("train --preset gdn --task recall --pairs 8 --keys 16" + kTiny + " --out " + d.string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  const fs::path json_path = d / "cpu" / "recall_gdn_p8_k16.json";
  REQUIRE(fs::exists(json_path));
  nlohmann::json j = nlohmann::json::parse(std::ifstream(json_path));
  CHECK(j["config"]["train"]["pairs"] == 8);
  CHECK(j["config"]["train"]["keys"] == 16);
  CHECK(j["config"]["train"]["context"] == 31);
  CHECK(j["config"]["model"]["vocab"] == 16 + 64);  // 64 value tokens
}

// Two tiny recall runs of `preset`, one per value of `flag`, that must be the
// same maths: both succeed, each json records its value (checked by
// `check_json`), and the second follows the first's losses to float32 rounding.
static void check_same_losses(const std::string& preset, const std::string& flag,
                       const std::array<const char*, 2>& values,
                       const std::function<void(const nlohmann::json&, int)>& check_json) {
  fs::path d = temp_dir(preset + flag);
  std::vector<double> losses[2];
  for (int i = 0; i < 2; ++i) {
    const fs::path out = d / values[i];
    Result r = run("train --preset " + preset + " --task recall " + flag + " " + values[i] + kTiny +
                   " --out " + out.string());
    INFO(r.output);
    REQUIRE(r.code == 0);
    nlohmann::json j = nlohmann::json::parse(std::ifstream(out / "cpu" / ("recall_" + preset + ".json")));
    check_json(j, i);
    for (const auto& point : j["loss_curve"]) losses[i].push_back(point["loss"].get<double>());
  }
  REQUIRE(losses[0].size() == 4);
  REQUIRE(losses[1].size() == 4);
  for (size_t s = 0; s < 4; ++s) CHECK(std::fabs(losses[0][s] - losses[1][s]) < 1e-4);
}

// The two forms of the recurrence are the same maths: a run trained token by
// token follows the chunked run's losses to float32 rounding.
TEST_CASE("--scan-form sequential trains like the chunked form") {
  const std::array<const char*, 2> forms = {"chunked", "sequential"};
  check_same_losses("gdn", "--scan-form", forms, [&](const nlohmann::json& j, int i) {
    CHECK(j["config"]["model"]["scan_form"] == forms[i]);
    CHECK(j["config"]["train"]["scan_form"] == forms[i]);
  });
}

// Attention fused into one op or composed op by op is the same maths.
TEST_CASE("--attention composed trains like the fused op") {
  const std::array<const char*, 2> forms = {"fused", "composed"};
  check_same_losses("attn", "--attention", forms, [&](const nlohmann::json& j, int i) {
    CHECK(j["config"]["train"]["attention"] == forms[i]);
    CHECK(j["config"]["model"]["fused_attention"] == (i == 0));
  });
}

// The recurrent layers' conv + SiLU as one op or as two is the same maths; a
// checkpoint from before the option was one op and resumes as such.
TEST_CASE("--conv composed trains like the fused op and older checkpoints resume fused") {
  const std::array<const char*, 2> forms = {"fused", "composed"};
  check_same_losses("gdn", "--conv", forms, [&](const nlohmann::json& j, int i) {
    CHECK(j["config"]["train"]["conv"] == forms[i]);
    CHECK(j["config"]["model"]["fused_conv"] == (i == 0));
  });

  fs::path d = temp_dir("conv_resume");
  Result r = run("train --preset gdn --task recall --stop-at 2 --out " + d.string() + kTiny);
  INFO(r.output);
  REQUIRE(r.code == 0);
  // the checkpoint as an older lina wrote it: no "conv" among its options
  lina::SafetensorsFile f = lina::load_safetensors((d / "cpu" / "recall_gdn.safetensors").string());
  nlohmann::json options = nlohmann::json::parse(f.metadata.at("options"));
  REQUIRE(options.at("conv") == "fused");
  options.erase("conv");
  f.metadata["options"] = options.dump();
  const fs::path old_ckpt = d / "old.safetensors";
  lina::save_safetensors(old_ckpt.string(), f.tensors, f.metadata);
  expect_error("train --resume " + old_ckpt.string() + " --conv composed --quiet",
               "--conv composed differs from the fused of checkpoint");
  Result resumed = run("train --resume " + old_ckpt.string() + " --quiet");
  INFO(resumed.output);
  REQUIRE(resumed.code == 0);
  nlohmann::json j = nlohmann::json::parse(std::ifstream(d / "old.json"));
  CHECK(j["config"]["train"]["conv"] == "fused");
  CHECK(j["loss_curve"].size() == 4);
}

// The chunk length changes how the chunked scan groups its work, not what it
// computes; it is recorded, checked on resume, and must be positive.
TEST_CASE("--scan-chunk: any chunk length trains like the default, recorded and checked on resume") {
  const std::array<const char*, 2> chunks = {"16", "3"};
  check_same_losses("gdn", "--scan-chunk", chunks, [&](const nlohmann::json& j, int i) {
    CHECK(j["config"]["model"]["scan_chunk"] == std::stoi(chunks[i]));
    CHECK(j["config"]["train"]["scan_chunk"] == std::stoi(chunks[i]));
  });
  fs::path d = temp_dir("scan_chunk");
  expect_error("train --preset gdn --task recall --scan-chunk 0 --out " + d.string() + kTiny,
               "--scan-chunk: must be in 1..4096, got 0");
  Result r = run("train --preset gdn --task recall --scan-chunk 5 --out " + d.string() + kTiny);
  INFO(r.output);
  REQUIRE(r.code == 0);
  const fs::path ckpt = d / "cpu" / "recall_gdn.safetensors";
  expect_error("train --resume " + ckpt.string() + " --scan-chunk 8 --extend-to 6 --quiet",
               "--scan-chunk 8 differs from the 5 of checkpoint");
}

TEST_CASE("--feature-map: in the run's name and json, checked on resume and eval") {
  fs::path d = temp_dir("feature_map");
  const std::string out = " --out " + d.string();
  expect_error("train --preset linear --task recall --feature-map tanh" + out,
               "unknown feature map 'tanh': use elu1, relu or sigmoid");
  expect_error("train --preset gdn --task recall --feature-map relu" + out,
               "--feature-map is for linear attention layers; preset 'gdn' has none");
  Result r = run("train --preset linear --task recall --feature-map relu" + out + kTiny);
  INFO(r.output);
  REQUIRE(r.code == 0);
  fs::path json_path = d / "cpu" / "recall_linear-relu.json";
  fs::path ckpt = d / "cpu" / "recall_linear-relu.safetensors";
  REQUIRE(fs::exists(json_path));
  nlohmann::json j = nlohmann::json::parse(std::ifstream(json_path));
  CHECK(j["config"]["train"]["feature_map"] == "relu");
  CHECK(j["config"]["model"]["feature_map"] == "relu");
  expect_error("train --resume " + ckpt.string() + " --feature-map sigmoid --extend-to 6 --quiet",
               "--feature-map sigmoid differs from the relu of checkpoint");
  // eval rebuilds the model with the checkpoint's map: the json's final accuracy again
  Result e = run("eval --task recall --checkpoint " + ckpt.string() + " --predictions " +
                 (d / "p.json").string());
  INFO(e.output);
  CHECK(e.code == 0);
  nlohmann::json p = nlohmann::json::parse(std::ifstream(d / "p.json"));
  CHECK(p["accuracy"].get<double>() == doctest::Approx(j["final"]["val_accuracy"].get<double>()));
}

TEST_CASE("--weight-decay: in the run's name and json, applied, checked on resume") {
  fs::path d = temp_dir("weight_decay");
  // lr 0.1 from the first update, so that one update's decay (p −= lr·wd·p)
  // moves the second update's loss
  const std::string base = "train --preset gdn --task recall --steps 2 --batch 2 --lr 0.1 "
                           "--eval-every 2 --eval-batches 1 --fresh-batches 1 --probe-batches 1 --quiet --out " + d.string();
  std::vector<nlohmann::json> runs;
  for (const char* wd : {"0.01", "0", "1"}) {
    Result r = run(base + " --weight-decay " + wd);
    INFO(r.output);
    REQUIRE(r.code == 0);
    const std::string name = std::string(wd) == "0.01" ? "recall_gdn" : std::string("recall_gdn_wd") + wd;
    const fs::path json_path = d / "cpu" / (name + ".json");
    REQUIRE(fs::exists(json_path));
    runs.push_back(nlohmann::json::parse(std::ifstream(json_path)));
    CHECK(runs.back()["config"]["train"]["weight_decay"].get<double>() == std::stod(wd));
  }
  auto loss = [](const nlohmann::json& j, int step) { return j["loss_curve"][step]["loss"].get<double>(); };
  CHECK(loss(runs[0], 0) == loss(runs[1], 0));  // the same first update's loss
  CHECK(loss(runs[0], 1) != loss(runs[1], 1));  // the decay moved the weights
  CHECK(loss(runs[1], 1) != loss(runs[2], 1));
  expect_error("train --resume " + (d / "cpu" / "recall_gdn_wd0.safetensors").string() +
                   " --weight-decay 0.01 --extend-to 4 --quiet",
               "--weight-decay 0.01 differs from the 0.0 of checkpoint");
}

TEST_CASE("state-size prints spec 1.3's numbers") {
  Result r = run("state-size --context 4096");
  CHECK(r.code == 0);
  INFO(r.output);
  CHECK(r.output.find("attn              512        2097152") != std::string::npos);
  CHECK(r.output.find("16384") != std::string::npos);
  CHECK(r.output.find("12288") != std::string::npos);
  CHECK(r.output.find("gla                 0              0        16384") != std::string::npos);
  // the survey's real scale: 128 MiB of KV cache per layer at 4,096 (4 GiB
  // for 32 layers, 128 GiB at 131,072) against a 2 MiB state per layer (64 MiB)
  CHECK(r.output.find("survey 32 x attention, f32                  4 GiB       32 GiB      128 GiB") !=
        std::string::npos);
  CHECK(r.output.find("survey 32 x linear attention, f32          64 MiB       64 MiB       64 MiB") !=
        std::string::npos);
  CHECK(r.output.find("KV cache 2 x ctx x 32 x 128 x 4 bytes = 128 MiB at 4,096") != std::string::npos);
  CHECK(r.output.find("= 2 MiB at any context") != std::string::npos);
}

TEST_CASE("presets prints every preset: its name, course or survey, its layers") {
  Result r = run("presets");
  CHECK(r.code == 0);
  INFO(r.output);
  CHECK(r.output.rfind("attn course attn,attn,attn,attn\n", 0) == 0);  // the registry's order: attn first
  CHECK(r.output.find("hybrid course gdn,gdn,gdn,attn\n") != std::string::npos);
  CHECK(r.output.find("gla survey gla,gla,gla,gla\n") != std::string::npos);
  CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 8);  // the course's five, the survey's three
}

TEST_CASE("resume: N steps + N resumed equal 2N uninterrupted, to the bit") {
  for (std::string preset : {"gdn", "attn"}) {
    fs::path a = temp_dir("full_" + preset), b = temp_dir("split_" + preset);
    std::string common = " --preset " + preset + " --task recall --steps 6 --batch 2 --eval-every 3 --eval-batches 1 --fresh-batches 1 --probe-batches 1 --quiet";
    REQUIRE(run("train" + common + " --out " + a.string()).code == 0);
    REQUIRE(run("train" + common + " --out " + b.string() + " --stop-at 3").code == 0);
    fs::path ckpt = b / "cpu" / ("recall_" + preset + ".safetensors");
    fs::copy_file(ckpt, b / "half.safetensors");
    REQUIRE(run("train" + common + " --out " + b.string() + " --resume " + (b / "half.safetensors").string()).code == 0);
    auto ja = nlohmann::json::parse(std::ifstream(a / "cpu" / ("recall_" + preset + ".json")));
    auto jb = nlohmann::json::parse(std::ifstream(b / "cpu" / ("recall_" + preset + ".json")));
    REQUIRE(ja["loss_curve"].size() == 6);
    REQUIRE(jb["loss_curve"].size() == 6);
    for (size_t i = 0; i < 6; ++i) {
      INFO(preset << " step " << i + 1);
      CHECK(ja["loss_curve"][i]["loss"].get<double>() == jb["loss_curve"][i]["loss"].get<double>());
      // the gradient norm, in double, shows any difference in any gradient
      CHECK(ja["loss_curve"][i]["grad_norm"].get<double>() == jb["loss_curve"][i]["grad_norm"].get<double>());
    }
    CHECK(ja["final"]["val_loss"].get<double>() == jb["final"]["val_loss"].get<double>());
  }
  // Resuming takes the run's options from the checkpoint; a flag that
  // contradicts them is refused.
  fs::path c = temp_dir("resume_options");
  REQUIRE(run("train --preset linear --task recall --steps 4 --batch 2 --eval-every 2 --eval-batches 1 --fresh-batches 1 --probe-batches 1 --quiet --stop-at 2 --out " + c.string()).code == 0);
  fs::path half = c / "half.safetensors";
  fs::copy_file(c / "cpu" / "recall_linear.safetensors", half);
  expect_error("train --preset linear --task recall --batch 3 --quiet --out " + c.string() + " --resume " + half.string(),
               "--batch 3 differs from the 2");
  Result r = run("train --preset linear --task recall --quiet --out " + c.string() + " --resume " + half.string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  auto jc = nlohmann::json::parse(std::ifstream(c / "cpu" / "recall_linear.json"));
  CHECK(jc["loss_curve"].size() == 4);
  CHECK(jc["config"]["train"]["batch"] == 2);
}

TEST_CASE("lm: train on a small text, then eval and sample from the checkpoint") {
  fs::path d = temp_dir("lm");
  {
    std::ofstream f(d / "text.txt");
    for (int i = 0; i < 200; ++i) f << "To be, or not to be, that is the question:\n";
  }
  std::string text = (d / "text.txt").string();
  Result r = run("train --preset hybrid --task lm --context 16 --data " + text + " --out " + d.string() +
                 " --extrap-batches 1" + kTinyLm);
  INFO(r.output);
  REQUIRE(r.code == 0);
  auto j = nlohmann::json::parse(std::ifstream(d / "cpu" / "lm_hybrid.json"));
  CHECK(j["kv_per_token"] == 128);
  CHECK(j["extrapolation"].size() == 4);
  std::string ckpt = (d / "cpu" / "lm_hybrid.safetensors").string();

  Result e = run("eval --checkpoint " + ckpt + " --text " + text + " --context 16");
  INFO(e.output);
  REQUIRE(e.code == 0);
  double loss = std::stod(e.output);
  CHECK(loss > 0.0);
  CHECK(loss < 5.0);
  expect_error("eval --checkpoint " + ckpt + " --text " + text + " --context 60000", "window");
  // --text is read as train reads --data: a regular file of bounded size. /dev/zero has no
  // end (it was read until memory ran out: `timeout` stops such a run here).
  expect_error("eval --checkpoint " + ckpt + " --text /dev/zero --context 16", "text file '/dev/zero' is not a regular file",
               "timeout 20");
  expect_error("eval --checkpoint " + ckpt + " --text " + d.string() + " --context 16", "is a directory");
  expect_error("eval --checkpoint " + ckpt + " --text " + (d / "none.txt").string() + " --context 16", "not found");

  // --save-batches to a file that cannot be written: a line this short (under the
  // stream's 1 KiB) is only buffered, and the error shows when it is flushed and closed
  if (fs::exists("/dev/full"))
    expect_error("train --preset gdn --task lm --context 8 --batch 1 --steps 1 --eval-batches 1 --extrap-batches 0 "
                 "--quiet --data " + text + " --out " + (d / "full").string() + " --save-batches /dev/full",
                 "--save-batches: cannot write /dev/full: No space left on device");

  Result s = run("sample --checkpoint " + ckpt + " --prompt \"To be\" --tokens 30 --seed 3");
  INFO(s.output);
  REQUIRE(s.code == 0);
  CHECK(s.output.rfind("To be", 0) == 0);
  CHECK(s.output.size() == 5 + 30 + 1);  // prompt, 30 characters, newline
  Result s2 = run("sample --checkpoint " + ckpt + " --prompt \"To be\" --tokens 30 --seed 3");
  CHECK(s2.output == s.output);  // seeded
  expect_error("sample --checkpoint " + ckpt + " --prompt \"~~~\"", "vocabulary");
}

TEST_CASE("SIGINT (Ctrl-C) and SIGTERM stop cleanly after writing the checkpoint and the json") {
  // SIGTERM comes from `timeout`, which passes it to lina and then to its
  // whole process group: lina receives it twice. SIGINT is sent twice by
  // hand, 10 ms apart. Both are sent once the first checkpoint is written
  // (however slow the machine), and either way the copy is one stop
  // request, not the second Ctrl-C that kills.
  const std::string train_args =
      " train --preset linear --task recall --steps 1000000 --batch 2 --eval-every 1000000 --eval-batches 1 --fresh-batches 1 --probe-batches 1 --quiet --out ";
  for (auto [signal_name, code] : {std::pair<std::string, int>{"INT", 130}, {"TERM", 143}}) {
    fs::path d = temp_dir("signal_" + signal_name);
    fs::path ckpt = d / "cpu" / "recall_linear.safetensors";
    // TERM: `timeout` is the process signalled; INT: lina itself, twice.
    std::string start = signal_name == "TERM" ? "timeout --preserve-status -s TERM 3600 " : "";
    std::string second = signal_name == "TERM" ? "" : "sleep 0.01; kill -INT $pid 2>/dev/null; ";
    std::string cmd = "sh -c '" + start + lina_binary() + train_args + d.string() +
                      " --checkpoint-every 1 2>&1 & pid=$!; i=0; while [ ! -e " + ckpt.string() +
                      " ] && [ $i -lt 3000 ]; do sleep 0.1; i=$((i+1)); done; kill -" + signal_name + " $pid; " +
                      second + "wait $pid'";
    FILE* p = popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    std::string output;
    std::array<char, 4096> buf{};
    while (fgets(buf.data(), int(buf.size()), p)) output += buf.data();
    int status = pclose(p);
    INFO("SIG" << signal_name << ": " << output);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == code);
    CHECK(output.find("stopped by SIG" + signal_name) != std::string::npos);
    fs::path json_path = d / "cpu" / "recall_linear.json";
    REQUIRE(fs::exists(json_path));
    CHECK(fs::exists(ckpt));
    auto j = nlohmann::json::parse(std::ifstream(json_path));
    CHECK(j["interrupted"] == true);
    CHECK(j["finished"] == false);
    CHECK(j["steps_done"].get<int>() > 0);
    CHECK(j["checkpoint_step"] == j["steps_done"]);
    CHECK(j["loss_curve"].size() == j["steps_done"].get<size_t>());
  }
}
