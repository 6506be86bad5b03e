#include "models/config.h"

#include <sstream>

#include "core/printable.h"
#include "models/mixer.h"

namespace lina {

const char* feature_map_name(FeatureMap f) {
  switch (f) {
    case FeatureMap::Elu1: return "elu1";
    case FeatureMap::Relu: return "relu";
    case FeatureMap::Sigmoid: return "sigmoid";
  }
  return "?";
}

FeatureMap parse_feature_map(const std::string& name) {
  for (FeatureMap f : {FeatureMap::Elu1, FeatureMap::Relu, FeatureMap::Sigmoid})
    if (name == feature_map_name(f)) return f;
  throw Error("unknown feature map '" + name + "': use elu1, relu or sigmoid");
}

const char* fusion_name(Fusion f) {
  switch (f) {
    case Fusion::Fused: return "fused";
    case Fusion::Composed: return "composed";
  }
  return "?";
}

Fusion parse_fusion(const std::string& name, const std::string& flag) {
  for (Fusion f : {Fusion::Fused, Fusion::Composed})
    if (name == fusion_name(f)) return f;
  throw Error("unknown " + flag + " '" + printable(name, 40) + "': use fused or composed");
}

const char* scan_form_name(ScanForm f) {
  switch (f) {
    case ScanForm::Sequential: return "sequential";
    case ScanForm::Chunked: return "chunked";
  }
  return "?";
}

ScanForm parse_scan_form(const std::string& name) {
  for (ScanForm f : {ScanForm::Chunked, ScanForm::Sequential})
    if (name == scan_form_name(f)) return f;
  throw Error("unknown --scan-form '" + printable(name, 40) + "': use chunked or sequential");
}

static const MixerRow& parse_mixer(const std::string& word, const std::string& preset) {
  if (const MixerRow* row = mixer_named(word)) return *row;
  throw Error("unknown preset '" + preset + "': use " + preset_list(", ") +
              " or a layer pattern such as " + named_pattern("hybrid"));
}

ModelConfig make_config(const std::string& preset, int vocab) {
  check(vocab > 0, "model: vocabulary size must be positive, got " + std::to_string(vocab));
  ModelConfig c;
  c.preset = preset;
  c.vocab = vocab;
  std::string pattern = named_pattern(preset);
  if (pattern.empty()) pattern = preset;
  if (pattern.find(',') == std::string::npos) {
    c.layers.assign(4, &parse_mixer(pattern, preset));
  } else {
    std::stringstream ss(pattern);
    std::string word;
    while (std::getline(ss, word, ',')) {
      c.layers.push_back(&parse_mixer(word, preset));
      check(c.layers.size() <= size_t(kMaxLayers),
            "preset: a layer pattern has at most " + std::to_string(kMaxLayers) + " layers");
    }
    // getline drops a last empty word: "gdn," would be one gdn layer
    check(pattern.back() != ',', "preset '" + preset.substr(0, 60) + "' ends with a comma: name a mixer after it");
  }
  return c;
}

int ModelConfig::recurrent_layers() const {
  int n = 0;
  for (const MixerRow* m : layers) n += m->recurrent;
  return n;
}
int ModelConfig::attention_layers() const { return n_layer() - recurrent_layers(); }
bool ModelConfig::has_mixer(const std::string& name) const {
  for (const MixerRow* m : layers)
    if (m->name == name) return true;
  return false;
}
bool ModelConfig::learns_decay() const {
  for (const MixerRow* m : layers)
    if (m->learns_decay()) return true;
  return false;
}
std::vector<std::string> ModelConfig::layer_names() const {
  std::vector<std::string> names;
  for (const MixerRow* m : layers) names.push_back(m->name);
  return names;
}
long long ModelConfig::kv_per_token() const {
  return 2LL * n_kv_head * head_size * attention_layers();
}
long long ModelConfig::state_const() const {
  return 1LL * n_head * head_size * head_size * recurrent_layers();
}
long long ModelConfig::conv_cache() const {
  return 1LL * (conv_kernel - 1) * 3 * n_embd * recurrent_layers();
}

}  // namespace lina
