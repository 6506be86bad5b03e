#pragma once
// Every file lina writes goes through here: a reader (or a crash, or a full
// disk) sees the old file or the whole new one, never part of either.
//
// The bytes go to a temporary file beside `path` whose name is unique to
// this process and call (`path.tmp.<pid>.<n>`, so two runs writing the same
// path never share one), are flushed to the disk (fsync), and the temporary
// file is renamed over `path`. On any failure the temporary file is removed,
// `path` is left as it was, and lina::Error says which file and why (errno).
#include <cstddef>
#include <string>
#include <vector>

namespace lina {

struct Bytes {
  const void* data;
  size_t size;
};

// `pieces` written one after another; `what` names the file in an error
// ("checkpoint", "run json", ...).
void write_file_atomically(const std::string& path, const std::vector<Bytes>& pieces,
                           const std::string& what = "file");
void write_file_atomically(const std::string& path, const std::string& text,
                           const std::string& what = "file");

// A name for a temporary file beside `path`, unique to this process and call
// (`path.tmp.<pid>.<n>`): what a writer that cannot use the functions above
// (another program writing the file, say) renames over `path` when it is done.
std::string temporary_path_beside(const std::string& path);

}  // namespace lina
