// core/atomic_file.h: the one way lina writes a file.
#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "tests/full_disk.h"
#include "tests/temp_dir.h"

using lina::test::TempDir;

namespace {
std::string read(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
}  // namespace

TEST_CASE("atomic file: writes, replaces, and leaves no temporary file") {
  TempDir dir("lina_atomic");
  const std::string path = dir.file("out.json");
  lina::write_file_atomically(path, "first\n");
  CHECK(read(path) == "first\n");
  const std::string a = "second ", b = "in two pieces\n";
  lina::write_file_atomically(path, {{a.data(), a.size()}, {b.data(), b.size()}});
  CHECK(read(path) == "second in two pieces\n");
  CHECK(dir.names() == std::vector<std::string>{"out.json"});
}

TEST_CASE("atomic file: a full disk keeps the old file whole and says why") {
  TempDir dir("lina_atomic");
  const std::string path = dir.file("run.json");
  lina::write_file_atomically(path, "the good one\n");
  {
    lina::test::FullDisk full(100);
    CHECK_THROWS_WITH_AS(lina::write_file_atomically(path, std::string(5000, 'x'), "run json"),
                         doctest::Contains(("cannot write run json " + path + ": File too large").c_str()),
                         lina::Error);
  }
  CHECK(read(path) == "the good one\n");
  CHECK(dir.names() == std::vector<std::string>{"run.json"});
}

TEST_CASE("atomic file: an empty path or a missing folder is a one-line error") {
  TempDir dir("lina_atomic");
  CHECK_THROWS_WITH_AS(lina::write_file_atomically("", "x"), doctest::Contains("the path is empty"), lina::Error);
  const std::string nowhere = dir.file("no/such/folder/f.json");
  CHECK_THROWS_WITH_AS(lina::write_file_atomically(nowhere, "x"),
                       doctest::Contains((nowhere + ": No such file or directory").c_str()), lina::Error);
  CHECK(dir.names().empty());
}

// Two writers of one path (two runs with the same --out) each write a whole
// file under a temporary name of their own: whichever renames last wins,
// and no reader ever sees a mixture.
TEST_CASE("atomic file: two writers of one path never mix their bytes") {
  TempDir dir("lina_atomic");
  const std::string path = dir.file("shared.json");
  const std::string one(200000, '1'), two(200000, '2');
  auto writer = [&](const std::string& text) {
    for (int i = 0; i < 20; ++i) lina::write_file_atomically(path, text);
  };
  std::thread first(writer, one), second(writer, two);
  first.join();
  second.join();
  const std::string got = read(path);
  CHECK((got == one || got == two));
  CHECK(dir.names() == std::vector<std::string>{"shared.json"});
}
