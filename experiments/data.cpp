#include "experiments/data.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>

namespace lina {

// ---- character-level text -----------------------------------------------------------

std::string read_text_file(const std::string& path, const std::string& what) {
  const std::string named = what + " '" + path + "'";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw Error(named + " not found");
  if (std::filesystem::is_directory(path, ec)) throw Error(named + " is a directory, not a text file");
  // A device or a pipe (/dev/zero) has no end to read to: only regular files, of bounded size.
  if (!std::filesystem::is_regular_file(path, ec)) throw Error(named + " is not a regular file");
  const uintmax_t bytes = std::filesystem::file_size(path, ec);
  if (ec || bytes > kMaxTextBytes)
    throw Error(named + " is larger than lina reads (1 GiB) or its size is unknown");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read " + named + ": " + std::strerror(errno));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error("cannot read " + named + ": read error");
  return text;
}

CharDataset CharDataset::load(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw Error("data file '" + path +
                "' not found: download the tiny shakespeare input.txt (the standard public "
                "copy, 1,115,394 characters) and pass --data PATH or place it at "
                "data/tinyshakespeare.txt");
  return from_text(read_text_file(path, "data file"), path);
}

CharDataset CharDataset::from_text(const std::string& text, const std::string& source) {
  check(!text.empty(), "data file '" + source + "' is empty");
  CharDataset d;
  d.source_ = source;

  std::array<bool, 256> present{};
  for (char c : text) present[uint8_t(c)] = true;
  d.id_of_byte_.fill(-1);
  for (int b = 0; b < 256; ++b) {
    if (!present[b]) continue;
    d.id_of_byte_[b] = int32_t(d.vocab_.size());
    d.vocab_.push_back(char(b));
  }

  std::vector<int32_t> ids = d.encode(text);
  // floor(0.9·n) in integers, as int(0.9 * n) in the usual Python recipe.
  const size_t n_train = ids.size() * 9 / 10;
  d.train_.assign(ids.begin(), ids.begin() + int64_t(n_train));
  d.val_.assign(ids.begin() + int64_t(n_train), ids.end());
  return d;
}

const std::vector<int32_t>& CharDataset::tokens(Split split) const {
  return split == Split::Train ? train_ : val_;
}

std::vector<int32_t> CharDataset::encode(const std::string& text) const {
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const uint8_t byte = uint8_t(text[i]);
    const int32_t id = id_of_byte_[byte];
    if (id < 0) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", unsigned(byte));
      std::string shown = (byte >= 0x20 && byte < 0x7f) ? "'" + std::string(1, char(byte)) + "' " : "";
      throw Error("encode: character " + shown + "(byte " + hex +
                  ") is not in the vocabulary of data file '" + source_ + "'");
    }
    ids[i] = id;
  }
  return ids;
}

std::string CharDataset::decode(const std::vector<int32_t>& ids) const {
  std::string text(ids.size(), '\0');
  for (size_t i = 0; i < ids.size(); ++i) {
    check(ids[i] >= 0 && ids[i] < vocab_size(),
          "decode: token id " + std::to_string(ids[i]) + " is outside the vocabulary [0, " +
              std::to_string(vocab_size()) + ")");
    text[i] = vocab_[size_t(ids[i])];
  }
  return text;
}

void CharDataset::check_split(Split split, int context) const {
  check(context > 0, "context must be positive, got " + std::to_string(context));
  const int64_t n = int64_t(tokens(split).size());
  check(n >= int64_t(context) + 1,
        "data file '" + source_ + "': " + (split == Split::Train ? "train" : "val") +
            " split has " + std::to_string(n) + " tokens, needs at least context+1 = " +
            std::to_string(int64_t(context) + 1));
}

void CharDataset::check_context(int context) const {
  check_split(Split::Train, context);
  check_split(Split::Val, context);
}

Batch CharDataset::sample_batch(Split split, int batch, int context, Rng& rng,
                                Device device) const {
  check(batch > 0, "sample_batch: batch must be positive, got " + std::to_string(batch));
  check_split(split, context);
  const std::vector<int32_t>& data = tokens(split);
  const int64_t n_starts = int64_t(data.size()) - context;  // s in [0, len − context − 1]
  std::vector<int32_t> x(size_t(batch) * size_t(context)), y(x.size());
  for (int b = 0; b < batch; ++b) {
    const int64_t s = rng.randint(n_starts);
    std::copy_n(data.begin() + s, context, x.begin() + int64_t(b) * context);
    std::copy_n(data.begin() + s + 1, context, y.begin() + int64_t(b) * context);
  }
  Batch out;
  out.x = Tensor::from_vector(x, {batch, context}, device);
  out.y = Tensor::from_vector(y, {batch, context}, device);
  return out;
}

// ---- key–value recall -----------------------------------------------------------------

RecallTask::RecallTask(int pairs, int keys, int values) : pairs_(pairs), keys_(keys), values_(values) {
  check(pairs >= 1 && pairs <= 4096, "--pairs must be in [1, 4096], got " + std::to_string(pairs));
  check(values >= 1 && values <= 4096, "--values must be in [1, 4096], got " + std::to_string(values));
  check(keys >= pairs && keys <= 4096,
        "--keys must be at least --pairs (" + std::to_string(pairs) + ") and at most 4096, got " +
            std::to_string(keys));
}

std::vector<int32_t> RecallTask::sample_sequence(Rng& rng) const {
  // P distinct keys: the first P places of a Fisher–Yates shuffle of 0..K−1.
  std::vector<int32_t> order(static_cast<size_t>(keys_));
  std::iota(order.begin(), order.end(), 0);
  for (int i = 0; i < pairs_; ++i) std::swap(order[size_t(i)], order[size_t(i + rng.randint(keys_ - i))]);

  std::vector<int32_t> value_of_key(static_cast<size_t>(keys_), 0);
  for (int i = 0; i < pairs_; ++i)
    value_of_key[size_t(order[size_t(i)])] = keys_ + int32_t(rng.randint(values_));

  std::vector<int32_t> seq;
  seq.reserve(size_t(seq_len()));
  for (int i = 0; i < pairs_; ++i) {
    seq.push_back(order[size_t(i)]);
    seq.push_back(value_of_key[size_t(order[size_t(i)])]);
  }
  // The same keys in a new random order (full Fisher–Yates of the P).
  for (int i = pairs_ - 1; i > 0; --i) std::swap(order[size_t(i)], order[size_t(rng.randint(i + 1))]);
  for (int i = 0; i < pairs_; ++i) {
    seq.push_back(order[size_t(i)]);
    seq.push_back(value_of_key[size_t(order[size_t(i)])]);
  }
  return seq;
}

Batch RecallTask::sample_batch(int batch, Rng& rng, Device device) const {
  check(batch > 0, "recall sample_batch: batch must be positive, got " + std::to_string(batch));
  const size_t T = size_t(context());
  std::vector<int32_t> x(size_t(batch) * T), y(x.size());
  std::vector<float> mask(x.size(), 0.0f);
  for (int b = 0; b < batch; ++b) {
    const std::vector<int32_t> seq = sample_sequence(rng);
    const size_t row = size_t(b) * T;
    std::copy_n(seq.begin(), T, x.begin() + int64_t(row));
    std::copy_n(seq.begin() + 1, T, y.begin() + int64_t(row));
    // y_t = seq[t + 1]; second-half values sit at seq[2P + 2j + 1].
    for (int j = 0; j < pairs_; ++j) mask[row + size_t(2 * pairs_ + 2 * j)] = 1.0f;
  }
  Batch out;
  out.x = Tensor::from_vector(x, {batch, int64_t(T)}, device);
  out.y = Tensor::from_vector(y, {batch, int64_t(T)}, device);
  out.mask = Tensor::from_vector(mask, {batch, int64_t(T)}, device);
  return out;
}

std::vector<Batch> RecallTask::heldout(int n_batches, int batch, uint64_t seed,
                                       Device device) const {
  check(n_batches > 0, "recall heldout: n_batches must be positive, got " +
                           std::to_string(n_batches));
  Rng rng(seed);
  std::vector<Batch> batches;
  for (int i = 0; i < n_batches; ++i) batches.push_back(sample_batch(batch, rng, device));
  return batches;
}

}  // namespace lina
