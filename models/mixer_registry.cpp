// The registry of token mixers: one row per mixer, and the named layer
// patterns. The presets (`lina train --preset`), their order, the CLI's help
// and `lina state-size`'s rows all come from these two tables. A new mixer
// is a row here and its file (see docs/extending.md, "Adding a token mixer").
#include <string>
#include <vector>

#include "models/config.h"
#include "models/mixer.h"

namespace lina {

const std::vector<MixerRow>& mixer_rows() {
  static const std::vector<MixerRow> rows = {
      // name   survey recurrent rule             made by
      {"attn",   false, false, ScanRule::Linear, make_attention,
       "softmax attention: a KV cache of every earlier token"},
      {"linear", false, true,  ScanRule::Linear, make_recurrent,
       "linear attention: S += v kᵀ, keys through a positive feature map"},
      {"delta",  false, true,  ScanRule::Delta,  make_recurrent,
       "the delta rule: S += β (v − S k) kᵀ, an overwrite of the key's slot"},
      {"gdn",    false, true,  ScanRule::Gdn,    make_recurrent,
       "Gated DeltaNet: the delta rule after a learned decay α per head"},
      {"retnet", true,  true,  ScanRule::Retnet, make_recurrent,
       "retention: S = α S + v kᵀ, a fixed decay α per head"},
      {"mamba2", true,  true,  ScanRule::Mamba2, make_recurrent,
       "Mamba-2's SSD: S = α S + v kᵀ, a learned decay α per head"},
      {"gla",    true,  true,  ScanRule::Gla,    make_recurrent,
       "gated linear attention: S = S diag(α) + v kᵀ, a learned decay per head and key channel"},
  };
  return rows;
}

namespace {

// A preset that stands for a pattern of different mixers.
struct NamedPattern {
  const char* name;
  const char* layers;
  bool survey;
  const char* summary;
};

const std::vector<NamedPattern>& named_patterns() {
  static const std::vector<NamedPattern> patterns = {
      {"hybrid", "gdn,gdn,gdn,attn", false, "3:1, Gated DeltaNet layers with attention last in the group"},
  };
  return patterns;
}

// The mixers' names, then the named patterns', of the course (survey =
// false) or of the survey.
std::vector<std::string> presets_of(bool survey) {
  std::vector<std::string> names;
  for (const MixerRow& m : mixer_rows())
    if (m.survey == survey) names.push_back(m.name);
  for (const NamedPattern& p : named_patterns())
    if (p.survey == survey) names.push_back(p.name);
  return names;
}

}  // namespace

const MixerRow* mixer_named(const std::string& name) {
  for (const MixerRow& m : mixer_rows())
    if (name == m.name) return &m;
  return nullptr;
}

std::string named_pattern(const std::string& preset) {
  for (const NamedPattern& p : named_patterns())
    if (preset == p.name) return p.layers;
  return "";
}

std::vector<std::string> preset_names() { return presets_of(/*survey=*/false); }
std::vector<std::string> survey_preset_names() { return presets_of(/*survey=*/true); }
std::vector<std::string> all_preset_names() {
  std::vector<std::string> all = preset_names();
  for (const std::string& p : survey_preset_names()) all.push_back(p);
  return all;
}

std::string preset_help() {
  std::string help = "Presets (four layers of one mixer, or a named pattern):\n";
  auto line = [&](const std::string& name, const std::string& what) {
    help += "  " + name + std::string(name.size() < 8 ? 8 - name.size() : 1, ' ') + what + "\n";
  };
  for (const MixerRow& m : mixer_rows()) line(m.name, m.summary);
  for (const NamedPattern& p : named_patterns()) line(p.name, std::string(p.layers) + ": " + p.summary);
  return help;
}

std::string preset_list(const std::string& separator) {
  std::string list;
  for (const std::string& p : all_preset_names()) list += (list.empty() ? "" : separator) + p;
  return list;
}

}  // namespace lina
