// `lina bench`: the json a quick run writes, and bad input. No timed
// assertions: the machine's speed is what the command measures.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/cli_run.h"

using lina::test::expect_error;
using lina::test::run;
using lina::test::temp_dir;
using nlohmann::json;

namespace {

// Model FLOPs of one training step at B×T from the numbers of docs/spec.md §1:
// n_embd 128, 4 heads of 32, 2 KV heads, MLP 512, vocab 65, 4 layers.
double spec_flops(bool attention, double B, double T) {
  const double C = 128, H = 4, d = 32, kv = 2 * 32, mlp = 344, vocab = 65;
  double layer = attention ? C * C + 2 * C * kv + C * C  // q_proj, k_proj, v_proj, o_proj
                           : 5 * C * C + 2 * C * H;      // q, k, v, g, o_proj, b_proj, a_proj (gdn)
  layer += 3 * C * mlp;                                  // SwiGLU: gate, up, down
  double weights = 4 * layer + C * vocab;  // + the head; the embedding is not a product
  double per_token = 6 * weights + 4 * (attention ? 6 * H * d * T : 12 * H * d * d);
  return per_token * B * T;
}

}  // namespace

TEST_CASE("bench --quick: json keys, FLOPs per step, GEMM rate, profile") {
  auto d = temp_dir("bench");
  std::string out = (d / "bench.json").string();
  auto r = run("bench --quick --presets attn,gdn --steps 1 --warmup 0 --shapes 64x64 --contexts 64,128 "
               "--infer-steps 1 --rounds 2 --profile --pairs 3 --json " + out);
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK(r.output.find("ms/step") != std::string::npos);
  std::ifstream f(out);
  REQUIRE(bool(f));
  json j = json::parse(f);
  for (const char* key : {"schema", "gemm", "train", "inference", "ratios", "steps", "wall_seconds", "machine"})
    CHECK_MESSAGE(j.contains(key), key);
  CHECK(j["machine"]["gemm"] == j["gemm"]["lina_path"]);  // one name for the CPU's products
  CHECK(double(j["gemm"]["lina_gflops"]) > 0);
  CHECK(j["gemm"].contains("openblas"));
  CHECK(double(j["memory"]["gbps"]) > 0);  // the rate the profile's limits read bytes against
  CHECK(double(j["memory"]["bytes"]) == 3.0 * 64 * 1048576);
  if (j["gemm"]["openblas"] == "installed")  // the two paths timed in pairs (a timing: no bound on it)
    CHECK(std::isfinite(double(j["gemm"]["lina_over_openblas"])));
  else
    CHECK(j["gemm"]["lina_over_openblas"].is_null());
  REQUIRE(j["train"].size() == 2);
  for (const json& t : j["train"]) {
    std::string preset = t["preset"];
    INFO(preset);
    CHECK(t["shape"] == "64x64");
    CHECK(double(t["ms_per_step"]) > 0);
    CHECK(double(t["tokens_per_s"]) > 0);
    CHECK(double(t["peak_rss_mb"]) > 0);
    CHECK(double(t["model_gflops"]) > 0);
    CHECK(double(t["fraction_of_gemm"]) > 0);
    CHECK(double(t["model_flops_per_step"]) == doctest::Approx(spec_flops(preset == "attn", 64, 64)).epsilon(1e-12));
    CHECK(!t["ratio_to_attn"].is_null());
    // two rounds: the row is the lower of the two (the lower middle of an even count)
    REQUIRE(t["ms_per_step_rounds"].size() == 2);
    CHECK(double(t["ms_per_step"]) == std::min(double(t["ms_per_step_rounds"][0]), double(t["ms_per_step_rounds"][1])));
    const json& entries = t["profile"]["entries"];
    REQUIRE(!entries.empty());
    bool has_matmul = false, has_scan = false, has_backward = false;
    for (const json& e : entries) {
      if (e["op"] == "matmul") {  // the dispatch::gemm entry point, a row per product shape
        has_matmul = true;
        const std::string detail = e["detail"];
        CHECK(detail.find('x') != std::string::npos);
        long long M = 0, N = 0, K = 0;
        if (detail.find("batch") == std::string::npos &&
            std::sscanf(detail.c_str(), "%lldx%lldx%lld", &M, &N, &K) == 3)  // 2·M·N·K FLOPs a call
          CHECK(double(e["flops"]) == doctest::Approx(2.0 * double(M * N * K) * int(e["calls"])));
      }
      if (e["op"] == "rms_norm" || e["op"] == "scan" || e["op"] == "attention")  // work stated
        CHECK(double(e["bytes"]) > 0);
      has_scan |= e["op"] == "scan";
      has_backward |= e["phase"] == "backward";
      CHECK(int(e["calls"]) > 0);
    }
    CHECK(has_matmul);
    CHECK(has_scan == (preset == "gdn"));
    CHECK(has_backward);
    CHECK(double(t["allocs_per_step"]) > 0);
  }
  CHECK(j["ratios"]["gdn_over_attn"].contains("64x64"));
  CHECK(j["rounds"] == 2);
  // --pairs: gdn against attn in one process, three pairs of steps
  REQUIRE(j["paired"].size() == 1);
  const json& p = j["paired"][0];
  CHECK(p["preset"] == "gdn");
  REQUIRE(p["ratios"].size() == 3);
  for (size_t i = 0; i < 3; ++i)
    CHECK(double(p["ratios"][i]) == doctest::Approx(double(p["ms_preset"][i]) / double(p["ms_attn"][i])));
  std::vector<double> sorted = p["ratios"];
  std::sort(sorted.begin(), sorted.end());
  CHECK(double(p["ratio_median"]) == sorted[1]);
  CHECK(j["ratios"]["gdn_over_attn_paired"]["64x64"] == p["ratio_median"]);
  CHECK(r.output.find("pairs of alternating steps") != std::string::npos);
  CHECK(r.output.find("the most time over a limit") != std::string::npos);  // the profile's worst ops
  // Inference: memory per sequence as docs/spec.md §1.3 counts it.
  REQUIRE(j["inference"].size() == 4);
  for (const json& i : j["inference"]) {
    CHECK(double(i["ms_per_token"]) > 0);
    long long ctx = i["context"];
    if (i["preset"] == "attn") CHECK(i["kv_floats"].get<long long>() == 2 * 2 * 32 * 4 * ctx);
    else CHECK(i["state_floats"].get<long long>() == 4 * 32 * 32 * 4);
  }
  std::filesystem::remove_all(d);
}

TEST_CASE("bench --products: every product of the profiled step timed on lina's path and OpenBLAS's threads") {
  auto d = temp_dir("bench-products");
  std::string out = (d / "bench.json").string();
  auto r = run("bench --quick --presets gdn --steps 1 --warmup 0 --shapes 8x16 --contexts 16 --infer-steps 1 "
               "--products --json " + out);
  INFO(r.output);
  REQUIRE(r.code == 0);
  std::ifstream f(out);
  json j = json::parse(f);
  CHECK(j["profile"] == true);  // --products implies --profile: its products are the profile's
  const json& t = j["train"][0];
  std::vector<std::string> profiled;
  double lina_step = 0;
  const json& products = j["products"]["products"];
  for (const json& e : t["profile"]["entries"])
    if (e["op"] == "matmul") profiled.push_back(e["detail"]);
  REQUIRE(!profiled.empty());
  if (j["gemm"]["openblas"] != "installed") {
    CHECK(products.empty());
    CHECK(r.output.find("products: not compared") != std::string::npos);
    return;
  }
  REQUIRE(products.size() == profiled.size());  // each shape once, in the profile's order
  for (size_t i = 0; i < products.size(); ++i) {
    CHECK(products[i]["shape"] == profiled[i]);
    CHECK(double(products[i]["lina_ms"]) > 0);
    CHECK(double(products[i]["openblas_ms"]) > 0);
    CHECK(std::isfinite(double(products[i]["lina_over_openblas"])));
  }
  for (const json& e : t["profile"]["entries"])
    if (e["op"] == "matmul")
      for (const json& p : products)
        if (p["shape"] == e["detail"]) lina_step += double(e["calls"]) * double(p["lina_ms"]);  // one step
  const json& step = j["products"]["per_step"][0];
  CHECK(step["preset"] == "gdn");
  CHECK(double(step["lina_ms"]) == doctest::Approx(lina_step));
  CHECK(double(step["faster_ms"]) <= std::min(double(step["lina_ms"]), double(step["openblas_ms"])) + 1e-9);
  CHECK(r.output.find("OpenBLAS/lina") != std::string::npos);
  std::filesystem::remove_all(d);
}

TEST_CASE("bench bad input: one line, non-zero exit") {
  expect_error("bench --presets attn,transformer", "unknown preset 'transformer'");
  expect_error("bench --steps 0", "--steps: must be in 1..10000, got 0");
  expect_error("bench --rounds 0", "--rounds: must be in 1..100, got 0");
  expect_error("bench --scan-chunk -2", "--scan-chunk: must be in 0..4096, got -2");
  expect_error("bench --pairs -1", "--pairs: must be in 0..10000, got -1");
  expect_error("bench --presets gdn --pairs 2", "--pairs times every preset against attn: add attn to --presets");
  expect_error("bench --shapes 64by64", "--shapes");
  expect_error("bench --contexts 64,-3", "--contexts");
  expect_error("bench --frobnicate", "frobnicate");
  expect_error("bench-worker --presets gdn --job dance --out /dev/null", "unknown job 'dance'");
}
