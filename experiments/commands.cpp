#include "experiments/commands.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/kernels.h"
#include "experiments/checkpoint.h"
#include "experiments/data.h"

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
  m.model = std::make_unique<LanguageModel>(make_config(m.info.preset, m.info.vocab), 0);
  load_checkpoint(file, *m.model, nullptr);
  if (m.info.task == "lm") {
    check(!m.info.vocab_chars.empty(), "checkpoint " + path + ": lm checkpoint without vocabulary");
    m.chars = std::make_unique<CharDataset>(CharDataset::from_text(m.info.vocab_chars, path));
  }
  return m;
}

static std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  check(bool(f), "text file '" + path + "' not found or unreadable");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

double eval_checkpoint(const std::string& checkpoint, const std::string& text_path, int context) {
  check(context > 0, "--context must be positive, got " + std::to_string(context));
  LoadedModel m = load_model(checkpoint);
  check(m.chars != nullptr, "eval needs an lm checkpoint; " + checkpoint + " was trained on " + m.info.task);
  std::string text = read_text(text_path);
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
  for (const std::string& p : preset_names()) {
    ModelConfig c = make_config(p, 65);
    long long kv = c.kv_per_token() * context;
    std::snprintf(line, sizeof line, "%-8s %12lld %14lld %12lld %12lld %14lld\n", p.c_str(),
                  c.kv_per_token(), kv, c.state_const(), c.conv_cache(),
                  kv + c.state_const() + c.conv_cache());
    os << line;
  }
  return os.str();
}

}  // namespace lina
