// The teaching aids: names on the model's tensors, the trace of one step
// (forward then backward, in reverse), `lina graph` and `lina teach`.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "autograd/functions.h"
#include "cli_run.h"
#include "experiments/teach.h"
#include "models/model.h"
#include "tests/temp_dir.h"

namespace lina {
namespace {

using test::run;

// One line of a trace: "forward  12  matmul  blocks.0.mix.q_proj  float32[2, 8, 128]  |out| 1.2e+00".
struct TraceLine {
  std::string phase;
  int number = 0;
  std::string op, name, type;
  double norm = 0;
};

std::vector<TraceLine> parse_trace(const std::string& output) {
  static const std::regex line(
      R"(^(forward|backward)\s+(\d+)\s+(\S+)\s+(\S+)\s+(\w+\[[^\]]*\])\s+\|(out|grad)\|\s+(\S+)$)");
  std::vector<TraceLine> lines;
  std::istringstream in(output);
  for (std::string s; std::getline(in, s);) {
    std::smatch m;
    if (!std::regex_match(s, m, line)) continue;
    lines.push_back({m[1], std::stoi(m[2]), m[3], m[4], m[5], std::stod(m[7])});
  }
  return lines;
}

// Every op the forward recorded appears once in the backward, in reverse
// order, with the gradient's shape equal to the output's.
void check_reverse(const std::vector<TraceLine>& lines) {
  std::vector<TraceLine> forward, backward;
  for (const TraceLine& l : lines) (l.phase == "forward" ? forward : backward).push_back(l);
  REQUIRE(forward.size() > 10);
  REQUIRE(backward.size() == forward.size());
  for (size_t i = 0; i < forward.size(); ++i) {
    const TraceLine& f = forward[i];
    const TraceLine& b = backward[backward.size() - 1 - i];
    INFO("forward op " << f.number << " " << f.op << " " << f.name << " " << f.type);
    CHECK(f.number == int(i + 1));
    CHECK(b.number == f.number);
    CHECK(b.op == f.op);
    CHECK(b.name == f.name);
    CHECK(b.type == f.type);
    CHECK(std::isfinite(f.norm));
    CHECK(std::isfinite(b.norm));
  }
  CHECK(forward.back().name == "loss");
  CHECK(backward.front().norm == doctest::Approx(1.0));  // dL/dL
}

std::set<std::string> names_in(const std::vector<TraceLine>& lines) {
  std::set<std::string> names;
  for (const TraceLine& l : lines) names.insert(l.name);
  return names;
}

TEST_CASE("names: interned once, set on the op that made a tensor, nothing without a graph") {
  const char* a = intern_name("blocks.0.mix.q");
  CHECK(a == intern_name(std::string("blocks.0.") + "mix.q"));  // one copy per name
  CHECK(std::string(a) == "blocks.0.mix.q");

  Var w(Tensor::ones({2, 3}), /*requires_grad=*/true, "w");
  Var y = named(mul_scalar(w, 2.0), a);
  CHECK(std::string(y.display_name()) == "blocks.0.mix.q");
  CHECK(std::string(w.display_name()) == "w");
  {
    NoGradGuard no_graph;
    Var z = named(mul_scalar(w, 2.0), a);  // no op was recorded: nothing to name
    CHECK(std::string(z.display_name()).empty());
  }
}

// Every name in the graph behind `root`.
std::set<std::string> graph_names(const Var& root) {
  std::set<std::string> names;
  std::vector<VarImpl*> todo{root.impl()};
  std::set<VarImpl*> seen;
  while (!todo.empty()) {
    VarImpl* v = todo.back();
    todo.pop_back();
    if (!seen.insert(v).second) continue;
    names.insert(display_name(*v));
    if (v->grad_fn)
      for (const Var& in : v->grad_fn->inputs) todo.push_back(in.impl());
  }
  return names;
}

TEST_CASE("names: the model names its intermediates after spec 1.4's prefixes") {
  ModelConfig config = make_config("gdn,attn", 65);
  LanguageModel model(config, 7);
  std::set<std::string> names = graph_names(model.forward(Tensor::zeros({1, 4}, DType::I32)));
  for (const char* expected :
       {"tok", "blocks.0.n1", "blocks.0.mix.qkv", "blocks.0.mix.beta_log_alpha",
        "blocks.0.mix.o", "blocks.0.mix.gated", "blocks.0.mix",
        "blocks.1.mix.q", "blocks.1.mix.o", "blocks.1.ffn", "blocks.0.out", "norm_f",
        "logits", "lm_head.weight"}) {
    INFO(std::string(expected));
    CHECK(names.count(expected) == 1);
  }
  // norm_f and the last residual sum are one op whose sum nothing reads
  CHECK(names.count("blocks.1.out") == 0);
  // The composed conv runs the recurrent mixer op by op: q, k, v, β and log α
  // apart, o_norm before the output gate.
  ModelConfig op_by_op = config;
  op_by_op.conv = Fusion::Composed;
  LanguageModel split(op_by_op, 7);
  names = graph_names(split.forward(Tensor::zeros({1, 4}, DType::I32)));
  for (const char* expected : {"blocks.0.mix.q", "blocks.0.mix.k", "blocks.0.mix.v", "blocks.0.mix.beta",
                               "blocks.0.mix.log_alpha", "blocks.0.mix.b_proj.bias", "blocks.0.mix.o_norm"}) {
    INFO(std::string(expected));
    CHECK(names.count(expected) == 1);
  }
  // Attention op by op names its scores and weights too.
  config.attention = Fusion::Composed;
  LanguageModel composed(config, 7);
  names = graph_names(composed.forward(Tensor::zeros({1, 4}, DType::I32)));
  CHECK(names.count("blocks.1.mix.scores") == 1);
  CHECK(names.count("blocks.1.mix.weights") == 1);
}

TEST_CASE("lina trace: every op of the forward once in the backward, in reverse, same shapes") {
  // Both mixers, both scan forms.
  for (const char* args : {"--preset gdn,attn --layers 2", "--preset delta --scan-form chunked",
                           "--preset linear --context 5", "--preset gla --scan-form chunked",
                           "--preset retnet,mamba2 --layers 2"}) {
    test::Result r = run(std::string("trace ") + args);
    INFO("lina trace " << args << "\n" << r.output);
    REQUIRE(r.code == 0);
    std::vector<TraceLine> lines = parse_trace(r.output);
    check_reverse(lines);
    CHECK(names_in(lines).count("blocks.0.mix.o") == 1);
  }
  test::Result r = run("trace --preset gdn,attn --layers 2");
  std::set<std::string> names = names_in(parse_trace(r.output));
  for (const char* expected : {"tok", "blocks.0.mix.qkv", "blocks.0.mix.beta_log_alpha",
                               "blocks.1.mix.q", "blocks.1.mix.o", "norm_f", "logits", "loss"}) {
    INFO(std::string(expected));
    CHECK(names.count(expected) == 1);
  }
  // The scan op: one step of a sequential gdn layer keeps S_0 … S_{T−1}.
  CHECK(r.output.find("scan            blocks.0.mix.o") != std::string::npos);
}

TEST_CASE("LINA_TRACE=1 and lina train --trace trace the first update only") {
  std::filesystem::path dir = test::temp_dir("trace");
  const std::string args = "train --preset gdn --task recall --steps 2 --batch 2 --pairs 4 --keys 8 "
                           "--eval-batches 1 --fresh-batches 1 --probe-batches 1 --quiet --out " + dir.string();
  for (const std::string& env : {std::string("LINA_TRACE=1"), std::string()}) {
    test::Result r = run(args + (env.empty() ? " --trace" : ""), env);
    INFO(r.output);
    REQUIRE(r.code == 0);
    std::vector<TraceLine> lines = parse_trace(r.output);
    check_reverse(lines);  // one update: each op once forward, once backward
    CHECK(names_in(lines).count("blocks.3.mix.o") == 1);
  }
  test::Result quiet = run(args);
  CHECK(parse_trace(quiet.output).empty());
  std::filesystem::remove_all(dir);
}

TEST_CASE("lina graph writes the step's graph as dot: names, saved tensors, gradient norms") {
  std::filesystem::path dir = test::temp_dir("graph");
  const std::string dot = (dir / "g.dot").string();
  test::Result r = run("graph --preset gdn --layers 1 --context 8 --out " + dot);
  INFO(r.output);
  REQUIRE(r.code == 0);
  std::ifstream f(dot);
  std::stringstream text;
  text << f.rdbuf();
  const std::string g = text.str();
  CHECK(g.rfind("digraph lina {", 0) == 0);
  CHECK(g.find("label=\"blocks.0.mix.o\\nfloat32[2, 8, 4, 32]\"") != std::string::npos);
  // The sequential scan saved S_0 … S_7 of each (batch, head): [B, H, T, d, d].
  CHECK(g.find("saved states float32[2, 4, 8, 32, 32]") != std::string::npos);
  CHECK(g.find("saved rstd float32[16]") != std::string::npos);
  std::smatch m;
  // β's and α's biases, stacked (a view of both: their product is one op)
  CHECK(std::regex_search(
      g, m, std::regex(R"(\[blocks\.0\.mix\.b_proj\.bias; blocks\.0\.mix\.a_proj\.bias\]\\nfloat32\[8\]\\n\|grad\| = [0-9.e+-]+)")));
  CHECK(test::expect_error("graph --preset nope --out " + dot, "preset").code != 0);
  CHECK(test::expect_error("graph --layers 5 --out " + dot, "layers").code != 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("lina graph renders SVG with graphviz") {
  if (std::system("command -v dot >/dev/null 2>&1") != 0) {
    MESSAGE("SKIPPED: graphviz's dot is not installed (apt-get install graphviz)");
    return;
  }
  std::filesystem::path dir = test::temp_dir("graph_svg");
  test::Result r = run("graph --preset hybrid --layers 4 --context 4 --out " + (dir / "g.dot").string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK(r.output.find("g.svg") != std::string::npos);
  std::ifstream f(dir / "g.svg");
  std::stringstream svg;
  svg << f.rdbuf();
  CHECK(svg.str().find("<svg") != std::string::npos);
  CHECK(svg.str().find("blocks.3.mix.o") != std::string::npos);
  CHECK(svg.str().find("saved lse") != std::string::npos);  // the fused attention op keeps each row's log-sum-exp
  std::filesystem::remove_all(dir);
}

// A stand-in for graphviz's `dot` in `folder`, first on the PATH given by
// fake_dot_path(): it writes `svg` to its -o file after checking that its
// input is a lina graph, then prints `lines_of_errors` lines to stderr and
// exits `code` (a real dot that fails prints dozens of lines and may leave
// half an SVG behind).
std::string fake_dot(const test::TempDir& folder, const std::string& svg, int lines_of_errors, int code) {
  const std::string script = "#!/bin/sh\n"
                             "head -c 14 \"$2\" | grep -q '^digraph lina {' || { echo 'not a lina graph' >&2; exit 3; }\n"
                             "echo '" + svg + "' > \"$4\"\n"
                             "i=0; while [ $i -lt " + std::to_string(lines_of_errors) + " ]; do\n"
                             "  echo \"Error: line $i: syntax error\" >&2; i=$((i+1)); done\n"
                             "exit " + std::to_string(code) + "\n";
  const std::string path = folder.write("dot", script);
  ::chmod(path.c_str(), 0755);
  return "PATH=" + folder.path.string() + ":$PATH";
}

std::string read_all(const std::string& path) {
  std::ifstream f(path);
  std::stringstream text;
  text << f.rdbuf();
  return text.str();
}

TEST_CASE("lina graph: when dot fails, one line, and the previous SVG is as it was") {
  test::TempDir bin("lina_fake_dot"), dir("lina_graph_fail");
  const std::string path = fake_dot(bin, "<svg>half</svg>", 29, 1);
  for (const std::string out : {"g.dot", "g.svg"}) {
    std::filesystem::remove(dir.file("g.dot"));
    dir.write("g.svg", "the previous svg\n");
    INFO("--out " << out);
    test::Result r = test::expect_error("graph --out " + dir.file(out), "dot could not render", path);
    CHECK(r.output.find("it exited 1: Error: line 0: syntax error") != std::string::npos);
    CHECK(read_all(dir.file("g.svg")) == "the previous svg\n");
    // nothing left behind: the dot text beside the svg only when --out names it
    CHECK(dir.names() == (out == "g.dot" ? std::vector<std::string>{"g.dot", "g.svg"}
                                         : std::vector<std::string>{"g.svg"}));
  }
}

TEST_CASE("lina graph --out g.svg: the SVG replaces the old file whole, the dot text is only dot's input") {
  test::TempDir bin("lina_fake_dot"), dir("lina_graph_svg");
  const std::string path = fake_dot(bin, "<svg>new</svg>", 0, 0);
  dir.write("g.svg", "the previous svg\n");
  test::Result r = run("graph --out " + dir.file("g.svg"), path);
  INFO(r.output);
  CHECK(r.code == 0);
  CHECK(r.output == "wrote " + dir.file("g.svg") + "\n");
  CHECK(read_all(dir.file("g.svg")) == "<svg>new</svg>\n");
  CHECK(dir.names() == std::vector<std::string>{"g.svg"});
  // without dot there is no SVG to write: one line, the old file kept
  dir.write("g.svg", "the previous svg\n");
  test::expect_error("graph --out " + dir.file("g.svg"), "needs graphviz's dot", "PATH=" + bin.file("empty"));
  CHECK(read_all(dir.file("g.svg")) == "the previous svg\n");
}

TEST_CASE("lina teach: a NaN or an infinity on either side never agrees") {
  CHECK(gradient_relative_error(2.0, 2.0) == 0.0);
  CHECK(gradient_relative_error(0.0, 0.0) == 0.0);
  CHECK(gradient_relative_error(1.0, 0.5) == doctest::Approx(0.5));
  const double nan = std::nan(""), inf = INFINITY;
  for (double bad : {nan, inf, -inf}) {
    INFO("planted " << bad);
    CHECK(gradient_relative_error(bad, 1.0) == inf);
    CHECK(gradient_relative_error(1.0, bad) == inf);
    CHECK(gradient_relative_error(bad, bad) == inf);
    CHECK(gradient_relative_error(bad, 0.0) == inf);  // was 0: max(|NaN|, 0) > 0 is false
    // the largest error of several, wherever the NaN is (std::max(worst, NaN) would keep worst)
    for (size_t at = 0; at < 3; ++at) {
      std::vector<double> backward{1.0, 2.0, 3.0}, numeric{1.0, 2.0, 3.0};
      backward[at] = bad;
      CHECK(largest_relative_error(backward, numeric) == inf);
      CHECK(largest_relative_error(numeric, backward) == inf);
      CHECK_FALSE(largest_relative_error(backward, numeric) <= kTeachPassMark);
    }
  }
  CHECK(largest_relative_error({1.0, 2.0}, {1.0, 2.0}) == 0.0);
}

// "largest relative error 2.47e-08: they agree (pass mark 1e-05)"
double largest_error(const std::string& output) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex(R"(largest relative error (\S+):)"))) return 1e9;
  return std::stod(m[1]);
}

TEST_CASE("lina teach: the hand-written gradient agrees with the finite difference") {
  for (const char* args :
       {"", "--scan-form chunked", "--param blocks.0.mix.a_proj.weight --elements 4",
        "--preset delta --param blocks.0.mix.conv.weight --elements 4",
        "--preset attn --param blocks.0.mix.k_proj.weight --elements 4",
        "--preset gla --param blocks.0.mix.a_proj.bias --elements 4",
        "--preset gdn,gdn --layers 2 --param blocks.0.mix.o_norm.weight --elements 4"}) {
    test::Result r = run(std::string("teach ") + args);
    INFO("lina teach " << args << "\n" << r.output);
    CHECK(r.code == 0);
    CHECK(r.output.find("they agree") != std::string::npos);
    CHECK(largest_error(r.output) < 1e-5);
  }
  test::Result r = run("teach");
  CHECK(r.output.find("parameter blocks.0.mix.b_proj.bias [4]") != std::string::npos);
  CHECK(test::count_lines(r.output) == 4 + 4 + 1);  // header, 4 elements, verdict
  test::expect_error("teach --param blocks.0.mix.nope", "unknown --param");
  test::expect_error("teach --context 0", "--context");
}

}  // namespace
}  // namespace lina
