// Checkpoints in the safetensors format, so any safetensors reader can open
// them:
//
//   [8 bytes]  N, the header length, unsigned little-endian
//   [N bytes]  JSON header, padded with spaces to a multiple of 8 bytes:
//              {"__metadata__": {"key": "value", ...},
//               "name": {"dtype": "F32", "shape": [64, 128],
//                        "data_offsets": [begin, end]}, ...}
//   [rest]     the data section: each tensor's raw little-endian bytes at
//              [begin, end), offsets counted from the start of this section.
//
// lina reads and writes the dtypes F32, F64 and I32. A file that breaks any
// rule of the format is rejected with a one-line lina::Error naming the file
// and the problem, never loaded half-way.
#pragma once
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace lina {

// Writes `tensors` (on any device; copied to the host) and string `metadata`
// to `path`, atomically (core/atomic_file.h): a failure never leaves a
// partial file where a good one was.
// Tensor names must be distinct, non-empty and not "__metadata__".
void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

struct SafetensorsFile {
  std::string path;
  std::map<std::string, std::string> metadata;
  // Host tensors in the order of their data in the file.
  std::vector<std::pair<std::string, Tensor>> tensors;

  // The tensor called `name`, or nullptr.
  const Tensor* find(const std::string& name) const;
};

// Reads and validates the whole file; throws lina::Error
// "checkpoint <path>: <problem>" on any defect.
SafetensorsFile load_safetensors(const std::string& path);
// The same from the file's bytes in memory (`path` names it in errors).
// Every size in the header is checked against bytes.size() before anything
// is allocated from it. Messages quote the file's content only through
// printable() (core/printable.h).
SafetensorsFile parse_safetensors(std::string_view bytes, const std::string& path);

// The tensor `name` of `file`, checked to have `shape` and `dtype`; throws
// "checkpoint <path>: tensor <name> is missing" or "... has shape [..],
// expected [..]" (or the dtype equivalent).
Tensor expect_tensor(const SafetensorsFile& file, const std::string& name, const Shape& shape,
                     DType dtype = DType::F32);

}  // namespace lina
