// The option enums in json (the run's json, a checkpoint's options): each is
// written and read by its command-line name ("chunked", "relu", "composed"),
// so nlohmann::json converts them with json(value) and get<T>(). An unknown
// name read back is a one-line lina::Error, not a silent default.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "models/config.h"

namespace lina {

inline void to_json(nlohmann::json& j, ScanForm f) { j = scan_form_name(f); }
inline void from_json(const nlohmann::json& j, ScanForm& f) { f = parse_scan_form(j.get<std::string>()); }

inline void to_json(nlohmann::json& j, FeatureMap f) { j = feature_map_name(f); }
inline void from_json(const nlohmann::json& j, FeatureMap& f) { f = parse_feature_map(j.get<std::string>()); }

inline void to_json(nlohmann::json& j, Fusion f) { j = fusion_name(f); }
inline void from_json(const nlohmann::json& j, Fusion& f) { f = parse_fusion(j.get<std::string>(), "fusion"); }

}  // namespace lina
