// Safetensors checkpoints: round trips, the exact bytes of a tiny file, and
// every kind of corrupt file rejected with a one-line message.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "core/safetensors.h"
#include "tests/full_disk.h"
#include "tests/temp_dir.h"

using namespace lina;
namespace fs = std::filesystem;
using lina::test::TempDir;

namespace {


std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string u64_le(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = char((n >> (8 * i)) & 0xff);
  return s;
}

// A file by hand: length field, the header text as given, then `data`.
std::string hand_file(const std::string& header, const std::string& data) {
  return u64_le(header.size()) + header + data;
}

std::string zero_bytes(size_t n) { return std::string(n, '\0'); }

// Writes `bytes` to a file and checks that loading it throws lina::Error whose
// message names the file and contains `problem`.
void check_rejected(const TempDir& dir, const std::string& bytes, const std::string& problem) {
  const std::string path = dir.file("bad.safetensors");
  write_bytes(path, bytes);
  CHECK_THROWS_WITH_AS(load_safetensors(path), doctest::Contains(("checkpoint " + path + ": ").c_str()),
                       lina::Error);
  CHECK_THROWS_WITH_AS(load_safetensors(path), doctest::Contains(problem.c_str()), lina::Error);
}

std::vector<std::pair<std::string, Tensor>> sample_tensors() {
  return {
      {"layers.0.w", Tensor::from_vector<float>({1.5f, -2.f, 3.25f, 0.f, 1e-8f, -7.f}, {2, 3})},
      {"f64", Tensor::from_vector<double>({0.1, -0.2, 1e300, 4.0}, {4})},
      {"ids", Tensor::from_vector<int32_t>({1, -2, 2147483647, 0, 5, -2147483647}, {3, 2})},
      {"scalar", Tensor::from_vector<float>({42.f}, {})},
      {"empty", Tensor::from_vector<float>({}, {0})},
  };
}

}  // namespace

TEST_CASE("safetensors: round trip of f32, f64, i32, scalar and empty tensors with metadata") {
  TempDir dir("lina_safetensors");
  const std::string path = dir.file("ckpt.safetensors");
  const auto tensors = sample_tensors();
  const std::map<std::string, std::string> metadata = {{"step", "100"}, {"preset", "gdn"}};
  save_safetensors(path, tensors, metadata);

  SafetensorsFile file = load_safetensors(path);
  CHECK(file.path == path);
  CHECK(file.metadata == metadata);
  REQUIRE(file.tensors.size() == tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, want] = tensors[i];
    CAPTURE(name);
    CHECK(file.tensors[i].first == name);  // data order = order given
    const Tensor& got = file.tensors[i].second;
    CHECK(got.shape() == want.shape());
    CHECK(got.dtype() == want.dtype());
    CHECK(got.device() == Device::Cpu);
    for (int64_t k = 0; k < want.numel(); ++k) CHECK(got.at(k) == want.at(k));
  }
  CHECK(file.find("scalar")->item() == 42.0);
  CHECK(file.find("nothing") == nullptr);
  CHECK(dir.names() == std::vector<std::string>{fs::path(path).filename().string()});  // no temporary file left
}

TEST_CASE("safetensors: header is 8-byte aligned JSON describing every tensor") {
  TempDir dir("lina_safetensors");
  const std::string path = dir.file("ckpt.safetensors");
  save_safetensors(path, sample_tensors(), {{"note", "hello \"world\"\n"}});
  const std::string bytes = read_bytes(path);
  REQUIRE(bytes.size() >= 8);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t(bytes[i])) << (8 * i);
  CHECK(n % 8 == 0);
  REQUIRE(8 + n <= bytes.size());
  auto header = nlohmann::json::parse(bytes.substr(8, n));
  REQUIRE(header.is_object());
  CHECK(header["__metadata__"]["note"] == "hello \"world\"\n");
  CHECK(header["layers.0.w"]["dtype"] == "F32");
  CHECK(header["f64"]["dtype"] == "F64");
  CHECK(header["ids"]["dtype"] == "I32");
  CHECK(header["layers.0.w"]["shape"] == nlohmann::json({2, 3}));
  CHECK(header["scalar"]["shape"] == nlohmann::json::array());
  CHECK(header["empty"]["shape"] == nlohmann::json({0}));
  // 6·4 + 4·8 + 6·4 + 4 + 0 bytes of data, back to back.
  CHECK(header["layers.0.w"]["data_offsets"] == nlohmann::json({0, 24}));
  CHECK(header["f64"]["data_offsets"] == nlohmann::json({24, 56}));
  CHECK(bytes.size() - 8 - n == 24 + 32 + 24 + 4);
}

TEST_CASE("safetensors: bytes of a one-tensor file match a hand-built file") {
  TempDir dir("lina_safetensors");
  const std::string path = dir.file("tiny.safetensors");
  save_safetensors(path, {{"a", Tensor::from_vector<float>({1.f, 2.f}, {2})}}, {});
  // 54 header characters padded with 2 spaces to 56; 1.0f = 0x3f800000, 2.0f = 0x40000000.
  const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  REQUIRE(header.size() == 54);
  const std::string expected = std::string("\x38\0\0\0\0\0\0\0", 8) + header + "  " +
                               std::string("\0\0\x80\x3f\0\0\0\x40", 8);
  CHECK(read_bytes(path) == expected);

  // Another writer's layout (other key order, no padding, whitespace) loads too.
  write_bytes(path, hand_file(R"({ "a" : {"data_offsets":[0,8], "shape":[2], "dtype":"F32"},)"
                              R"( "__metadata__": {"format": "pt"} })",
                              std::string("\0\0\x80\x3f\0\0\0\x40", 8)));
  SafetensorsFile file = load_safetensors(path);
  CHECK(file.metadata.at("format") == "pt");
  CHECK(file.find("a")->to_vector<float>() == std::vector<float>{1.f, 2.f});
}

TEST_CASE("safetensors: a truncated file is rejected wherever it is cut") {
  TempDir dir("lina_safetensors");
  const std::string good = dir.file("good.safetensors");
  save_safetensors(good, sample_tensors(), {{"step", "3"}});
  const std::string bytes = read_bytes(good);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t(bytes[i])) << (8 * i);
  for (size_t cut : {size_t(0), size_t(3), size_t(7), size_t(8), size_t(20), size_t(8 + n / 2),
                     size_t(8 + n), size_t(8 + n + 10), bytes.size() - 1}) {
    CAPTURE(cut);
    check_rejected(dir, bytes.substr(0, cut), "");
  }
  check_rejected(dir, bytes.substr(0, 5), "too short");
  check_rejected(dir, bytes.substr(0, 8 + n / 2), "runs past the end of the file");
  check_rejected(dir, bytes.substr(0, bytes.size() - 1), "run past the end of the data section");
  check_rejected(dir, bytes + "xyz", "trailing bytes");
}

TEST_CASE("safetensors: malformed headers are rejected with the problem named") {
  TempDir dir("lina_safetensors");
  const std::string two_floats = zero_bytes(8);
  check_rejected(dir, "", "too short");
  check_rejected(dir, u64_le(uint64_t(1) << 40) + "{}", "larger than 100 MB");
  check_rejected(dir, u64_le(100) + "{}", "runs past the end of the file");
  check_rejected(dir, hand_file(R"({"a": {"dtype": "F32", )", two_floats), "not valid JSON");
  check_rejected(dir, hand_file("", ""), "not valid JSON");
  check_rejected(dir, hand_file("[1, 2]", ""), "not a JSON object");
  check_rejected(dir, hand_file(R"({"a": 3})", ""), "tensor 'a': entry is not a JSON object");
  check_rejected(dir, hand_file(R"({"a": {"shape": [2], "data_offsets": [0, 8]}})", two_floats),
                 "missing \"dtype\"");
  check_rejected(dir, hand_file(R"({"a": {"dtype": "F32", "data_offsets": [0, 8]}})", two_floats),
                 "missing \"shape\"");
  check_rejected(dir, hand_file(R"({"a": {"dtype": "F32", "shape": [2]}})", two_floats),
                 "missing \"data_offsets\"");
  check_rejected(dir,
                 hand_file(R"({"a": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]}})",
                           two_floats),
                 "unsupported dtype \"BF16\"");
  check_rejected(dir,
                 hand_file(R"({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})",
                           two_floats),
                 "shape [-2] is not a list of non-negative integers");
  check_rejected(dir,
                 hand_file(R"({"a": {"dtype": "F32", "shape": [2.5], "data_offsets": [0, 8]}})",
                           two_floats),
                 "not a list of non-negative integers");
  check_rejected(dir,
                 hand_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})",
                           two_floats),
                 "is not [begin, end] with 0 <= begin <= end");
  check_rejected(dir,
                 hand_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0]}})",
                           two_floats),
                 "is not [begin, end]");
  check_rejected(dir,
                 hand_file(R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})",
                           two_floats),
                 "hold 8 bytes, but F32 [3] needs 12");
  check_rejected(dir,
                 hand_file(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})",
                           two_floats),
                 "run past the end of the data section (8 bytes");
  check_rejected(dir,
                 hand_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
                           R"( "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                           zero_bytes(12)),
                 "tensors 'a' [0, 8] and 'b' [4, 12] overlap");
  check_rejected(dir,
                 hand_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
                           R"( "__metadata__": {"step": 3}})",
                           two_floats),
                 "__metadata__ value of 'step' is not a string");
  check_rejected(dir, hand_file(R"({"__metadata__": []})", ""), "__metadata__ is not a JSON object");
  // A shape whose byte count overflows 64 bits is caught before any allocation.
  check_rejected(dir,
                 hand_file(R"({"a": {"dtype": "F64", "shape": [4294967296, 4294967296],)"
                           R"( "data_offsets": [0, 8]}})",
                           two_floats),
                 "needs more than 2^64");
}

TEST_CASE("safetensors: a missing file, a directory and an empty file are clear errors") {
  TempDir dir("lina_safetensors");
  const std::string missing = dir.file("nope.safetensors");
  CHECK_THROWS_WITH_AS(load_safetensors(missing),
                       doctest::Contains(("checkpoint " + missing + ": file not found").c_str()),
                       lina::Error);
  CHECK_THROWS_WITH_AS(load_safetensors(dir.path.string()), doctest::Contains("is a directory"),
                       lina::Error);
  check_rejected(dir, "", "file is 0 bytes, too short");
}

TEST_CASE("safetensors: a failed save throws and leaves no file behind") {
  TempDir dir("lina_safetensors");
  const std::string path = dir.file("no_such_dir/ckpt.safetensors");
  CHECK_THROWS_WITH_AS(save_safetensors(path, sample_tensors(), {}),
                       doctest::Contains(("cannot write checkpoint " + path).c_str()), lina::Error);
  CHECK(!fs::exists(path));
  CHECK(dir.names().empty());

  const std::string ok = dir.file("ok.safetensors");
  Tensor t = Tensor::ones({2});
  CHECK_THROWS_WITH_AS(save_safetensors(ok, {{"a", t}, {"a", t}}, {}),
                       doctest::Contains("'a' appears twice"), lina::Error);
  CHECK_THROWS_WITH_AS(save_safetensors(ok, {{"__metadata__", t}}, {}),
                       doctest::Contains("invalid tensor name"), lina::Error);
  CHECK_THROWS_WITH_AS(save_safetensors(ok, {{"u", Tensor()}}, {}),
                       doctest::Contains("tensor 'u' is undefined"), lina::Error);
  CHECK(!fs::exists(ok));
}

TEST_CASE("safetensors: saving over an existing file replaces it, and a failed save keeps it") {
  TempDir dir("lina_safetensors");
  const std::string path = dir.file("ckpt.safetensors");
  save_safetensors(path, {{"w", Tensor::full({3}, 1.0)}}, {{"step", "1"}});
  save_safetensors(path, {{"w", Tensor::full({2, 2}, 2.0)}, {"b", Tensor::zeros({1})}},
                   {{"step", "2"}});
  SafetensorsFile second = load_safetensors(path);
  CHECK(second.metadata.at("step") == "2");
  CHECK(second.find("w")->shape() == Shape{2, 2});
  CHECK(second.find("w")->at(3) == 2.0);
  CHECK(dir.names() == std::vector<std::string>{"ckpt.safetensors"});

  // The disk fills up half way (tests/full_disk.h): the good file from
  // before must still be there, whole, and nothing else.
  {
    lina::test::FullDisk full(1000);
    CHECK_THROWS_WITH_AS(save_safetensors(path, {{"w", Tensor::full({5000}, 3.0)}}, {{"step", "3"}}),
                         doctest::Contains("File too large"), lina::Error);
  }
  CHECK(dir.names() == std::vector<std::string>{"ckpt.safetensors"});
  SafetensorsFile kept = load_safetensors(path);
  CHECK(kept.metadata.at("step") == "2");
  CHECK(kept.find("w")->shape() == Shape{2, 2});
}

TEST_CASE("safetensors: expect_tensor checks presence, shape and dtype") {
  TempDir dir("lina_safetensors");
  const std::string path = dir.file("ckpt.safetensors");
  save_safetensors(path, {{"emb", Tensor::zeros({5, 3})}, {"ids", Tensor::zeros({2}, DType::I32)}},
                   {});
  SafetensorsFile file = load_safetensors(path);
  CHECK(expect_tensor(file, "emb", {5, 3}, DType::F32).shape() == Shape{5, 3});
  CHECK_THROWS_WITH_AS(expect_tensor(file, "head", {3, 5}, DType::F32),
                       ("checkpoint " + path + ": tensor head is missing").c_str(), lina::Error);
  CHECK_THROWS_WITH_AS(expect_tensor(file, "emb", {3, 5}, DType::F32),
                       ("checkpoint " + path + ": tensor emb has shape [5, 3], expected [3, 5]")
                           .c_str(),
                       lina::Error);
  CHECK_THROWS_WITH_AS(expect_tensor(file, "ids", {2}, DType::F32),
                       doctest::Contains("tensor ids has dtype int32, expected float32"),
                       lina::Error);
}
