#include "experiments/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/atomic_file.h"
#include "core/printable.h"
#include "core/safetensors.h"

namespace lina {

using nlohmann::json;

void save_checkpoint(const std::string& path, const LanguageModel& model, const AdamW* optimizer,
                     const CheckpointInfo& info) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const Parameter& p : model.params().parameters()) tensors.push_back({p.name, p.var.data()});
  if (optimizer) {
    for (const Parameter& p : model.params().parameters()) {
      tensors.push_back({"optim.m." + p.name, optimizer->first_moment(p.name)});
      tensors.push_back({"optim.v." + p.name, optimizer->second_moment(p.name)});
    }
  }
  json rng = json::array();
  for (uint64_t w : info.rng_state) rng.push_back(std::to_string(w));
  std::vector<int> chars;  // bytes 0..255 (a char is signed: 0xE2 would be stored as −30)
  for (char c : info.vocab_chars) chars.push_back(int(uint8_t(c)));
  std::map<std::string, std::string> meta = {
      {"format", "lina-checkpoint-1"},
      {"preset", info.preset},
      {"task", info.task},
      {"vocab", std::to_string(info.vocab)},
      {"vocab_chars", json(chars).dump()},
      {"step", std::to_string(info.updates)},
      {"rng", rng.dump()},
      {"options", info.options.dump()},
      {"history", info.history.dump()},
      {"config", json{{"layers", model.config().layer_names()},
                      {"n_embd", model.config().n_embd},
                      {"n_head", model.config().n_head},
                      {"head_size", model.config().head_size},
                      {"n_kv_head", model.config().n_kv_head}}
                     .dump()},
  };
  save_safetensors(path, tensors, meta);
}

static const std::string& meta_value(const SafetensorsFile& f, const std::string& key) {
  auto it = f.metadata.find(key);
  check(it != f.metadata.end(),
        "checkpoint " + f.path + ": not a lina checkpoint (metadata '" + key + "' is missing)");
  return it->second;
}

// Throws unless `j` (metadata `key`) is an object whose listed members, where
// present, have the listed JSON types.
static void check_members(const SafetensorsFile& f, const char* key, const json& j,
                          std::initializer_list<std::pair<const char*, json::value_t>> members) {
  check(j.is_object(), "checkpoint " + f.path + ": metadata '" + key + "' is not a JSON object");
  for (const auto& [name, type] : members) {
    if (!j.contains(name)) continue;
    const json& v = j[name];
    bool ok = type == json::value_t::number_float ? v.is_number()
              : type == json::value_t::number_unsigned ? v.is_number_unsigned()
              : type == json::value_t::number_integer ? v.is_number_integer()
                                                      : v.type() == type;
    check(ok, "checkpoint " + f.path + ": metadata '" + key + "' has a bad '" + name + "'");
  }
}

CheckpointInfo checkpoint_info(const SafetensorsFile& f) {
  CheckpointInfo info;
  auto fail = [&](const std::string& problem) { return Error("checkpoint " + f.path + ": " + problem); };
  using T = json::value_t;
  try {
    const std::string& format = meta_value(f, "format");
    if (format != "lina-checkpoint-1")
      throw fail("unknown format " + in_quotes(format, 40));
    info.preset = meta_value(f, "preset");
    try {
      make_config(info.preset, 1);
    } catch (const Error&) {
      throw fail("unknown preset " + in_quotes(info.preset, 60));
    }
    info.task = meta_value(f, "task");
    if (info.task != "lm" && info.task != "recall")
      throw fail("unknown task " + in_quotes(info.task, 40));

    info.vocab = std::stoi(meta_value(f, "vocab"));
    if (info.vocab < 1 || info.vocab > kMaxCheckpointVocab)
      throw fail("vocabulary size " + std::to_string(info.vocab) + " is not in [1, " +
                 std::to_string(kMaxCheckpointVocab) + "]");
    // The model is built from `vocab`: it must agree with the file's embedding.
    const Tensor* emb = f.find("tok_emb.weight");
    if (emb && (emb->ndim() != 2 || emb->dim(0) != info.vocab))
      throw fail("vocabulary size " + std::to_string(info.vocab) + " does not match tok_emb.weight " +
                 shape_str(emb->shape()));
    json chars = json::parse(meta_value(f, "vocab_chars"));
    if (!chars.is_array()) throw fail("vocab_chars is not a list");
    for (const json& c : chars) {
      if (!c.is_number_integer() || c.get<int64_t>() < 0 || c.get<int64_t>() > 255)
        throw fail("vocab_chars holds something other than bytes 0..255");
      info.vocab_chars.push_back(char(c.get<int>()));
    }
    if (!std::is_sorted(info.vocab_chars.begin(), info.vocab_chars.end(),
                        [](char a, char b) { return uint8_t(a) <= uint8_t(b); }))
      throw fail("vocab_chars is not a list of distinct bytes in increasing order");
    if (info.task == "lm" && int(info.vocab_chars.size()) != info.vocab)
      throw fail("lm checkpoint with " + std::to_string(info.vocab_chars.size()) +
                 " vocabulary characters for a vocabulary of " + std::to_string(info.vocab));

    info.updates = std::stoll(meta_value(f, "step"));
    if (info.updates < 0 || info.updates > 1000000000)
      throw fail("step " + std::to_string(info.updates) + " is out of range");
    json rng = json::parse(meta_value(f, "rng"));
    if (!rng.is_array() || rng.size() != 4) throw fail("bad rng state");
    for (size_t i = 0; i < 4; ++i) {
      if (!rng[i].is_string()) throw fail("bad rng state");
      info.rng_state[i] = std::stoull(rng[i].get<std::string>());
    }
    info.options = json::parse(meta_value(f, "options"));
    check_members(f, "options", info.options,
                  {{"steps", T::number_integer}, {"batch", T::number_integer},
                   {"context", T::number_integer}, {"lr", T::number_float},
                   {"warmup", T::number_integer}, {"seed", T::number_unsigned},
                   {"eval_every", T::number_integer}, {"eval_batches", T::number_integer},
                   {"checkpoint_every", T::number_integer}, {"device", T::string},
                   {"data", T::string}});
    info.history = json::parse(meta_value(f, "history"));
    check_members(f, "history", info.history,
                  {{"loss_curve", T::array}, {"eval", T::array}, {"schedule", T::array},
                   {"train_seconds", T::number_float}});
    for (const json& segment : info.history.value("schedule", json::array()))
      check_members(f, "history.schedule", segment,
                    {{"from", T::number_integer}, {"to", T::number_integer},
                     {"peak_lr", T::number_float}, {"min_lr", T::number_float},
                     {"warmup", T::number_integer}});
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {  // std::stoi, json::parse, ...
    throw fail("corrupt metadata (" + printable(e.what(), 120) + ")");
  }
  return info;
}

void load_checkpoint(const SafetensorsFile& f, LanguageModel& model, AdamW* optimizer) {
  CheckpointInfo info = checkpoint_info(f);
  check(info.preset == model.config().preset,
        "checkpoint " + f.path + " is of preset '" + info.preset + "', not '" +
            model.config().preset + "'");
  check(info.vocab == model.config().vocab,
        "checkpoint " + f.path + " has vocabulary " + std::to_string(info.vocab) + ", expected " +
            std::to_string(model.config().vocab));
  DType dt = model.params().dtype();
  for (const Parameter& p : model.params().parameters()) {
    Tensor t = expect_tensor(f, p.name, p.var.shape(), dt);
    Tensor dst = p.var.data();
    dst.copy_from(t.to(dst.device()));
  }
  if (optimizer) {
    for (const Parameter& p : model.params().parameters()) {
      Tensor m = optimizer->first_moment(p.name), v = optimizer->second_moment(p.name);
      m.copy_from(expect_tensor(f, "optim.m." + p.name, p.var.shape(), dt).to(m.device()));
      v.copy_from(expect_tensor(f, "optim.v." + p.name, p.var.shape(), dt).to(v.device()));
    }
    optimizer->set_update_count(info.updates);
  }
}

void write_json_atomically(const std::string& path, const nlohmann::json& j) {
  write_file_atomically(path, j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", "json");
}

}  // namespace lina
