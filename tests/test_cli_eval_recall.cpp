// `lina eval --task recall`: a recall checkpoint on its run's held-out set
// gives the accuracy the run's json recorded, and the predictions file holds
// the sequences, the scored positions, the targets and the answers.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/cli_run.h"

namespace fs = std::filesystem;
using namespace lina::test;

TEST_CASE("eval --task recall: held-out accuracy as in training, predictions file") {
  fs::path d = temp_dir("eval_recall");
  Result r = run("train --preset gdn --task recall --pairs 8 --keys 16 --steps 4 --batch 3 --eval-every 2"
                 " --eval-batches 2 --fresh-batches 1 --probe-batches 1 --quiet --out " + d.string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  fs::path run_json = d / "cpu" / "recall_gdn_p8_k16.json";
  REQUIRE(fs::exists(run_json));
  nlohmann::json j = nlohmann::json::parse(std::ifstream(run_json));
  fs::path ckpt = run_json;
  ckpt.replace_extension(".safetensors");
  fs::path pred = d / "pred.json";

  Result e = run("eval --task recall --checkpoint " + ckpt.string() + " --predictions " + pred.string());
  INFO(e.output);
  REQUIRE(e.code == 0);
  REQUIRE(fs::exists(pred));
  nlohmann::json p = nlohmann::json::parse(std::ifstream(pred));
  CHECK(p["preset"] == "gdn");
  CHECK(p["sequences"] == 6);
  CHECK(p["pairs"] == 8);
  CHECK(std::abs(p["accuracy"].get<double>() - j["final"]["val_accuracy"].get<double>()) < 1e-9);
  CHECK(std::abs(p["loss"].get<double>() - j["final"]["val_loss"].get<double>()) < 1e-5);
  REQUIRE(p["examples"].size() == 4);
  for (const auto& ex : p["examples"]) {
    REQUIRE(ex["tokens"].size() == 32);  // 4 × pairs
    REQUIRE(ex["positions"].size() == 8);
    CHECK(ex["answers"].size() == 8);
    for (size_t i = 0; i < 8; ++i) {
      int pos = ex["positions"][i];
      CHECK(pos >= 16);  // the second half
      CHECK(ex["tokens"][size_t(pos)] == ex["targets"][i]);
      CHECK(ex["tokens"][size_t(pos - 1)] < 16);  // answered after a key
      CHECK(ex["answers"][i] >= 0);
      CHECK(ex["answers"][i] < 16 + 64);  // 16 keys, 64 values
    }
  }
  Result e1 = run("eval --task recall --batches 1 --checkpoint " + ckpt.string() + " --predictions " + pred.string());
  REQUIRE(e1.code == 0);
  CHECK(nlohmann::json::parse(std::ifstream(pred))["sequences"] == 3);

  expect_error("eval --task recall --checkpoint " + ckpt.string(), "--predictions");
  expect_error("eval --task recall --checkpoint " + ckpt.string() + " --predictions " + pred.string() +
                   " --text x", "--text and --context are for eval --task lm");
  expect_error("eval --task tabs --checkpoint " + ckpt.string() + " --text x", "unknown task 'tabs'");
  expect_error("eval --checkpoint " + ckpt.string() + " --text x --context 8", "recall");
  expect_error("eval --task recall --checkpoint " + (d / "none.safetensors").string() + " --predictions " +
                   pred.string(), "none.safetensors");
  expect_error("eval --task recall --checkpoint " + ckpt.string() + " --predictions " +
                   (d / "no" / "dir" / "p.json").string(), "cannot write");
}

TEST_CASE("eval --task recall refuses an lm checkpoint") {
  fs::path d = temp_dir("eval_recall_lm");
  {
    std::ofstream f(d / "text.txt");
    for (int i = 0; i < 100; ++i) f << "To be, or not to be, that is the question:\n";
  }
  Result r = run("train --preset linear --task lm --context 16 --steps 2 --batch 2 --eval-every 2 --eval-batches 1"
                 " --extrap-batches 0 --quiet --data " + (d / "text.txt").string() + " --out " + d.string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  expect_error("eval --task recall --checkpoint " + (d / "cpu" / "lm_linear.safetensors").string() +
                   " --predictions " + (d / "p.json").string(), "was trained on lm");
}
