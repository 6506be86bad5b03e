#include "experiments/checkpoint.h"

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
  std::vector<int> chars(info.vocab_chars.begin(), info.vocab_chars.end());
  std::map<std::string, std::string> meta = {
      {"format", "lina-checkpoint-1"},
      {"preset", info.preset},
      {"task", info.task},
      {"vocab", std::to_string(info.vocab)},
      {"vocab_chars", json(chars).dump()},
      {"step", std::to_string(info.step)},
      {"rng", rng.dump()},
      {"options", info.options.dump()},
      {"history", info.history.dump()},
      {"config", json{{"layers", [&] {
                         json l = json::array();
                         for (MixerKind k : model.config().layers) l.push_back(mixer_name(k));
                         return l;
                       }()},
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

static CheckpointInfo parse_info(const SafetensorsFile& f) {
  CheckpointInfo info;
  try {
    check(meta_value(f, "format") == "lina-checkpoint-1",
          "checkpoint " + f.path + ": unknown format '" + meta_value(f, "format") + "'");
    info.preset = meta_value(f, "preset");
    info.task = meta_value(f, "task");
    info.vocab = std::stoi(meta_value(f, "vocab"));
    for (int c : json::parse(meta_value(f, "vocab_chars")).get<std::vector<int>>())
      info.vocab_chars.push_back(char(c));
    info.step = std::stoll(meta_value(f, "step"));
    json rng = json::parse(meta_value(f, "rng"));
    check(rng.is_array() && rng.size() == 4, "checkpoint " + f.path + ": bad rng state");
    for (size_t i = 0; i < 4; ++i) info.rng_state[i] = std::stoull(rng[i].get<std::string>());
    info.options = json::parse(meta_value(f, "options"));
    info.history = json::parse(meta_value(f, "history"));
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error("checkpoint " + f.path + ": corrupt metadata (" + e.what() + ")");
  }
  return info;
}

CheckpointInfo read_checkpoint_info(const std::string& path) {
  return parse_info(load_safetensors(path));
}

void load_checkpoint(const std::string& path, LanguageModel& model, AdamW* optimizer) {
  SafetensorsFile f = load_safetensors(path);
  CheckpointInfo info = parse_info(f);
  check(info.preset == model.config().preset,
        "checkpoint " + path + " is of preset '" + info.preset + "', not '" +
            model.config().preset + "'");
  check(info.vocab == model.config().vocab,
        "checkpoint " + path + " has vocabulary " + std::to_string(info.vocab) + ", expected " +
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
    optimizer->set_step_count(info.step);
  }
}

}  // namespace lina
