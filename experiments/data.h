// The two tasks' data: character-level tiny shakespeare (`lm`) and exact
// key–value recall (`recall`). Batches are int32 token ids; every random
// choice comes from a caller's seeded Rng, so a run is reproducible.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace lina {

// x: int32 [batch, T] model inputs; y: int32 [batch, T] targets (the next
// token of each input). mask: undefined for `lm` (every position counts);
// float32 [batch, T] for `recall`, 1 where the loss counts, 0 elsewhere.
struct Batch {
  Tensor x, y;
  Tensor mask;
};

enum class Split { Train, Val };

// The whole of a text file lina reads (lina train's --data, lina eval's
// --text): a regular file of at most kMaxTextBytes, since a device or a pipe
// (/dev/zero) has no end to read to. Anything else is one lina::Error that
// names the file as `what` ("data file", "text file").
constexpr uintmax_t kMaxTextBytes = uintmax_t(1) << 30;
std::string read_text_file(const std::string& path, const std::string& what);

// A text file as a sequence of byte-level tokens. The vocabulary is the
// sorted set of distinct bytes in the file (65 for tiny shakespeare); token
// id = rank of the byte in that set. The first floor(0.9·n) tokens are the
// train split, the remaining ones the val split (n = 1,115,394 gives
// 1,003,854 train and 111,540 val tokens).
class CharDataset {
 public:
  // Reads the whole file. Throws lina::Error when the file is missing (the
  // message says where to get it), unreadable or empty.
  static CharDataset load(const std::string& path);
  // The same from text in memory; `source` names it in error messages.
  static CharDataset from_text(const std::string& text, const std::string& source);

  const std::string& source() const { return source_; }
  int vocab_size() const { return int(vocab_.size()); }
  const std::string& vocab() const { return vocab_; }  // sorted distinct bytes
  int64_t size() const { return int64_t(train_.size() + val_.size()); }
  const std::vector<int32_t>& tokens(Split split) const;

  // Throws for a character that is not in the vocabulary.
  std::vector<int32_t> encode(const std::string& text) const;
  // Throws for an id outside [0, vocab_size).
  std::string decode(const std::vector<int32_t>& ids) const;

  // Throws unless both splits hold at least context + 1 tokens (one window
  // of inputs plus its shifted targets).
  void check_context(int context) const;

  // `batch` windows at start offsets s drawn uniformly from
  // [0, len − context − 1]: x = tokens[s, s+context), y = tokens[s+1, s+context+1).
  // x, y: int32 [batch, context] on `device`; mask undefined. Throws when
  // the split holds fewer than context + 1 tokens.
  Batch sample_batch(Split split, int batch, int context, Rng& rng,
                     Device device = Device::Cpu) const;

 private:
  // Throws unless `split` holds at least context + 1 tokens.
  void check_split(Split split, int context) const;

  std::string source_;
  std::string vocab_;
  std::array<int32_t, 256> id_of_byte_{};  // −1 for bytes not in the vocabulary
  std::vector<int32_t> train_, val_;
};

// Exact key–value recall (docs/spec.md §2.2), with P pairs out of K keys and
// V value tokens (spec: P = 32, K = 64, V = 64). Tokens 0..K−1 are keys,
// K..K+V−1 values. A sequence of 4P tokens: P distinct keys (drawn without
// replacement), each followed by its value (drawn uniformly, with
// replacement); then the same P keys in a new random order, each followed by
// the same value.
//
// The model reads x = seq[0, 4P−1) and predicts y = seq[1, 4P), so T = 4P−1
// (127 at the spec's sizes): the last token (the final value) is only ever a
// target, and the first token (a key that nothing precedes) only ever an
// input. The loss counts exactly where the target y_t is a value of the
// second half, i.e. t = 2P, 2P+2, …, 4P−2 (where x_t is a repeated key): P
// positions a sequence.
class RecallTask {
 public:
  static constexpr int kDefaultPairs = 32, kDefaultKeys = 64, kDefaultValues = 64;

  // Throws lina::Error unless 1 ≤ pairs ≤ keys ≤ 4096 and 1 ≤ values ≤ 4096.
  explicit RecallTask(int pairs = kDefaultPairs, int keys = kDefaultKeys,
                      int values = kDefaultValues);

  int pairs() const { return pairs_; }
  int keys() const { return keys_; }
  int values() const { return values_; }
  int vocab() const { return keys_ + values_; }      // 128 at the spec's sizes
  int seq_len() const { return 4 * pairs_; }         // 128
  int context() const { return seq_len() - 1; }      // T = 127

  bool is_key(int32_t token) const { return token >= 0 && token < keys_; }
  bool is_value(int32_t token) const { return token >= keys_ && token < vocab(); }

  // One full sequence of kSeqLen tokens.
  std::vector<int32_t> sample_sequence(Rng& rng) const;

  // x, y: int32 [batch, 127]; mask: float32 [batch, 127].
  Batch sample_batch(int batch, Rng& rng, Device device = Device::Cpu) const;

  // A fixed evaluation set drawn from its own Rng(seed): the same batches
  // in every run and for every preset.
  std::vector<Batch> heldout(int n_batches, int batch, uint64_t seed,
                             Device device = Device::Cpu) const;

 private:
  int pairs_, keys_, values_;
};

}  // namespace lina
