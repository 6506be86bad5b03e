// The model of docs/spec.md §1: parameter names and shapes, a float64 gradient
// check of every parameter of every preset (reported per named tensor),
// step-by-step inference equal to the parallel forward, and training that
// lowers the loss.
#include <algorithm>
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <optional>

#include "dispatch/dispatch.h"
#include "dispatch/layout.h"
#include "models/model.h"
#include "models/optim.h"
#include "tests/gradcheck.h"

using namespace lina;
using lina::test::random_ids;

namespace {

// The spec's model at toy sizes, so float64 checks stay fast.
ModelConfig tiny_config(const std::string& preset, int vocab = 11) {
  ModelConfig c = make_config(preset, vocab);
  c.n_embd = 16;
  c.n_head = 2;
  c.head_size = 8;
  c.n_kv_head = 1;
  c.mlp_hidden = 32;
  c.scan_chunk = 4;  // T = 7 below: two chunks, the second one partial
  return c;
}

// Every preset, the survey's rules, a mixed pattern, and linear attention's
// other two feature maps.
struct Variant {
  std::string preset;
  FeatureMap feature_map = FeatureMap::Elu1;
};
const Variant kVariants[] = {{"attn"},   {"linear"},           {"delta"},
                             {"gdn"},    {"hybrid"},           {"retnet"},
                             {"mamba2"}, {"gla"},              {"gla,gla,gla,attn"},
                             {"linear", FeatureMap::Relu},     {"linear", FeatureMap::Sigmoid}};
std::string variant_name(const Variant& v) {
  return v.preset + (v.feature_map == FeatureMap::Elu1 ? "" : std::string("-") +
                                                               feature_map_name(v.feature_map));
}
ModelConfig tiny_config(const Variant& v, int vocab = 11) {
  ModelConfig c = tiny_config(v.preset, vocab);
  c.feature_map = v.feature_map;
  return c;
}

double loss_of(LanguageModel& m, const Tensor& x, const Tensor& y) {
  NoGradGuard no_grad;
  return cross_entropy(m.forward(x), y).item();
}

// Randomise every parameter a little so no gradient is trivially zero
// (e.g. the o_norm and norm weights start at exactly 1).
void perturb_all(LanguageModel& m, uint64_t seed) {
  Rng rng(seed);
  Tensor noise = Tensor::randn({m.params().count()}, rng, 0.1, 0.0, DType::F64);
  Tensor data = m.params().data();
  dispatch::add_inplace(data, noise);
}

}  // namespace

TEST_CASE("parameter names and shapes are the course's (spec 1.4)") {
  LanguageModel gdn(make_config("gdn", 65), 1);
  const ParameterStore& p = gdn.params();
  CHECK(p.info("tok.weight").var.shape() == Shape{65, 128});
  CHECK(p.info("blocks.0.mix.k_proj.weight").var.shape() == Shape{128, 128});
  CHECK(p.info("blocks.3.mix.conv.weight").var.shape() == Shape{384, 1, 4});
  CHECK(p.info("blocks.1.mix.a_proj.bias").var.shape() == Shape{4});
  CHECK(p.info("blocks.2.mix.o_norm.weight").var.shape() == Shape{32});
  CHECK(p.info("blocks.2.mix.g_proj.weight").var.shape() == Shape{128, 128});
  CHECK(p.info("blocks.0.ffn.gate.weight").var.shape() == Shape{344, 128});
  CHECK(p.info("blocks.0.ffn.up.weight").var.shape() == Shape{344, 128});
  CHECK(p.info("blocks.0.ffn.down.weight").var.shape() == Shape{128, 344});
  CHECK(p.info("blocks.0.n1.weight").var.shape() == Shape{128});
  CHECK(p.info("lm_head.weight").var.shape() == Shape{65, 128});
  CHECK(p.info("lm_head.bias").var.shape() == Shape{65});
  CHECK(p.info("blocks.0.mix.a_proj.bias").var.data().at(0) == doctest::Approx(3.0));
  // --decay-matrices decays the parameters of two or more dimensions only
  CHECK_FALSE(p.info("blocks.0.n1.weight").weight_decay);
  CHECK_FALSE(p.info("blocks.0.mix.b_proj.bias").weight_decay);
  CHECK(p.info("blocks.0.mix.conv.weight").weight_decay);

  LanguageModel attn(make_config("attn", 65), 1);
  CHECK(attn.params().info("blocks.0.mix.k_proj.weight").var.shape() == Shape{64, 128});
  CHECK_FALSE(attn.params().has("blocks.0.mix.conv.weight"));
  CHECK_FALSE(attn.params().has("blocks.0.mix.g_proj.weight"));
  LanguageModel linear(make_config("linear", 65), 1);
  CHECK_FALSE(linear.params().has("blocks.0.mix.b_proj.weight"));
  LanguageModel delta(make_config("delta", 65), 1);
  CHECK(delta.params().has("blocks.0.mix.b_proj.weight"));
  CHECK_FALSE(delta.params().has("blocks.0.mix.a_proj.weight"));
  LanguageModel hybrid(make_config("hybrid", 65), 1);
  CHECK(hybrid.params().has("blocks.2.mix.a_proj.weight"));
  CHECK(hybrid.params().info("blocks.3.mix.k_proj.weight").var.shape() == Shape{64, 128});

  // docs/spec.md §1.2b: retnet's decay is fixed (no a_proj, no b_proj), mamba2 learns
  // one per head, gla one per head and key channel; none of them has β.
  LanguageModel retnet(make_config("retnet", 65), 1);
  CHECK_FALSE(retnet.params().has("blocks.0.mix.a_proj.weight"));
  CHECK_FALSE(retnet.params().has("blocks.0.mix.b_proj.weight"));
  CHECK(retnet.params().info("blocks.0.mix.o_norm.weight").var.shape() == Shape{32});
  LanguageModel mamba2(make_config("mamba2", 65), 1);
  CHECK(mamba2.params().info("blocks.1.mix.a_proj.weight").var.shape() == Shape{4, 128});
  CHECK(mamba2.params().info("blocks.1.mix.a_proj.bias").var.data().at(3) == doctest::Approx(3.0));
  CHECK_FALSE(mamba2.params().has("blocks.0.mix.b_proj.weight"));
  LanguageModel gla(make_config("gla", 65), 1);
  CHECK(gla.params().info("blocks.2.mix.a_proj.weight").var.shape() == Shape{128, 128});
  CHECK(gla.params().info("blocks.2.mix.a_proj.bias").var.shape() == Shape{128});
  CHECK(gla.params().info("blocks.2.mix.a_proj.bias").var.data().at(127) == doctest::Approx(3.0));
  CHECK_FALSE(gla.params().has("blocks.0.mix.b_proj.weight"));
  CHECK_FALSE(gla.params().info("blocks.0.mix.a_proj.bias").weight_decay);
}

TEST_CASE("the weights one product reads lie side by side in the buffer, registration order unchanged") {
  LanguageModel gdn(make_config("gdn", 65), 1);
  const ParameterStore& p = gdn.params();
  auto offset = [&](const std::string& name) { return p.info(name).offset; };
  auto numel = [&](const std::string& name) { return p.info(name).var.data().numel(); };
  auto follows = [&](const std::string& first, const std::string& second) {
    return offset(second) == offset(first) + numel(first);
  };
  for (const std::string& b : {"blocks.0.", "blocks.3."}) {
    CAPTURE(b);
    CHECK(follows(b + "mix.q_proj.weight", b + "mix.k_proj.weight"));  // [W_q; W_k; W_v]
    CHECK(follows(b + "mix.k_proj.weight", b + "mix.v_proj.weight"));
    CHECK(follows(b + "mix.b_proj.weight", b + "mix.a_proj.weight"));  // [W_b; W_a], place_together
    CHECK(follows(b + "mix.b_proj.bias", b + "mix.a_proj.bias"));      // [b_b; b_a]
    CHECK(follows(b + "ffn.gate.weight", b + "ffn.up.weight"));        // [W_gate; W_up]
  }
  // the state_dict order stays the course's: b_proj's weight and bias, then a_proj's
  std::vector<std::string> names;
  for (const Parameter& q : p.parameters()) names.push_back(q.name);
  auto at = [&](const std::string& name) { return std::find(names.begin(), names.end(), name) - names.begin(); };
  CHECK(at("blocks.0.mix.b_proj.bias") == at("blocks.0.mix.b_proj.weight") + 1);
  CHECK(at("blocks.0.mix.a_proj.weight") == at("blocks.0.mix.b_proj.bias") + 1);
  // every element of the buffer belongs to exactly one parameter
  std::vector<int> owners(size_t(p.count()), 0);
  for (const Parameter& q : p.parameters())
    for (int64_t i = 0; i < q.var.data().numel(); ++i) owners[size_t(q.offset + i)]++;
  CHECK(std::count(owners.begin(), owners.end(), 1) == p.count());

  ParameterStore store;
  store.add("a", {2, 3}, true);
  store.add("b", {4}, false);
  store.add("c", {5, 3}, true);
  CHECK_THROWS_WITH_AS(store.place_together({"a", "nope"}), "ParameterStore::place_together: no parameter named 'nope'", Error);
  store.place_together({"a", "c"});
  CHECK_THROWS_WITH_AS(store.place_together({"c", "b"}),
                       "ParameterStore::place_together: 'c' is in another group already", Error);
  store.finalize(DType::F32, Device::Cpu);
  CHECK(store.info("a").offset == 0);
  CHECK(store.info("c").offset == 6);
  CHECK(store.info("b").offset == 21);
  CHECK_THROWS_WITH_AS(store.place_together({"a"}),
                       "ParameterStore::place_together: cannot move parameters after finalize()", Error);
}

TEST_CASE("parameter counts are spec 1.4's") {
  const std::vector<std::pair<std::string, int64_t>> lm = {
      {"attn", 742849},   {"linear", 880193}, {"delta", 882257}, {"gdn", 884321},
      {"hybrid", 848953}, {"retnet", 880193}, {"mamba2", 882257}, {"gla", 946241}};
  for (const auto& [preset, count] : lm) {
    CAPTURE(preset);
    CHECK(LanguageModel(make_config(preset, 65), 1).params().count() == count);
  }
  const std::vector<std::pair<std::string, int64_t>> recall = {
      {"attn", 759040}, {"linear", 896384}, {"delta", 898448}, {"gdn", 900512}, {"hybrid", 865144}};
  for (const auto& [preset, count] : recall) {
    CAPTURE(preset);
    CHECK(LanguageModel(make_config(preset, 128), 1).params().count() == count);
  }
}

TEST_CASE("initialisation is PyTorch's defaults (spec 1, init)") {
  LanguageModel m(make_config("hybrid", 65), 7);
  auto bound = [&](const std::string& name) {  // the largest |value| of a parameter
    std::vector<double> v = m.params().get(name).data().to(DType::F64).to_vector<double>();
    double b = 0;
    for (double x : v) b = std::max(b, std::abs(x));
    return b;
  };
  // U(±1/√fan_in): fan_in 128 for the projections and the head, 344 for down, 4 for the conv
  for (const char* name : {"blocks.0.mix.q_proj.weight", "blocks.3.mix.k_proj.weight", "blocks.1.mix.g_proj.weight",
                           "blocks.0.ffn.gate.weight", "lm_head.weight", "lm_head.bias", "blocks.0.mix.b_proj.bias"}) {
    CAPTURE(name);
    CHECK(bound(name) <= 1 / std::sqrt(128.0));
    CHECK(bound(name) > 0.8 / std::sqrt(128.0));
  }
  CHECK(bound("blocks.0.ffn.down.weight") <= 1 / std::sqrt(344.0));
  CHECK(bound("blocks.0.mix.conv.weight") <= 0.5);
  CHECK(bound("blocks.0.mix.conv.weight") > 0.45);
  CHECK(bound("tok.weight") > 2.5);  // N(0, 1) over 65 · 128 draws
  CHECK(bound("norm_f.weight") == 1.0);
}

TEST_CASE("memory accounting of spec 1.3") {
  CHECK(make_config("attn", 65).kv_per_token() == 512);
  CHECK(make_config("hybrid", 65).kv_per_token() == 128);
  CHECK(make_config("gdn", 65).kv_per_token() == 0);
  CHECK(make_config("gdn", 65).state_const() == 16384);
  CHECK(make_config("linear", 65).state_const() == 16384);
  CHECK(make_config("hybrid", 65).state_const() == 12288);
  CHECK(make_config("attn", 65).state_const() == 0);
  CHECK(make_config("gdn", 65).conv_cache() == 4 * 3 * 3 * 128);
  CHECK(make_config("gdn,attn", 65).n_layer() == 2);
  for (const char* preset : {"retnet", "mamba2", "gla"}) {
    CHECK(make_config(preset, 65).state_const() == 16384);
    CHECK(make_config(preset, 65).kv_per_token() == 0);
  }
  CHECK(make_config("gla,gla,gla,attn", 65).state_const() == 12288);
  CHECK(make_config("gla,gla,gla,attn", 65).kv_per_token() == 128);
  CHECK(parse_feature_map("sigmoid") == FeatureMap::Sigmoid);
  CHECK_THROWS_WITH_AS(parse_feature_map("tanh"),
                       doctest::Contains("unknown feature map 'tanh': use elu1, relu or sigmoid"), Error);
  CHECK_THROWS_WITH_AS(make_config("transformer", 65), doctest::Contains("unknown preset 'transformer'"), Error);
  CHECK_THROWS_AS(make_config("gdn,,attn", 65), Error);
}

TEST_CASE("float64 gradient check of every parameter, every preset") {
  for (const Variant& variant : kVariants) {
    const std::string preset = variant_name(variant);
    for (ScanForm form : {ScanForm::Chunked, ScanForm::Sequential}) {
      if (preset == "attn" && form == ScanForm::Sequential) continue;
      ModelConfig c = tiny_config(variant);
      c.scan_form = form;
      LanguageModel m(c, 3, DType::F64);
      perturb_all(m, 4);
      Tensor x = random_ids(2, 7, c.vocab, 5), y = random_ids(2, 7, c.vocab, 6);
      m.params().zero_grad();
      cross_entropy(m.forward(x), y).backward();
      Rng rng(8);
      // A tenth of the usual step: with the tiny model's L2-normalised keys the
      // loss is strongly curved along the embedding, and the central
      // difference's error grows as eps² (at 1e-6 it reaches 1e-5 for retnet).
      const double eps = test::kGradcheck.eps / 10;
      for (const Parameter& p : m.params().parameters()) {
        Tensor w = p.var.data();
        Tensor u = Tensor::randn(w.shape(), rng, 1.0, 0.0, DType::F64);
        Tensor saved = w.clone();
        dispatch::add_inplace(w, u, eps);
        double lp = loss_of(m, x, y);
        w.copy_from(saved);
        dispatch::add_inplace(w, u, -eps);
        double lm = loss_of(m, x, y);
        w.copy_from(saved);
        double numeric = (lp - lm) / (2 * eps);
        double analytic = 0;
        const double* g = p.var.grad().data<double>();
        const double* ud = u.data<double>();
        for (int64_t i = 0; i < u.numel(); ++i) analytic += g[i] * ud[i];
        double err = std::fabs(numeric - analytic) / std::max(1.0, std::fabs(analytic));
        INFO(preset << (form == ScanForm::Chunked ? " chunked " : " sequential ") << p.name
                    << ": numeric " << numeric << " analytic " << analytic);
        CHECK(err <= test::kGradcheck.tolerance);
      }
    }
  }
}

TEST_CASE("step-by-step inference reproduces the parallel forward's logits") {
  for (const Variant& variant : kVariants) {
    const std::string preset = variant_name(variant);
    ModelConfig c = tiny_config(variant);
    LanguageModel m(c, 11, DType::F64);
    perturb_all(m, 12);
    Tensor x = random_ids(2, 9, c.vocab, 13);
    NoGradGuard no_grad;
    Tensor full = m.forward(x).data();  // [2, 9, V]
    InferenceState state = m.new_state(2);
    double worst = 0;
    for (int64_t t = 0; t < 9; ++t) {
      Tensor step = m.forward(slice(x, 1, t, 1), &state).data();
      worst = std::max(worst, test::max_abs_diff(step, slice(full, 1, t, 1)));
    }
    INFO(preset << ": max |step − parallel| = " << worst);
    CHECK(worst < 1e-10);
    CHECK(state.position == 9);
    CHECK(state.kv_floats() == 2 * 9 * c.kv_per_token());  // the KV cache grows with t
    CHECK(state.state_floats() == 2 * c.state_const());    // the state does not
  }
}

TEST_CASE("a few training steps lower the loss of every preset") {
  for (const Variant& variant : kVariants) {
    const std::string preset = variant_name(variant);
    ModelConfig c = tiny_config(variant, 13);
    LanguageModel m(c, 21);
    AdamW opt(m.params(), AdamWConfig{3e-3, 0.9, 0.99, 1e-8, 0.1});
    // a fixed batch of a repeating pattern: learnable in a few steps
    std::vector<int32_t> seq;
    for (int i = 0; i < 4 * 17; ++i) seq.push_back(int32_t((i * 5) % 13));
    std::vector<int32_t> xv, yv;
    for (int b = 0; b < 4; ++b)
      for (int t = 0; t < 16; ++t) {
        xv.push_back(seq[size_t(b * 17 + t)]);
        yv.push_back(seq[size_t(b * 17 + t + 1)]);
      }
    Tensor x = Tensor::from_vector(xv, {4, 16}), y = Tensor::from_vector(yv, {4, 16});
    double first = 0, last = 0;
    for (int s = 0; s < 30; ++s) {
      m.params().zero_grad();
      Var loss = cross_entropy(m.forward(x), y);
      loss.backward();
      clip_grad_norm(m.params(), 1.0);
      opt.update();
      (s == 0 ? first : last) = loss.item();
    }
    INFO(preset << ": loss " << first << " -> " << last);
    CHECK(last < 0.7 * first);
  }
}

// One float64 training step of `c`'s model (the same weights and batch for
// every configuration): the loss and every parameter's gradient.
struct StepResult {
  double loss = 0;
  std::vector<Tensor> grads;
};
StepResult one_step(const ModelConfig& c, Graph after = Graph::Keep, bool release_unread = false) {
  LanguageModel m(c, 3, DType::F64);
  perturb_all(m, 4);
  Tensor x = random_ids(2, 7, c.vocab, 5), y = random_ids(2, 7, c.vocab, 6);
  m.params().zero_grad();
  std::optional<ReleaseUnreadOutputs> releasing;  // as lina train's step
  if (release_unread) releasing.emplace();
  Var loss = cross_entropy(m.forward(x), y);
  loss.backward(after);
  StepResult r;
  r.loss = loss.data().at(0);
  for (const Parameter& p : m.params().parameters()) r.grads.push_back(p.var.grad().clone());
  return r;
}

// A fused op and the composition it replaces are the same maths: `fused` and
// `composed` (the same model, one flag apart) give the same loss and
// parameter gradients, to float64 rounding.
void check_same_step(const ModelConfig& fused, const ModelConfig& composed, const std::string& what) {
  StepResult a = one_step(fused), b = one_step(composed);
  INFO(what);
  CHECK(std::fabs(a.loss - b.loss) < 1e-12);
  REQUIRE(a.grads.size() == b.grads.size());
  for (size_t i = 0; i < a.grads.size(); ++i) CHECK(test::max_abs_diff(a.grads[i], b.grads[i]) < 1e-12);
}

TEST_CASE("a backward that frees the graph as it goes gives the same gradients, every preset") {
  // Graph::Free drops each op's saved tensors after its backward and, first,
  // the outputs no backward reads; ReleaseUnreadOutputs drops those already
  // in the forward. If any op's backward read one of them, its gradients
  // would differ (or it would throw on a released buffer).
  for (const Variant& v : kVariants) {
    ModelConfig c = tiny_config(v.preset);
    c.feature_map = v.feature_map;
    StepResult kept = one_step(c, Graph::Keep), freed = one_step(c, Graph::Free),
               released = one_step(c, Graph::Free, /*release_unread=*/true);
    INFO(v.preset);
    CHECK(kept.loss == freed.loss);
    CHECK(kept.loss == released.loss);
    REQUIRE(kept.grads.size() == freed.grads.size());
    REQUIRE(kept.grads.size() == released.grads.size());
    for (size_t i = 0; i < kept.grads.size(); ++i) {
      CHECK(test::max_abs_diff(kept.grads[i], freed.grads[i]) == 0.0);
      CHECK(test::max_abs_diff(kept.grads[i], released.grads[i]) == 0.0);
    }
  }
}

TEST_CASE("fused and composed attention: the same loss and parameter gradients") {
  for (std::string preset : {"attn", "hybrid"}) {
    ModelConfig fused = tiny_config(preset), composed = fused;
    composed.attention = Fusion::Composed;
    check_same_step(fused, composed, preset);
  }
}

TEST_CASE("fused and composed conv + SiLU: the same loss, gradients and step-by-step logits") {
  for (std::string preset : {"linear", "delta", "gdn", "hybrid", "retnet", "mamba2", "gla"}) {
    ModelConfig fused = tiny_config(preset), composed = fused;
    composed.conv = Fusion::Composed;
    check_same_step(fused, composed, preset);

    // generation: the conv cache takes the same path in both forms
    Tensor x = random_ids(2, 5, fused.vocab, 13);
    Tensor logits[2];
    for (int form = 0; form < 2; ++form) {
      LanguageModel m(form == 0 ? fused : composed, 11, DType::F64);
      perturb_all(m, 12);
      NoGradGuard no_grad;
      InferenceState state = m.new_state(2);
      m.forward(slice(x, 1, 0, 3), &state);
      logits[form] = m.forward(slice(x, 1, 3, 2), &state).data();
    }
    INFO(preset << " step by step");
    CHECK(test::max_abs_diff(logits[0], logits[1]) < 1e-12);
  }
}
