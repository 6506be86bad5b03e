#include "experiments/commands.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "dispatch/dispatch.h"
#include "experiments/checkpoint.h"
#include "experiments/data.h"
#include <nlohmann/json.hpp>

namespace lina {

// A model with the checkpoint's preset and weights, plus its vocabulary.
struct LoadedModel {
  std::unique_ptr<LanguageModel> model;
  CheckpointInfo info;
  std::unique_ptr<CharDataset> chars;  // lm checkpoints: encodes/decodes text
};

static LoadedModel load_model(const std::string& path) {
  LoadedModel m;
  SafetensorsFile file = load_safetensors(path);
  m.info = checkpoint_info(file);
  ModelConfig config = make_config(m.info.preset, m.info.vocab);
  config.feature_map = parse_feature_map(m.info.options.value("feature_map", "elu1"));
  m.model = std::make_unique<LanguageModel>(config, 0);
  load_checkpoint(file, *m.model, nullptr);
  if (m.info.task == "lm") {
    check(!m.info.vocab_chars.empty(), "checkpoint " + path + ": lm checkpoint without vocabulary");
    m.chars = std::make_unique<CharDataset>(CharDataset::from_text(m.info.vocab_chars, path));
  }
  return m;
}

double eval_checkpoint(const std::string& checkpoint, const std::string& text_path, int context) {
  check(context > 0, "--context must be positive, got " + std::to_string(context));
  LoadedModel m = load_model(checkpoint);
  check(m.chars != nullptr, "eval needs an lm checkpoint; " + checkpoint + " was trained on " + m.info.task);
  std::string text = read_text_file(text_path, "text file");
  std::vector<int32_t> ids = m.chars->encode(text);
  int64_t windows = int64_t(ids.size()) / (context + 1);
  check(windows > 0, "text file '" + text_path + "' has " + std::to_string(ids.size()) +
                         " characters, fewer than one window of context+1 = " +
                         std::to_string(context + 1));
  NoGradGuard no_grad;
  const int64_t per_batch = 32;
  double total = 0;
  for (int64_t w0 = 0; w0 < windows; w0 += per_batch) {
    int64_t nb = std::min(per_batch, windows - w0);
    std::vector<int32_t> x(size_t(nb * context)), y(size_t(nb * context));
    for (int64_t b = 0; b < nb; ++b)
      for (int t = 0; t < context; ++t) {
        size_t at = size_t((w0 + b) * (context + 1) + t);
        x[size_t(b * context + t)] = ids[at];
        y[size_t(b * context + t)] = ids[at + 1];
      }
    Tensor xt = Tensor::from_vector(x, {nb, context}), yt = Tensor::from_vector(y, {nb, context});
    total += cross_entropy(m.model->forward(xt), yt).item() * double(nb);
  }
  return total / double(windows);
}

std::string sample_checkpoint(const std::string& checkpoint, const std::string& prompt, int tokens,
                              double temperature, uint64_t seed) {
  check(tokens >= 0, "--tokens must not be negative");
  check(temperature >= 0, "--temperature must not be negative");
  LoadedModel m = load_model(checkpoint);
  check(m.chars != nullptr, "sample needs an lm checkpoint; " + checkpoint + " was trained on " + m.info.task);
  std::vector<int32_t> ids = m.chars->encode(prompt.empty() ? std::string("\n") : prompt);
  NoGradGuard no_grad;
  InferenceState state = m.model->new_state(1);
  Rng rng(seed);
  Var logits;
  for (int32_t id : ids)  // the prompt, one token at a time through the constant-size state
    logits = m.model->forward(Tensor::from_vector<int32_t>({id}, {1, 1}), &state);
  std::vector<int32_t> out;
  for (int i = 0; i < tokens; ++i) {
    std::vector<float> l = logits.data().to_vector<float>();
    int32_t next = 0;
    if (temperature == 0) {
      next = int32_t(std::max_element(l.begin(), l.end()) - l.begin());
    } else {  // softmax(l / T), then one draw
      double mx = *std::max_element(l.begin(), l.end()), z = 0;
      std::vector<double> p(l.size());
      for (size_t v = 0; v < l.size(); ++v) z += p[v] = std::exp((l[v] - mx) / temperature);
      double u = rng.uniform() * z;
      next = int32_t(l.size() - 1);
      for (size_t v = 0; v < l.size(); ++v)
        if ((u -= p[v]) < 0) { next = int32_t(v); break; }
    }
    out.push_back(next);
    logits = m.model->forward(Tensor::from_vector<int32_t>({next}, {1, 1}), &state);
  }
  return m.chars->decode(out);
}

RecallEvalResult eval_recall_checkpoint(const std::string& checkpoint, const std::string& predictions,
                                        int batches, int show) {
  using nlohmann::json;
  check(!predictions.empty(), "eval --task recall needs --predictions FILE.json");
  LoadedModel m = load_model(checkpoint);
  check(m.info.task == "recall", "eval --task recall needs a recall checkpoint; " + checkpoint +
                                     " was trained on " + m.info.task);
  const json& o = m.info.options;
  RecallTask task(o.value("pairs", RecallTask::kDefaultPairs), o.value("keys", RecallTask::kDefaultKeys),
                  o.value("values", RecallTask::kDefaultValues));
  check(task.vocab() == m.info.vocab, "checkpoint " + checkpoint + ": vocabulary " +
                                          std::to_string(m.info.vocab) + " does not fit its recall task");
  int batch = o.value("batch", 0);
  check(batch > 0, "checkpoint " + checkpoint + ": bad batch size in its options");
  if (batches <= 0) batches = o.value("eval_batches", 8);
  check(batches > 0 && batches <= 10000, "--batches must be between 1 and 10000");
  uint64_t seed = o.value("seed", uint64_t(1337)) + 1;  // the run's held-out set (train.cpp make_task)

  NoGradGuard no_grad;
  RecallEvalResult r;
  double correct = 0, counted = 0;
  json examples = json::array();
  const int T = task.context();
  for (const Batch& b : task.heldout(batches, batch, seed)) {
    Var logits = m.model->forward(b.x);
    r.loss += cross_entropy(logits, b.y, b.mask).item() / batches;
    std::vector<int32_t> pred = dispatch::argmax_last(logits.data()).to_vector<int32_t>();
    std::vector<int32_t> x = b.x.to_vector<int32_t>(), y = b.y.to_vector<int32_t>();
    std::vector<float> mask = b.mask.to_vector<float>();
    for (size_t i = 0; i < y.size(); ++i) {
      counted += mask[i];
      correct += mask[i] * (pred[i] == y[i]);
    }
    for (int s = 0; s < batch && int(examples.size()) < show; ++s) {
      // tokens: the whole sequence (inputs plus the last target); position
      // p is scored when tokens[p] is a value of the second half, answered
      // from tokens[0..p−1].
      json tokens = json::array(), positions = json::array(), targets = json::array(), answers = json::array();
      for (int t = 0; t < T; ++t) tokens.push_back(x[size_t(s * T + t)]);
      tokens.push_back(y[size_t(s * T + T - 1)]);
      for (int t = 0; t < T; ++t) {
        size_t i = size_t(s * T + t);
        if (mask[i] == 0) continue;
        positions.push_back(t + 1);
        targets.push_back(y[i]);
        answers.push_back(pred[i]);
      }
      examples.push_back({{"tokens", tokens}, {"positions", positions}, {"targets", targets},
                          {"answers", answers}});
    }
  }
  r.accuracy = counted > 0 ? correct / counted : 0.0;
  r.sequences = batches * batch;
  json out = {{"checkpoint", checkpoint}, {"preset", m.info.preset}, {"task", "recall"},
              {"step", m.info.updates}, {"pairs", task.pairs()}, {"keys", task.keys()},
              {"values", task.values()}, {"heldout_seed", seed}, {"batches", batches},
              {"batch", batch}, {"sequences", r.sequences}, {"loss", r.loss},
              {"accuracy", r.accuracy}, {"examples", examples}};
  write_json_atomically(predictions, out);
  return r;
}

std::string state_size_table(int64_t context) {
  check(context > 0, "--context must be positive, got " + std::to_string(context));
  std::ostringstream os;
  char line[200];
  std::snprintf(line, sizeof line, "floats kept per sequence at context %lld (4 layers, fp32 = 4 bytes each)\n",
                (long long)context);
  os << line;
  std::snprintf(line, sizeof line, "%-8s %12s %14s %12s %12s %14s\n", "preset", "kv_per_token",
                "kv_cache", "state_const", "conv_cache", "total");
  os << line;
  for (const std::string& p : all_preset_names()) {
    ModelConfig c = make_config(p, 65);
    long long kv = c.kv_per_token() * context;
    std::snprintf(line, sizeof line, "%-8s %12lld %14lld %12lld %12lld %14lld\n", p.c_str(),
                  c.kv_per_token(), kv, c.state_const(), c.conv_cache(),
                  kv + c.state_const() + c.conv_cache());
    os << line;
  }
  os << "\n" << real_scale_table();
  return os.str();
}

std::string preset_table() {
  std::string table;
  const std::vector<std::string> course = preset_names();
  for (const std::string& p : all_preset_names()) {
    const bool in_course = std::find(course.begin(), course.end(), p) != course.end();
    std::string layers;
    for (const std::string& mixer : make_config(p, 65).layer_names()) layers += (layers.empty() ? "" : ",") + mixer;
    table += p + " " + (in_course ? "course" : "survey") + " " + layers + "\n";
  }
  return table;
}

// Bytes as "128 MiB", "4 GiB", "3.5 GiB".
static std::string human_bytes(double n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (n >= 1024 && u < 4) n /= 1024, ++u;
  char text[32];
  std::snprintf(text, sizeof text, n == double(int64_t(n)) ? "%.0f %s" : "%.3g %s", n, units[u]);
  return text;
}

// docs/spec.md §1.3's real-scale comparison: what a layer keeps per sequence, KV
// cache against a linear-attention state, for the survey's 32-layer model
// (d_model 4096, 32 heads of 128, float32) and the course's layout
// (12 × (3 GDN + 1 attention), 2 KV heads of 256, 32 value heads with
// 128 × 128 states, bf16). The same numbers as scripts/report_lib/memory.py.
std::string real_scale_table() {
  struct Layout {
    const char* name;
    double kv_per_token, state, bytes;  // numbers per token (all layers), constant numbers, bytes each
  };
  const double survey_kv_layer = 2.0 * 32 * 128, survey_state_layer = 32.0 * 128 * 128;
  const double course_kv_layer = 2.0 * 2 * 256, course_state_layer = 32.0 * 128 * 128;
  const Layout layouts[] = {
      {"survey 32 x attention, f32", 32 * survey_kv_layer, 0, 4},
      {"survey 32 x linear attention, f32", 0, 32 * survey_state_layer, 4},
      {"course 12x(3 GDN + 1 attn), bf16", 12 * course_kv_layer, 36 * course_state_layer, 2},
      {"course 48 x attention, bf16", 48 * course_kv_layer, 0, 2},
      {"course 48 x GDN, bf16", 0, 48 * course_state_layer, 2},
  };
  std::ostringstream os;
  char line[200];
  os << "real scale: bytes kept per sequence (KV cache + recurrent state, no conv cache)\n";
  std::snprintf(line, sizeof line, "%-36s %12s %12s %12s\n", "layout", "ctx 4,096", "ctx 32,768",
                "ctx 131,072");
  os << line;
  for (const Layout& l : layouts) {
    std::string cells[3];
    const double contexts[3] = {4096, 32768, 131072};
    for (int i = 0; i < 3; ++i) cells[i] = human_bytes((l.kv_per_token * contexts[i] + l.state) * l.bytes);
    std::snprintf(line, sizeof line, "%-36s %12s %12s %12s\n", l.name, cells[0].c_str(),
                  cells[1].c_str(), cells[2].c_str());
    os << line;
  }
  std::snprintf(line, sizeof line,
                "survey, one layer: KV cache 2 x ctx x 32 x 128 x 4 bytes = %s at 4,096; "
                "state 32 x 128 x 128 x 4 bytes = %s at any context\n",
                human_bytes(survey_kv_layer * 4096 * 4).c_str(),
                human_bytes(survey_state_layer * 4).c_str());
  os << line;
  return os.str();
}

}  // namespace lina
