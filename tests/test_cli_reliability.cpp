// What a long run depends on, end to end through the `lina` binary: resume
// from the checkpoint alone, --extend-to, periodic checkpoints, a diverged
// run, CUDA failures (injected), and resident memory that does not grow
// with the number of steps (untrusted bytes in a checkpoint:
// tests/test_cli_input.cpp).
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <tuple>
#include <nlohmann/json.hpp>

#include "core/safetensors.h"
#include "experiments/checkpoint.h"
#include "tests/cli_run.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace lina::test;

namespace {

json read_json(const fs::path& p) { return json::parse(std::ifstream(p)); }

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kUnderSanitizer = true;
#else
constexpr bool kUnderSanitizer = false;
#endif

// recall evaluates on one fresh batch and probes with one
const std::string kSmallLm = " --batch 2 --eval-batches 1 --quiet";
const std::string kSmall = kSmallLm + " --fresh-batches 1 --probe-batches 1";

}  // namespace

TEST_CASE("resume needs only the checkpoint, and --extend-to trains a finished run on") {
  fs::path d = temp_dir("extend");
  // the cosine schedule (spec 1's), whose warm-up an extension starts again
  REQUIRE(run("train --preset linear --task recall --steps 4 --eval-every 2 --schedule cosine --warmup 100 --out " +
              d.string() + kSmall).code == 0);
  fs::path mine = d / "mine.safetensors";
  fs::copy_file(d / "cpu" / "recall_linear_cosine.safetensors", mine);

  // a finished run: evaluated again, written beside the checkpoint
  Result again = run("train --resume " + mine.string());
  INFO(again.output);
  REQUIRE(again.code == 0);
  CHECK(again.output.find("--extend-to") != std::string::npos);
  json j = read_json(d / "mine.json");
  CHECK(j["steps_done"] == 4);
  CHECK(j["finished"] == true);

  // contradicting flags stay refused
  expect_error("train --resume " + mine.string() + " --preset attn", "--preset attn differs from the linear");
  expect_error("train --resume " + mine.string() + " --batch 3", "--batch 3 differs from the 2");
  expect_error("train --resume " + mine.string() + " --extend-to 4", "must be more than the 4 updates");
  expect_error("train --resume " + mine.string() + " --extend-to 9 --steps 9", "drop --steps");

  // train on to 10 updates: a fresh warm-up (min(100, 6) = 6 updates) to the
  // run's peak, then a cosine over the added updates
  fs::copy_file(mine, d / "copy.safetensors");
  Result ext = run("train --resume " + mine.string() + " --extend-to 10 --quiet");
  INFO(ext.output);
  REQUIRE(ext.code == 0);
  j = read_json(d / "mine.json");
  REQUIRE(j["loss_curve"].size() == 10);
  CHECK(j["steps_done"] == 10);
  CHECK(j["config"]["train"]["steps"] == 10);
  REQUIRE(j["schedule"].size() == 2);
  CHECK(j["schedule"][1]["from"] == 4);
  CHECK(j["schedule"][1]["to"] == 10);
  CHECK(j["schedule"][1]["warmup"] == 6);
  CHECK(j["loss_curve"][3]["lr"].get<double>() == doctest::Approx(4e-5));     // still in the run's warm-up
  CHECK(j["loss_curve"][4]["lr"].get<double>() == doctest::Approx(1e-3 / 6));  // warm-up again
  CHECK(j["loss_curve"][9]["lr"].get<double>() == doctest::Approx(1e-3));

  // an extension interrupted and resumed equals the uninterrupted one, to the bit;
  // --lr sets the extension's peak
  fs::path copy = d / "copy.safetensors";
  REQUIRE(run("train --resume " + copy.string() + " --extend-to 10 --lr 5e-4 --stop-at 7 --quiet").code == 0);
  REQUIRE(run("train --resume " + copy.string() + " --quiet").code == 0);
  json split = read_json(d / "copy.json");
  fs::copy_file(d / "cpu" / "recall_linear_cosine.safetensors", d / "whole.safetensors");
  REQUIRE(run("train --resume " + (d / "whole.safetensors").string() + " --extend-to 10 --lr 5e-4 --quiet").code == 0);
  json whole = read_json(d / "whole.json");
  REQUIRE(split["loss_curve"].size() == 10);
  REQUIRE(whole["loss_curve"].size() == 10);
  CHECK(split["schedule"][1]["peak_lr"] == 5e-4);
  for (size_t i = 0; i < 10; ++i) {
    INFO("update " << i + 1);
    CHECK(split["loss_curve"][i]["loss"] == whole["loss_curve"][i]["loss"]);
    CHECK(split["loss_curve"][i]["grad_norm"] == whole["loss_curve"][i]["grad_norm"]);
  }
}

TEST_CASE("--checkpoint-every N: a run that fails loses at most N updates (CUDA faults injected)") {
  fs::path d = temp_dir("faults");
  const std::string args = "train --preset gdn --task recall --steps 7 --eval-every 100 --checkpoint-every 2 --out " +
                           d.string() + kSmall;
  const fs::path ckpt = d / "cpu" / "recall_gdn.safetensors", json_path = d / "cpu" / "recall_gdn.json";

  // out of GPU memory at update 6: the checkpoint of update 4 stays
  expect_error(args, "smaller --batch", "LINA_INJECT_CUDA_STATUS=2@6");
  json j = read_json(json_path);
  CHECK(j["checkpoint_step"] == 4);
  CHECK(j["finished"] == false);
  lina::SafetensorsFile f = lina::load_safetensors(ckpt.string());
  CHECK(lina::checkpoint_info(f).updates == 4);

  // the device lost at update 3: the message says how to go on
  fs::remove_all(d);
  Result lost = expect_error(args, "--resume", "LINA_INJECT_CUDA_STATUS=719@3");
  CHECK(lost.output.find("--device cpu") != std::string::npos);
  CHECK(read_json(json_path)["checkpoint_step"] == 2);

  // and the run goes on from there
  Result resumed = run("train --resume " + ckpt.string() + " --quiet");
  INFO(resumed.output);
  REQUIRE(resumed.code == 0);
  j = read_json(json_path);
  CHECK(j["steps_done"] == 7);
  CHECK(j["loss_curve"].size() == 7);
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// Two runs of one name in one --out would each rename their files over the
// other's and both exit 0: the lock file beside the run json, held for the
// run's life, makes the second refuse before it writes anything.
TEST_CASE("one lina train per run json: a second run of it refuses with one line while the first holds the lock") {
  fs::path d = temp_dir("lock");
  const std::string args = "train --preset linear --task recall --steps 2 --out " + d.string() + kSmall;
  const fs::path json_path = d / "cpu" / "recall_linear.json", lock = d / "cpu" / "recall_linear.json.lock";
  REQUIRE(run(args).code == 0);
  CHECK_FALSE(fs::exists(lock));  // removed when the run ended
  const std::string json_before = read_file(json_path);
  const std::string ckpt_before = read_file(d / "cpu" / "recall_linear.safetensors");
  {
    // this process holds the lock, as a run in progress does
    const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    REQUIRE(fd >= 0);
    REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
    REQUIRE(::write(fd, "4242\n", 5) == 5);
    expect_error(args, "another lina train (process 4242) is writing " + json_path.string());
    // --resume of its checkpoint writes the same json: refused too
    expect_error("train --resume " + (d / "cpu" / "recall_linear.safetensors").string() + " --extend-to 3",
                 "is writing " + json_path.string());
    CHECK(read_file(json_path) == json_before);
    CHECK(read_file(d / "cpu" / "recall_linear.safetensors") == ckpt_before);
    CHECK(fs::exists(lock));  // the holder's file, left alone
    ::close(fd);
  }
  // the lock file of a run that was killed, unlocked: the next run takes it, then removes it
  Result again = run(args);
  INFO(again.output);
  CHECK(again.code == 0);
  CHECK_FALSE(fs::exists(lock));

  // two real runs: the second starts while the first trains, and is refused
  // (each bounded: a lina without the lock would run the second for good)
  const std::string long_run = lina_binary() + " train --preset linear --task recall --steps 1000000 "
                               "--eval-every 1000000 --out " + d.string() + kSmall;
  Result both = run_command("sh -c '" + long_run + " & pid=$!; i=0; while [ ! -e " + lock.string() +
                            " ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; timeout 60 " + long_run +
                            "; echo second exited $?; kill -INT $pid; wait $pid; echo first exited $?' 2>&1");
  INFO(both.output);
  CHECK(both.output.find("error: another lina train (process ") != std::string::npos);
  CHECK(both.output.find("second exited 1") != std::string::npos);
  CHECK(both.output.find("first exited 130") != std::string::npos);  // stopped by SIGINT, its files written
  CHECK(read_json(json_path)["interrupted"] == true);
  CHECK_FALSE(fs::exists(lock));
}

TEST_CASE("a diverged run stops with one line, keeps the last finite checkpoint, says how to go on") {
  fs::path d = temp_dir("diverge");
  // lr 1e5 makes the loss overflow within a few updates
  Result r = expect_error("train --preset gdn --task recall --steps 20 --lr 1e5 --eval-every 100 --checkpoint-every 1 --out " +
                              d.string() + kSmall,
                          "training diverged at step");
  CHECK(r.output.find("--extend-to 20 --lr 50000") != std::string::npos);
  json j = read_json(d / "cpu" / "recall_gdn.json");
  REQUIRE(j.contains("diverged"));
  int bad = j["diverged"]["step"].get<int>();
  CHECK(r.output.find("at step " + std::to_string(bad)) != std::string::npos);
  CHECK(j["checkpoint_step"] == bad - 1);
  CHECK(j["finished"] == false);
  lina::SafetensorsFile f = lina::load_safetensors((d / "cpu" / "recall_gdn.safetensors").string());
  CHECK(lina::checkpoint_info(f).updates == bad - 1);
}

// Evaluated after every update, the weights that first score NaN are caught
// by the evaluation: they are not saved, and the checkpoint kept is the
// update before, every weight finite.
TEST_CASE("a val loss that is not finite stops the run before its weights are saved") {
  fs::path d = temp_dir("diverge_eval");
  Result r = expect_error("train --preset gdn --task recall --steps 20 --lr 1e5 --eval-every 1 --checkpoint-every 1 --out " +
                              d.string() + kSmall,
                          "training diverged at step");
  CHECK(r.output.find("at its evaluation") != std::string::npos);
  CHECK(r.output.find("the last checkpoint with finite losses is") != std::string::npos);
  json j = read_json(d / "cpu" / "recall_gdn.json");
  REQUIRE(j.contains("diverged"));
  CHECK(j["diverged"].contains("val_loss"));
  const int bad = j["diverged"]["step"].get<int>();
  CHECK(j["checkpoint_step"] == bad - 1);
  for (const json& e : j["eval"]) CHECK(std::isfinite(e["val_loss"].get<double>()));
  lina::SafetensorsFile f = lina::load_safetensors((d / "cpu" / "recall_gdn.safetensors").string());
  CHECK(lina::checkpoint_info(f).updates == bad - 1);
  for (const auto& [name, tensor] : f.tensors)
    for (double v : tensor.to(lina::DType::F64).to_vector<double>()) REQUIRE_MESSAGE(std::isfinite(v), name);
}

TEST_CASE("every kernel writes its whole output: training on NaN-filled new buffers stays finite") {
  fs::path d = temp_dir("nan_buffers");
  for (std::string preset : {"attn", "linear", "delta", "gdn", "hybrid"}) {
    Result r = run("train --task recall --steps 2 --eval-every 2 --preset " + preset + " --out " + d.string() + kSmall,
                   "LINA_FILL_NEW_BUFFERS=1");
    INFO(preset << ": " << r.output);
    REQUIRE(r.code == 0);
    json j = read_json(d / "cpu" / ("recall_" + preset + ".json"));
    CHECK(std::isfinite(j["final"]["val_loss"].get<double>()));
    CHECK(std::isfinite(j["loss_curve"][1]["grad_norm"].get<double>()));
  }
}

TEST_CASE("peak resident memory does not grow with the number of training steps or generated tokens") {
  if (kUnderSanitizer) {
    MESSAGE("SKIPPED: memory is not measured under the sanitizer");
    return;
  }
  fs::path d = temp_dir("memory");
  auto train = [&](int steps) {
    Result r = run_measured({"train", "--preset", "gdn", "--task", "recall", "--batch", "4", "--steps",
                             std::to_string(steps), "--eval-every", "50", "--eval-batches", "2", "--fresh-batches", "2", "--probe-batches", "1",
                             "--quiet", "--out", d.string()});
    REQUIRE(r.code == 0);
    return r.peak_rss_mb;
  };
  double short_run = train(50), long_run = train(200);
  MESSAGE("peak resident memory: 50 steps " << short_run << " MB, 200 steps " << long_run << " MB");
  CHECK(long_run <= 1.05 * short_run);

  // generation with the constant-size state
  {
    std::ofstream text(d / "text.txt");
    for (int i = 0; i < 100; ++i) text << "To be, or not to be, that is the question:\n";
  }
  REQUIRE(run("train --preset gdn --task lm --steps 2 --context 16 --eval-every 2 --extrap-batches 0 --data " +
              (d / "text.txt").string() + " --out " + d.string() + kSmallLm).code == 0);
  auto sample = [&](int tokens) {
    Result r = run_measured({"sample", "--checkpoint", (d / "cpu" / "lm_gdn.safetensors").string(),
                             "--tokens", std::to_string(tokens)});
    REQUIRE(r.code == 0);
    return r.peak_rss_mb;
  };
  double few = sample(200), many = sample(1000);
  MESSAGE("peak resident memory of sample: 200 tokens " << few << " MB, 1000 tokens " << many << " MB");
  CHECK(many <= 1.05 * few);
}

