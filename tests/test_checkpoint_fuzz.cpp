// A seeded, deterministic mutation test of the checkpoint reader.
//
// One real checkpoint (a 2-layer gdn/attention model with its AdamW moments)
// is mutated 10,000 ways: its header length, its header JSON (dtypes, shapes,
// offsets, names, every metadata field), truncation, inserted and deleted
// bytes, random bytes, deep nesting, and whole files of noise. Each mutant
// goes through the loader that `eval`, `sample` and `train --resume` use
// (parse_safetensors → checkpoint_info → load_checkpoint). Every case must
// either load tensors with the names, dtypes and shapes the model expects,
// or throw a lina::Error whose message is one printable line; never crash,
// hang, or throw anything else. And no buffer may be allocated from a size
// in the header before it was checked against the file's length: the
// largest host allocation while parsing is at most the file's size.
#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "backend_cpu/host_allocator.h"
#include "core/printable.h"
#include "core/safetensors.h"
#include "experiments/checkpoint.h"
#include "tests/checkpoint_models.h"
#include "tests/temp_dir.h"

using namespace lina;
using nlohmann::json;

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr int kCases = 1000;  // the sanitizer run checks memory safety on fewer cases
#else
constexpr int kCases = 10000;
#endif

// The file split into its three parts.
struct Parts {
  std::string length, header, data;
};

Parts split(const std::string& file) {
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t(file[size_t(i)])) << (8 * i);
  return {file.substr(0, 8), file.substr(8, n), file.substr(8 + n)};
}

std::string u64_le(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[size_t(i)] = char((n >> (8 * i)) & 0xff);
  return s;
}

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}

  uint64_t below(uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  bool coin() { return rng_() & 1; }

  // A JSON value of any type, sometimes a plausible one.
  json any_value() {
    switch (below(12)) {
      case 0: return nullptr;
      case 1: return coin();
      case 2: return int64_t(rng_());
      case 3: return -int64_t(below(1000));
      case 4: return below(100);
      case 5: return double(rng_()) * 1e-10;
      case 6: return random_text(below(20));
      case 7: return json::array({below(10), below(10)});
      case 8: return json::array({json::array({1})});
      case 9: return json::object({{"x", below(5)}});
      case 10: return std::string("F32");
      default: return std::to_string(int64_t(rng_()) % 100000);
    }
  }
  std::string random_text(size_t n) {  // bytes, printable or not (valid UTF-8 for the JSON writer)
    std::string s;
    for (size_t i = 0; i < n; ++i) {
      uint64_t r = below(10);
      if (r < 6) s += char(0x20 + below(95));
      else if (r < 8) s += char(below(32));
      else s += "\xc3\xa9";  // é
    }
    return s;
  }
  std::string random_bytes(size_t n) {
    std::string s(n, '\0');
    for (char& c : s) c = char(rng_());
    return s;
  }

  // One mutant of `file`; `family` names what was done (for the report).
  std::string mutate(const std::string& file, std::string& family) {
    Parts p = split(file);
    switch (below(9)) {
      case 0: {
        family = "header length";
        const uint64_t n = p.header.size();
        uint64_t choices[] = {0, 1, 7, n - 1, n + 1, n + 8, n * 2, file.size(), file.size() - 8,
                              uint64_t(1) << 40, ~uint64_t(0), rng_()};
        return u64_le(choices[below(12)]) + p.header + p.data;
      }
      case 1: {
        family = "truncation";
        return file.substr(0, size_t(coin() ? below(8 + p.header.size() + 64) : below(file.size())));
      }
      case 2: {
        family = "byte flips";
        std::string f = file;
        int flips = 1 + int(below(8));
        for (int i = 0; i < flips; ++i) {
          // half in the length field and header, half anywhere
          size_t at = coin() ? size_t(below(8 + p.header.size())) : size_t(below(f.size()));
          f[at] = char(uint8_t(f[at]) ^ uint8_t(1 + below(255)));
        }
        return f;
      }
      case 3: {
        family = "inserted or deleted header bytes";
        std::string h = p.header;
        size_t at = size_t(below(h.size()));
        if (coin()) h.insert(at, random_bytes(1 + below(16)));
        else h.erase(at, 1 + below(16));
        return (coin() ? u64_le(h.size()) : p.length) + h + p.data;
      }
      case 4: {
        family = "random bytes";
        if (coin()) return random_bytes(below(300));
        std::string body = random_bytes(below(300));
        return u64_le(body.size()) + body;
      }
      case 5: {
        family = "deep nesting";
        size_t depth = 1000 + below(100000);
        std::string h = "{\"a\":" + std::string(depth, '[') + std::string(coin() ? depth : depth / 2, ']') + "}";
        return u64_le(h.size()) + h;
      }
      default: {
        family = "header JSON";
        return mutate_json(p);
      }
    }
  }

 private:
  std::string mutate_json(const Parts& p) {
    json h = json::parse(p.header);
    std::vector<std::string> names;
    for (const auto& [name, value] : h.items())
      if (name != "__metadata__") names.push_back(name);
    const std::string name = names[size_t(below(names.size()))];
    int edits = 1 + int(below(3));
    for (int e = 0; e < edits; ++e) {
      try {
        edit(h, name, p);
      } catch (const json::exception&) {  // an edit that no longer fits an earlier one
      }
    }
    std::string text = h.dump(-1, ' ', false, json::error_handler_t::replace);
    return (coin() || below(4) == 0 ? u64_le(text.size()) : p.length) + text + p.data;
  }

  void edit(json& h, const std::string& name, const Parts& p) {
      switch (below(9)) {
        case 0: h[name]["dtype"] = coin() ? json(std::vector<std::string>{"F16", "BF16", "I64", "U8", "F64", "I32", "F32", ""}[below(8)]) : any_value(); break;
        case 1: {  // shape
          json s = h[name]["shape"];
          switch (below(5)) {
            case 0: s = any_value(); break;
            case 1: if (s.is_array() && !s.empty()) s[size_t(below(s.size()))] = any_value(); break;
            case 2: s.push_back(below(4)); break;
            case 3: s = json::array({uint64_t(1) << 62, 8}); break;
            default: if (s.is_array() && !s.empty()) s[0] = s[0].get<uint64_t>() + 1; break;
          }
          h[name]["shape"] = s;
          break;
        }
        case 2: {  // data offsets
          json& o = h[name]["data_offsets"];
          switch (below(5)) {
            case 0: o = any_value(); break;
            case 1: o = json::array({o[1], o[0]}); break;
            case 2: o[size_t(below(2))] = o[0].get<uint64_t>() + below(64) - 32 + (coin() ? p.data.size() : 0); break;
            case 3: o = json::array({0, p.data.size() + below(10)}); break;
            default: o = json::array({uint64_t(1) << 63, ~uint64_t(0)}); break;
          }
          break;
        }
        case 3: h.erase(name); break;
        case 4: { json copy = h.contains(name) ? h[name] : any_value(); h[random_text(1 + below(12))] = copy; break; }
        case 5: h[name] = any_value(); break;
        default: {  // metadata
          json& m = h["__metadata__"];
          static const char* keys[] = {"format", "preset", "task", "vocab", "vocab_chars", "step",
                                       "rng", "options", "history", "config"};
          const char* key = keys[below(10)];
          switch (below(6)) {
            case 0: m.erase(key); break;
            case 1: m[key] = any_value(); break;
            case 2: m[key] = random_text(below(40)); break;
            case 3: m[key] = any_value().dump(); break;  // valid JSON of the wrong kind
            case 4: {  // plausible values
              static const char* plausible[] = {"gdn", "attn", "hybrid", "gdn,attn", "attn,gdn",
                                                "lm", "recall", "0", "-1", "65", "80", "100000",
                                                "99999999999999999999", "[]", "{}", "[1,2,3,4]"};
              m[key] = plausible[below(16)];
              break;
            }
            default: m = any_value(); break;
          }
        }
      }
  }

  std::mt19937_64 rng_;
};

}  // namespace

TEST_CASE("fuzz: 10,000 mutated checkpoints load cleanly or end in one lina::Error") {
  // ---- the original: a 2-layer lm checkpoint with AdamW moments ----
  const int vocab = 12;
  const std::string preset = "gdn,attn";
  LanguageModel model(make_config(preset, vocab), 7);
  AdamW optimizer(model.params());
  CheckpointInfo info;
  info.preset = preset;
  info.task = "lm";
  info.vocab = vocab;
  info.vocab_chars = "\n !,.:;?Tabe";
  info.updates = 3;
  info.rng_state = {1, 2, 3, 4};
  info.options = {{"steps", 10}, {"batch", 2}, {"lr", 1e-3}, {"seed", 5}};
  info.history = {{"loss_curve", json::array({{{"step", 1}, {"loss", 2.5}}})}, {"eval", json::array()}};
  lina::test::TempDir dir("lina_fuzz");
  save_checkpoint(dir.file("base.safetensors"), model, &optimizer, info);
  std::string original;
  {
    std::ifstream in(dir.file("base.safetensors"), std::ios::binary);
    original.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  // the original itself loads
  {
    SafetensorsFile f = parse_safetensors(original, "original");
    CHECK(checkpoint_info(f).preset == preset);
    load_checkpoint(f, model, &optimizer);
  }

  lina::test::CheckpointModels models;  // built once per preset a mutant names

  Mutator mutator(20261201);
  std::map<std::string, std::pair<int, int>> by_family;  // family → (loaded, rejected)
  int loaded = 0, rejected = 0;
  for (int i = 0; i < kCases; ++i) {
    std::string family;
    const std::string bytes = mutator.mutate(original, family);
    const std::string name = "mutant#" + std::to_string(i);
    INFO(name << " (" << family << ", " << bytes.size() << " bytes)");
    bool ok = false;
    try {
      cpu::reset_host_memory_counters();
      SafetensorsFile f;
      try {
        f = parse_safetensors(bytes, name);
      } catch (...) {
        CHECK(cpu::host_memory_stats().largest_request <= int64_t(bytes.size()));
        throw;
      }
      // nothing was allocated from a size the file cannot hold
      CHECK(cpu::host_memory_stats().largest_request <= int64_t(bytes.size()));
      LanguageModel& loaded = models.load(f);
      // loaded: every parameter and moment came from a tensor of the expected name, shape, dtype
      for (const Parameter& p : loaded.params().parameters()) {
        const Tensor* t = f.find(p.name);
        REQUIRE(t != nullptr);
        CHECK(t->shape() == p.var.shape());
        CHECK(t->dtype() == DType::F32);
      }
      ok = true;
    } catch (const lina::Error& e) {
      const std::string message = e.what();
      INFO(message);
      CHECK(!message.empty());
      CHECK(message.size() <= 2000);
      CHECK(printable(message, 100000) == message);  // one printable line, valid UTF-8
    } catch (const std::exception& e) {
      FAIL("not a lina::Error: " << e.what());
    }
    (ok ? loaded : rejected)++;
    (ok ? by_family[family].first : by_family[family].second)++;
  }
  for (const auto& [family, counts] : by_family)
    MESSAGE(family << ": " << counts.first << " loaded, " << counts.second << " rejected");
  MESSAGE(kCases << " mutated checkpoints: " << loaded << " loaded, " << rejected << " rejected");
  CHECK(loaded + rejected == kCases);
  CHECK(loaded > 0);    // some mutants (data bytes) are still checkpoints
  CHECK(rejected > kCases / 2);
}
