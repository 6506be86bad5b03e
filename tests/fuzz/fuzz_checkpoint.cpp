// libFuzzer target: the checkpoint loader on arbitrary bytes, for long local
// runs (scripts/fuzz.sh). The same calls as `eval`, `sample` and
// `train --resume`; every input must load or throw one lina::Error whose
// message is one printable line. Anything else aborts, and the fuzzer keeps
// the input that did it.
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "core/printable.h"
#include "core/safetensors.h"
#include "experiments/checkpoint.h"

using namespace lina;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Models are built once per (preset, vocabulary) a valid header names.
  static std::map<std::pair<std::string, int>, std::unique_ptr<LanguageModel>> models;
  static std::map<std::pair<std::string, int>, std::unique_ptr<AdamW>> optimizers;
  try {
    SafetensorsFile f = parse_safetensors(std::string_view(reinterpret_cast<const char*>(data), size), "input");
    CheckpointInfo info = checkpoint_info(f);
    auto key = std::make_pair(info.preset, info.vocab);
    if (!models.count(key)) {
      models[key] = std::make_unique<LanguageModel>(make_config(info.preset, info.vocab), 1);
      optimizers[key] = std::make_unique<AdamW>(models[key]->params());
    }
    load_checkpoint(f, *models[key], optimizers[key].get());
  } catch (const Error& e) {
    std::string message = e.what();
    if (message.empty() || printable(message, 100000) != message) std::abort();
  }
  return 0;  // any other exception escapes and the fuzzer reports it
}
