// libFuzzer target: the checkpoint loader on arbitrary bytes, for long local
// runs (scripts/fuzz.sh). The same calls as `eval`, `sample` and
// `train --resume`; every input must load or throw one lina::Error whose
// message is one printable line. Anything else aborts, and the fuzzer keeps
// the input that did it.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/printable.h"
#include "tests/checkpoint_models.h"

using namespace lina;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static test::CheckpointModels models;
  try {
    models.load(parse_safetensors(std::string_view(reinterpret_cast<const char*>(data), size), "input"));
  } catch (const Error& e) {
    std::string message = e.what();
    if (message.empty() || printable(message, 100000) != message) std::abort();
  }
  return 0;  // any other exception escapes and the fuzzer reports it
}
