// The `lina` binary on input it cannot trust, end to end: every option out
// of its range, bad arguments, texts and checkpoints that are missing,
// empty, cut, garbled or hostile, and options read back from a checkpoint:
// one clear line and a non-zero exit each, nothing written. A short run's
// json and checkpoint, and a UTF-8 text's checkpoint loading back. The
// sanitizer suite runs this file (LINA_SANITIZED_TEST_FILES in CMakeLists.txt).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>
#include <vector>

#include "core/safetensors.h"
#include "tests/cli_run.h"

namespace fs = std::filesystem;
using nlohmann::json;

using namespace lina::test;

namespace {

// A tiny run (lm; recall): one held-out batch, one fresh, one per probed size.
const std::string kTinyLm = " --steps 4 --batch 2 --eval-every 2 --eval-batches 1 --quiet";
const std::string kTiny = kTinyLm + " --fresh-batches 1 --probe-batches 1";
// recall evaluates on one fresh batch and probes with one
const std::string kSmall = " --batch 2 --eval-batches 1 --quiet --fresh-batches 1 --probe-batches 1";

}  // namespace

// Every numeric flag of every subcommand: below its range (negative, and
// zero where zero means nothing) and absurdly above it, refused with one line
// naming the flag, before any work (nothing is written).
TEST_CASE("bad numbers: every numeric flag refuses values out of its range") {
  fs::path d = temp_dir("bad_numbers");
  const std::string train = "train --preset gdn --task recall --quiet --out " + d.string();
  const std::string lm = "train --preset gdn --task lm --quiet --out " + d.string();
  const std::string ckpt = " --checkpoint " + (d / "none.safetensors").string();
  struct Flag {
    std::string command, flag;
    std::vector<std::string> bad;
  };
  const std::vector<Flag> flags = {
      {train, "--steps", {"-1", "0", "1e12"}},
      {train, "--batch", {"-1", "0", "100000"}},
      {lm, "--context", {"-1", "0", "1000000"}},
      {train, "--pairs", {"-1", "0", "99999"}},
      {train, "--keys", {"-1", "0", "9999999"}},
      {train, "--scan-chunk", {"-1", "0", "99999"}},
      {train, "--lr", {"-0.1", "0", "1e9"}},
      {train, "--warmup", {"-1", "1e12"}},
      {train, "--weight-decay", {"-0.1", "1e9"}},  // 0: no decay
      {train, "--extend-to", {"-1", "0", "1e12"}},
      {train, "--checkpoint-every", {"-1", "0", "1e12"}},
      {train, "--stop-at", {"-1", "1e12"}},  // 0: save the initial weights
      {train, "--values", {"-1", "0", "9999999"}},
      {train, "--clip", {"-1", "1e9"}},         // 0: no clipping
      {train, "--beta2", {"-0.1", "0", "1", "2"}},
      {train, "--dropout", {"-0.1", "1", "2"}},
      {train, "--eval-every", {"-1", "0", "1e12"}},
      {train, "--eval-batches", {"-1", "0", "1e9"}},
      {train, "--fresh-batches", {"-1", "0", "1e9"}},
      {train, "--probe-batches", {"-1", "0", "1e9"}},
      {lm, "--extrap-batches", {"-1", "1e9"}},  // 0: no extrapolation
      {"eval --task lm --text x" + ckpt, "--context", {"-1", "0", "1000000"}},
      {"eval --task recall" + ckpt, "--batches", {"-1", "0", "1e9"}},
      {"sample" + ckpt, "--tokens", {"-1", "0", "1e9"}},
      {"sample" + ckpt, "--temperature", {"-1", "1e9"}},
      {"state-size", "--context", {"-1", "0", "1e15"}},
      {"bench --quick", "--steps", {"-1", "0", "1e9"}},
      {"bench --quick", "--warmup", {"-1", "1e9"}},
      {"bench --quick", "--infer-steps", {"-1", "0", "1e9"}},
      {"bench --quick", "--scan-chunk", {"-1", "99999"}},  // 0: the model's
      {"bench --quick", "--pairs", {"-1", "1e9"}},
      {"bench --quick", "--rounds", {"-1", "0", "1000"}},
      {"teach", "--layers", {"-1", "0", "1000"}},
      {"teach", "--batch", {"-1", "0", "1000"}},
      {"teach", "--context", {"-1", "0", "100000"}},
      {"teach", "--elements", {"-1", "0", "1e9"}},
      {"teach", "--step", {"-1", "0", "10"}},
      {"trace", "--context", {"-1", "0", "100000"}},
      {"graph --out " + (d / "g.dot").string(), "--batch", {"-1", "0", "1000"}},
  };
  for (const Flag& f : flags)
    for (const std::string& value : f.bad)
      expect_error(f.command + " " + f.flag + " " + value, f.flag + ": must be in ");
  for (const std::string& command : {train, "sample" + ckpt, std::string("teach")}) {
    expect_error(command + " --seed -1", "--seed: must not be negative, got -1");
    // 2^64 and above would saturate to 2^64 − 1: a different seed than asked for
    expect_error(command + " --seed 18446744073709551616", "--seed: must be at most 18446744073709551615");
    expect_error(command + " --seed 1e3", "--seed: must be a whole number in decimal, got 1e3");
  }
  CHECK(fs::is_empty(d));  // refused before any work: not even a folder written
}

TEST_CASE("bad input: one line, non-zero exit") {
  fs::path d = temp_dir("bad");
  std::string out = " --out " + d.string();
  expect_error("train --preset transformer --task recall" + out, "unknown preset 'transformer'");
  expect_error("train --preset gdn --task translate" + out, "unknown task 'translate'");
  expect_error("train --preset gdn --task recall --frobnicate 3" + out, "frobnicate");
  expect_error("train --preset gdn --task recall --steps 0" + out, "--steps: must be in 1..10000000, got 0");
  expect_error("train --preset gdn --task recall --batch -2" + out, "--batch: must be in 1..4096, got -2");
  expect_error("train --preset gdn --task lm --context 0" + out, "--context: must be in 1..65536, got 0");
  expect_error("train --preset gdn --task lm --data " + (d / "missing.txt").string() + out,
               "not found");
  std::ofstream(d / "empty.txt").close();
  expect_error("train --preset gdn --task lm --data " + (d / "empty.txt").string() + out, "empty");
  std::ofstream(d / "short.txt") << "To be, or not to be: that is the question.\n";
  expect_error("train --preset gdn --task lm --context 64 --data " + (d / "short.txt").string() + out,
               "context");
  expect_error("train --preset gdn --task recall --device tpu" + out, "unknown device 'tpu'");
  expect_error("train --preset gdn --task lm --pairs 8" + out, "--pairs, --keys and --values are for --task recall");
  expect_error("train --preset gdn --task lm --probe-batches 2" + out,
               "--fresh-batches and --probe-batches are for --task recall");
  expect_error("train --preset gdn --task recall --context 64" + out, "--context and --data are for --task lm");
  expect_error("train --preset gdn --task recall --data x.txt" + out, "--context and --data are for --task lm");
  // a path flag given as '' names nothing: refused before any work
  expect_error("train --preset gdn --task recall --out ''", "--out needs a path (it is empty)");
  expect_error("train --resume ''", "--resume needs a path (it is empty)");
  expect_error("train --preset gdn --task recall --save-batches ''" + out, "--save-batches needs a path (it is empty)");
  expect_error("train --preset gdn --task lm --data ''" + out, "--data needs a path (it is empty)");
  expect_error("bench --quick --json ''", "--json needs a path (it is empty)");
  expect_error("graph --out ''", "--out needs a path (it is empty)");
  expect_error("eval --checkpoint '' --text x", "--checkpoint needs a path (it is empty)");
  expect_error("eval --task recall --checkpoint x --predictions ''", "--predictions needs a path (it is empty)");
  expect_error("sample --checkpoint ''", "--checkpoint needs a path (it is empty)");
  expect_error("train --preset gdn, --task recall" + out, "preset 'gdn,' ends with a comma");
  expect_error("train --preset gdn --task lm --data /dev/zero" + out, "'/dev/zero' is not a regular file");
  expect_error("train --preset gdn --task recall --scan-form parallel" + out, "unknown --scan-form 'parallel'");
  expect_error("train --preset attn --task recall --attention flash" + out, "unknown --attention 'flash'");
  expect_error("train --preset gdn --task recall --conv bogus" + out,
               "unknown --conv 'bogus': use fused or composed");
  expect_error("train --preset gdn --task recall --pairs 40 --keys 30" + out, "--keys must be at least --pairs (40)");
  expect_error("train --task recall" + out, "--preset is required (or --resume CKPT)");
  expect_error("train --preset gdn" + out, "--task is required (or --resume CKPT)");
  expect_error("train --preset gdn --task recall --extend-to 9" + out, "--extend-to needs --resume");
  expect_error("state-size --context 0", "--context: must be in 1..1e+12, got 0");
  expect_error("eval --checkpoint " + (d / "none.safetensors").string() + " --text x --context 8",
               "none.safetensors");
}

TEST_CASE("a short run writes json and checkpoint, and bad checkpoints are refused") {
  fs::path d = temp_dir("run");
  Result r = run("train --preset gdn --task recall --out " + d.string() + kTiny);
  INFO(r.output);
  REQUIRE(r.code == 0);
  fs::path json_path = d / "cpu" / "recall_gdn.json", ckpt = d / "cpu" / "recall_gdn.safetensors";
  REQUIRE(fs::exists(json_path));
  REQUIRE(fs::exists(ckpt));
  nlohmann::json j = nlohmann::json::parse(std::ifstream(json_path));
  for (const char* key : {"config", "git_commit", "kv_per_token", "state_const", "conv_cache", "params",
                          "loss_curve", "eval", "final", "alpha", "wall_time_s", "tokens_per_s"})
    CHECK_MESSAGE(j.contains(key), "json lacks " << key);
  CHECK(j["state_const"] == 16384);
  CHECK(j["loss_curve"].size() == 4);
  CHECK(j["final"].contains("val_accuracy"));
  {  // the commit is the one built (third_party/GitCommit.cmake runs at every build), not the one configured
    std::string head = run_command("git -C '" LINA_SOURCE_DIR "' rev-parse --short=12 HEAD 2>/dev/null").output;
    while (!head.empty() && (head.back() == '\n' || head.back() == ' ')) head.pop_back();
    if (head.empty()) MESSAGE("not a git checkout: git_commit is \"unknown\"");
    CHECK(j["git_commit"] == (head.empty() ? std::string("unknown") : head));
  }
  {  // the machine it ran on (experiments/machine.h)
    const nlohmann::json& m = j["machine"];
    CHECK(!m["cpu"].get<std::string>().empty());
    const std::string simd = m["simd"];
    CHECK((simd == "avx512" || simd == "avx2" || simd == "avx" || simd == "sse2" || simd == "none"));
    CHECK(m["threads"].get<int>() >= 1);
    const std::string gemm = m["gemm"];
    CHECK((gemm == "Eigen" || gemm.rfind("OpenBLAS (", 0) == 0));
  }

  // a checkpoint of another preset
  expect_error("train --preset attn --task recall --out " + d.string() + " --resume " + ckpt.string() + kTiny,
               "gdn");
  // truncated and garbled checkpoints; the good one stays untouched
  auto size = fs::file_size(ckpt);
  fs::copy_file(ckpt, d / "cut.safetensors");
  fs::resize_file(d / "cut.safetensors", size / 2);
  expect_error("train --preset gdn --task recall --out " + (d / "o").string() + " --resume " +
                   (d / "cut.safetensors").string() + kTiny, "cut.safetensors");
  {
    std::ofstream g(d / "garbled.safetensors", std::ios::binary);
    g << "\x10\x00\x00\x00\x00\x00\x00\x00{not json at all";
  }
  expect_error("train --preset gdn --task recall --out " + (d / "o").string() + " --resume " +
                   (d / "garbled.safetensors").string() + kTiny, "garbled.safetensors");
  CHECK(fs::file_size(ckpt) == size);
}

// A checkpoint keeps its vocabulary as bytes 0..255: a text in UTF-8 (bytes
// above 0x7f) trains, and its checkpoint loads for eval, sample and resume.
TEST_CASE("a text with bytes above 0x7f: its checkpoint loads for eval, sample and resume") {
  const std::string kCedillaC = "\xc3\x87";  // Ç
  fs::path d = temp_dir("utf8");
  {
    std::ofstream f(d / "text.txt", std::ios::binary);
    // "Ça va, café? “quoted” — yes", in UTF-8
    for (int i = 0; i < 200; ++i) f << kCedillaC << "a va, caf\xc3\xa9? \xe2\x80\x9c" "quoted\xe2\x80\x9d \xe2\x80\x94 yes\n";
  }
  const std::string text = (d / "text.txt").string(), ckpt = (d / "cpu" / "lm_gdn.safetensors").string();
  Result r = run("train --preset gdn --task lm --context 16 --extrap-batches 0 --data " + text + " --stop-at 2 --out " +
                 d.string() + kTinyLm);
  INFO(r.output);
  REQUIRE(r.code == 0);
  Result e = run("eval --checkpoint " + ckpt + " --text " + text + " --context 16");
  INFO(e.output);
  CHECK(e.code == 0);
  Result s = run("sample --checkpoint " + ckpt + " --prompt \"" + kCedillaC + "a\" --tokens 5 --seed 1");
  INFO(s.output);
  CHECK(s.code == 0);
  CHECK(s.output.rfind(kCedillaC + "a", 0) == 0);
  Result resumed = run("train --resume " + ckpt + " --extrap-batches 0 --quiet --out " + d.string());
  INFO(resumed.output);
  CHECK(resumed.code == 0);
}

TEST_CASE("a checkpoint's raw bytes never reach the terminal unescaped") {
  fs::path d = temp_dir("untrusted");
  // a tensor name and a dtype full of terminal escapes and invalid UTF-8
  std::string evil = "\x1b[2J\x1b]0;owned\x07\xff\xfe\xc3(" + std::string(500, 'A');
  std::string header = "{\"" + evil + "\":{\"dtype\":\"\xc0\xaf\",\"shape\":[1],\"data_offsets\":[0,4]}}";
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[size_t(i)] = char((header.size() >> (8 * i)) & 0xff);
  bytes += header + std::string(4, '\0');
  std::ofstream(d / "evil.safetensors", std::ios::binary) << bytes;
  for (std::string cmd : {"eval --text x --checkpoint ", "sample --checkpoint ", "train --resume "}) {
    Result r = expect_error(cmd + (d / "evil.safetensors").string(), "evil.safetensors");
    for (char c : r.output.substr(0, r.output.size() - 1))
      CHECK_MESSAGE(uint8_t(c) >= 0x20, "control byte " << int(uint8_t(c)) << " in: " << r.output);
    CHECK(r.output.find('\xff') == std::string::npos);
    CHECK(r.output.size() < 400);
  }
}

// A checkpoint's options pass the command line's ranges on --resume: one
// edited to ask for a batch of 99,999 is refused in one line.
TEST_CASE("options read from a checkpoint pass the command line's ranges") {
  fs::path d = temp_dir("checkpoint_ranges");
  REQUIRE(run("train --preset linear --task recall --steps 2 --stop-at 1 --out " + d.string() + kSmall).code == 0);
  lina::SafetensorsFile f = lina::load_safetensors((d / "cpu" / "recall_linear.safetensors").string());
  for (const auto& [key, value, message] :
       {std::tuple<std::string, json, std::string>{"batch", 99999, "option batch (--batch) must be in 1..4096, got 99999"},
        {"eval_every", 0, "option eval_every (--eval-every) must be in 1..10000000, got 0"},
        {"dropout", 5, "option dropout (--dropout) must be in 0..0.99, got 5"}}) {
    std::map<std::string, std::string> metadata = f.metadata;
    json options = json::parse(metadata.at("options"));
    options[key] = value;
    metadata["options"] = options.dump();
    const fs::path edited = d / ("edited_" + key + ".safetensors");
    lina::save_safetensors(edited.string(), f.tensors, metadata);
    expect_error("train --resume " + edited.string() + " --quiet --out " + d.string(), message);
  }
}
