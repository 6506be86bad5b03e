#include "models/config.h"

#include <sstream>

#include "core/printable.h"

namespace lina {

const char* mixer_name(MixerKind k) {
  switch (k) {
    case MixerKind::Attn: return "attn";
    case MixerKind::Linear: return "linear";
    case MixerKind::Delta: return "delta";
    case MixerKind::Gdn: return "gdn";
    case MixerKind::Retnet: return "retnet";
    case MixerKind::Mamba2: return "mamba2";
    case MixerKind::Gla: return "gla";
  }
  return "?";
}

ScanRule scan_rule(MixerKind k) {
  switch (k) {
    case MixerKind::Linear: return ScanRule::Linear;
    case MixerKind::Delta: return ScanRule::Delta;
    case MixerKind::Gdn: return ScanRule::Gdn;
    case MixerKind::Retnet: return ScanRule::Retnet;
    case MixerKind::Mamba2: return ScanRule::Mamba2;
    case MixerKind::Gla: return ScanRule::Gla;
    case MixerKind::Attn: break;
  }
  throw Error("model: attention has no scan rule");
}

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

std::vector<std::string> preset_names() { return {"attn", "linear", "delta", "gdn", "hybrid"}; }
std::vector<std::string> survey_preset_names() { return {"retnet", "mamba2", "gla"}; }
std::vector<std::string> all_preset_names() {
  std::vector<std::string> all = preset_names();
  for (const std::string& p : survey_preset_names()) all.push_back(p);
  return all;
}

static MixerKind parse_mixer(const std::string& word, const std::string& preset) {
  for (MixerKind k : {MixerKind::Attn, MixerKind::Linear, MixerKind::Delta, MixerKind::Gdn,
                      MixerKind::Retnet, MixerKind::Mamba2, MixerKind::Gla})
    if (word == mixer_name(k)) return k;
  throw Error("unknown preset '" + preset +
              "': use attn, linear, delta, gdn, hybrid, retnet, mamba2, gla or a layer pattern "
              "such as gdn,gdn,gdn,attn");
}

ModelConfig make_config(const std::string& preset, int vocab) {
  check(vocab > 0, "model: vocabulary size must be positive, got " + std::to_string(vocab));
  ModelConfig c;
  c.preset = preset;
  c.vocab = vocab;
  std::string pattern = preset;
  if (preset == "hybrid") pattern = "gdn,gdn,gdn,attn";  // 3:1, attention last in the group
  if (pattern.find(',') == std::string::npos) {
    c.layers.assign(4, parse_mixer(pattern, preset));
  } else {
    std::stringstream ss(pattern);
    std::string word;
    while (std::getline(ss, word, ',')) {
      c.layers.push_back(parse_mixer(word, preset));
      check(c.layers.size() <= size_t(kMaxLayers),
            "preset: a layer pattern has at most " + std::to_string(kMaxLayers) + " layers");
    }
    // getline drops a last empty word: "gdn," would be one gdn layer
    check(pattern.back() != ',', "preset '" + preset.substr(0, 60) + "' ends with a comma: name a mixer after it");
  }
  return c;
}

int ModelConfig::attention_layers() const {
  int n = 0;
  for (MixerKind k : layers) n += k == MixerKind::Attn;
  return n;
}
bool ModelConfig::has_layer(MixerKind k) const {
  for (MixerKind l : layers)
    if (l == k) return true;
  return false;
}
int ModelConfig::recurrent_layers() const { return n_layer() - attention_layers(); }
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
