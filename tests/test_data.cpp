// The tasks' data: character-level text (vocabulary, split, batches, errors)
// and the key–value recall sequences (structure, loss mask, held-out set).
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "experiments/data.h"
#include "tests/temp_dir.h"

using namespace lina;
namespace fs = std::filesystem;
using lina::test::TempDir;

namespace {


const std::string kPangram = "the quick brown fox jumps over the lazy dog";  // 43 chars

bool same_batch(const Batch& a, const Batch& b) {
  return a.x.to_vector<int32_t>() == b.x.to_vector<int32_t>() &&
         a.y.to_vector<int32_t>() == b.y.to_vector<int32_t>() &&
         a.mask.defined() == b.mask.defined() &&
         (!a.mask.defined() || a.mask.to_vector<float>() == b.mask.to_vector<float>());
}

}  // namespace

// ---- character-level text ---------------------------------------------------------------

TEST_CASE("CharDataset: sorted byte vocabulary, encode/decode round trip, 90/10 split") {
  TempDir dir("lina_data");
  const std::string path = dir.write("pangram.txt", kPangram);
  CharDataset d = CharDataset::load(path);
  CHECK(d.source() == path);
  CHECK(d.vocab() == " abcdefghijklmnopqrstuvwxyz");
  CHECK(d.vocab_size() == 27);
  CHECK(d.size() == 43);
  // floor(0.9 · 43) = 38 train tokens, 5 val.
  CHECK(d.tokens(Split::Train).size() == 38);
  CHECK(d.tokens(Split::Val).size() == 5);
  CHECK(d.decode(d.tokens(Split::Val)) == "y dog");

  CHECK(d.encode("a b") == std::vector<int32_t>{1, 0, 2});
  CHECK(d.encode("zoo") == std::vector<int32_t>{26, 15, 15});
  CHECK(d.decode(d.encode(kPangram)) == kPangram);
  CHECK(d.encode("").empty());

  CHECK_THROWS_WITH_AS(d.encode("dog!"),
                       doctest::Contains("character '!' (byte 0x21) is not in the vocabulary"),
                       lina::Error);
  CHECK_THROWS_WITH_AS(d.encode("A"), doctest::Contains(path.c_str()), lina::Error);
  CHECK_THROWS_WITH_AS(d.decode({3, 27}), doctest::Contains("token id 27 is outside"), lina::Error);
  CHECK_THROWS_AS(d.decode({-1}), lina::Error);
}

TEST_CASE("CharDataset: batches are windows of the split with targets shifted by one") {
  TempDir dir("lina_data");
  CharDataset d = CharDataset::load(dir.write("pangram.txt", kPangram));
  Rng rng(7);
  Batch b = d.sample_batch(Split::Train, 16, 6, rng);
  CHECK(b.x.shape() == Shape{16, 6});
  CHECK(b.y.shape() == Shape{16, 6});
  CHECK(b.x.dtype() == DType::I32);
  CHECK(b.y.dtype() == DType::I32);
  CHECK(!b.mask.defined());
  const auto x = b.x.to_vector<int32_t>(), y = b.y.to_vector<int32_t>();
  const auto& train = d.tokens(Split::Train);
  for (int r = 0; r < 16; ++r) {
    for (int t = 0; t + 1 < 6; ++t) CHECK(y[r * 6 + t] == x[r * 6 + t + 1]);
    // x followed by the last target is a window of 7 consecutive train tokens.
    std::vector<int32_t> window(x.begin() + r * 6, x.begin() + r * 6 + 6);
    window.push_back(y[r * 6 + 5]);
    CHECK(std::search(train.begin(), train.end(), window.begin(), window.end()) != train.end());
  }
}

TEST_CASE("CharDataset: start offsets cover exactly [0, len - context - 1]") {
  TempDir dir("lina_data");
  // 20 distinct characters: a token's id is its position, so x[r][0] is the start.
  CharDataset d = CharDataset::load(dir.write("abc.txt", "abcdefghijklmnopqrst"));
  REQUIRE(d.tokens(Split::Train).size() == 18);
  Rng rng(1);
  std::set<int32_t> starts;
  for (int i = 0; i < 50; ++i) {
    auto x = d.sample_batch(Split::Train, 32, 4, rng).x.to_vector<int32_t>();
    for (int r = 0; r < 32; ++r) starts.insert(x[r * 4]);
  }
  CHECK(starts.size() == 14);  // 18 − 4 possible starts
  CHECK(*starts.begin() == 0);
  CHECK(*starts.rbegin() == 13);

  Batch val = d.sample_batch(Split::Val, 3, 1, rng);  // val = "st": the only window
  CHECK(val.x.to_vector<int32_t>() == std::vector<int32_t>{18, 18, 18});
  CHECK(val.y.to_vector<int32_t>() == std::vector<int32_t>{19, 19, 19});
}

TEST_CASE("CharDataset: the same seed gives the same batch") {
  TempDir dir("lina_data");
  CharDataset d = CharDataset::load(dir.write("pangram.txt", kPangram));
  Rng a(1337), b(1337), c(1338);
  Batch ba = d.sample_batch(Split::Train, 8, 5, a);
  CHECK(same_batch(ba, d.sample_batch(Split::Train, 8, 5, b)));
  CHECK(!same_batch(ba, d.sample_batch(Split::Train, 8, 5, c)));
}

TEST_CASE("CharDataset: missing, empty and too-short files are one-line errors") {
  TempDir dir("lina_data");
  const std::string missing = (dir.path / "nope.txt").string();
  CHECK_THROWS_WITH_AS(CharDataset::load(missing),
                       doctest::Contains(("data file '" + missing + "' not found").c_str()), lina::Error);
  CHECK_THROWS_WITH_AS(CharDataset::load(missing), doctest::Contains("--data PATH"), lina::Error);
  CHECK_THROWS_WITH_AS(CharDataset::load(missing), doctest::Contains("1,115,394 characters"),
                       lina::Error);
  CHECK_THROWS_WITH_AS(CharDataset::load(dir.path.string()), doctest::Contains("is a directory"),
                       lina::Error);

  const std::string empty = dir.write("empty.txt", "");
  CHECK_THROWS_WITH_AS(CharDataset::load(empty),
                       ("data file '" + empty + "' is empty").c_str(), lina::Error);

  const std::string small = dir.write("abc.txt", "abcdefghijklmnopqrst");  // 18 train, 2 val
  CharDataset d = CharDataset::load(small);
  Rng rng(0);
  CHECK_NOTHROW(d.check_context(1));
  CHECK_THROWS_WITH_AS(d.check_context(4),
                       ("data file '" + small +
                        "': val split has 2 tokens, needs at least context+1 = 5")
                           .c_str(),
                       lina::Error);
  CHECK_THROWS_WITH_AS(d.sample_batch(Split::Train, 2, 20, rng),
                       doctest::Contains("train split has 18 tokens, needs at least context+1 = 21"),
                       lina::Error);
  CHECK_THROWS_WITH_AS(d.sample_batch(Split::Train, 2, 0, rng),
                       doctest::Contains("context must be positive"), lina::Error);
  CHECK_THROWS_WITH_AS(d.sample_batch(Split::Train, 0, 1, rng),
                       doctest::Contains("batch must be positive"), lina::Error);
}

TEST_CASE("CharDataset: the tiny shakespeare file has 65 characters and 1,115,394 tokens") {
  const std::string path = LINA_SOURCE_DIR "/data/tinyshakespeare.txt";
  REQUIRE_MESSAGE(fs::exists(path), "the repository's copy of tiny shakespeare is missing: " << path);
  CharDataset d = CharDataset::load(path);
  CHECK(d.vocab_size() == 65);
  CHECK(d.size() == 1115394);
  CHECK(d.tokens(Split::Train).size() == 1003854);
  CHECK(d.tokens(Split::Val).size() == 111540);
  CHECK(d.vocab().substr(0, 2) == "\n ");
  CHECK(d.decode(std::vector<int32_t>(d.tokens(Split::Train).begin(),
                                      d.tokens(Split::Train).begin() + 14)) == "First Citizen:");
  Rng rng(1337);
  Batch b = d.sample_batch(Split::Val, 2, 512, rng);
  CHECK(b.x.shape() == Shape{2, 512});
}

// ---- key–value recall ------------------------------------------------------------------

TEST_CASE("RecallTask: sequences repeat 32 distinct keys with their values, mask on recalls") {
  RecallTask task;
  Rng rng(1337);
  const int B = 64, T = task.context();
  Batch b = task.sample_batch(B, rng);
  REQUIRE(T == 127);
  CHECK(b.x.shape() == Shape{B, T});
  CHECK(b.y.shape() == Shape{B, T});
  CHECK(b.mask.shape() == Shape{B, T});
  CHECK(b.x.dtype() == DType::I32);
  CHECK(b.mask.dtype() == DType::F32);

  const auto x = b.x.to_vector<int32_t>(), y = b.y.to_vector<int32_t>();
  const auto mask = b.mask.to_vector<float>();
  std::set<int32_t> keys_seen, values_seen;
  int reordered_rows = 0;
  for (int r = 0; r < B; ++r) {
    CAPTURE(r);
    // The full 128-token sequence: x, then the last target.
    std::vector<int32_t> seq(x.begin() + r * T, x.begin() + (r + 1) * T);
    seq.push_back(y[r * T + T - 1]);
    for (int t = 0; t + 1 < T; ++t) CHECK(y[r * T + t] == x[r * T + t + 1]);

    std::map<int32_t, int32_t> first_value;
    std::vector<int32_t> first_order, second_order;
    for (int i = 0; i < 128; i += 2) {
      REQUIRE(task.is_key(seq[i]));
      REQUIRE(task.is_value(seq[i + 1]));
      keys_seen.insert(seq[i]);
      values_seen.insert(seq[i + 1]);
      if (i < 64) {
        CHECK(first_value.count(seq[i]) == 0);  // distinct keys in the first half
        first_value[seq[i]] = seq[i + 1];
        first_order.push_back(seq[i]);
      } else {
        REQUIRE(first_value.count(seq[i]) == 1);
        CHECK(first_value[seq[i]] == seq[i + 1]);  // the same value as before
        second_order.push_back(seq[i]);
      }
    }
    CHECK(first_value.size() == 32);
    std::vector<int32_t> sorted_second = second_order;
    std::sort(sorted_second.begin(), sorted_second.end());
    CHECK(std::adjacent_find(sorted_second.begin(), sorted_second.end()) == sorted_second.end());
    CHECK(sorted_second.size() == 32);
    if (second_order != first_order) ++reordered_rows;

    float row_sum = 0;
    for (int t = 0; t < T; ++t) {
      // y_t is a second-half token exactly when t + 1 >= 64.
      const bool recall_target = t + 1 >= 64 && task.is_value(y[r * T + t]);
      CHECK(mask[r * T + t] == (recall_target ? 1.0f : 0.0f));
      row_sum += mask[r * T + t];
    }
    CHECK(row_sum == 32.0f);
  }
  CHECK(reordered_rows == B);       // a new order every time (32! orders)
  CHECK(keys_seen.size() == 64);    // every key is drawn somewhere in the batch
  CHECK(values_seen.size() == 64);  // and every value (2048 draws of 64)
  CHECK(*values_seen.begin() == 64);
  CHECK(*values_seen.rbegin() == 127);
}

TEST_CASE("RecallTask: same seed, same batch, and the held-out set is fixed by its seed") {
  RecallTask task;
  Rng a(5), b(5), c(6);
  Batch ba = task.sample_batch(4, a);
  CHECK(same_batch(ba, task.sample_batch(4, b)));
  CHECK(!same_batch(ba, task.sample_batch(4, c)));

  auto h1 = task.heldout(3, 8, 42);
  auto h2 = task.heldout(3, 8, 42);
  auto h3 = task.heldout(3, 8, 43);
  REQUIRE(h1.size() == 3);
  for (int i = 0; i < 3; ++i) {
    CHECK(h1[i].x.shape() == Shape{8, 127});
    CHECK(same_batch(h1[i], h2[i]));
    CHECK(!same_batch(h1[i], h3[i]));
  }
  CHECK(!same_batch(h1[0], h1[1]));
  CHECK_THROWS_WITH_AS(task.sample_batch(0, a), doctest::Contains("batch must be positive"),
                       lina::Error);
}

TEST_CASE("RecallTask: --pairs, --keys and --values resize the task") {
  CHECK(RecallTask(8, 16).vocab() == 16 + 64);  // 64 values by default
  RecallTask task(8, 16, 16);
  CHECK(task.context() == 31);
  CHECK(task.vocab() == 32);
  Rng rng(3);
  Batch b = task.sample_batch(5, rng);
  CHECK(b.x.shape() == Shape{5, 31});
  const auto x = b.x.to_vector<int32_t>(), y = b.y.to_vector<int32_t>();
  const auto mask = b.mask.to_vector<float>();
  for (int r = 0; r < 5; ++r) {
    float row_sum = 0;
    for (int t = 0; t < 31; ++t) {
      const int32_t token = x[size_t(r * 31 + t)];
      CHECK(token >= 0);
      CHECK(token < 32);
      CHECK(task.is_key(token) == (t % 2 == 0));  // keys at even places, values at odd
      const bool recall_target = t + 1 >= 16 && t % 2 == 0;
      CHECK(mask[size_t(r * 31 + t)] == (recall_target ? 1.0f : 0.0f));
      if (recall_target) CHECK(task.is_value(y[size_t(r * 31 + t)]));
      row_sum += mask[size_t(r * 31 + t)];
    }
    CHECK(row_sum == 8.0f);
  }
  CHECK_THROWS_WITH_AS(RecallTask(0, 64), doctest::Contains("--pairs must be in [1, 4096]"), Error);
  CHECK_THROWS_WITH_AS(RecallTask(32, 16), doctest::Contains("--keys must be at least --pairs (32)"), Error);
}
