// lina::Error — every user-facing failure (bad shape, wrong dtype, bad file,
// CUDA without a GPU) is thrown as one of these with a one-line message.
#pragma once
#include <stdexcept>
#include <string>

namespace lina {

struct Error : std::runtime_error {
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// check(cond, message): throw lina::Error(message) when cond is false.
inline void check(bool cond, const std::string& message) {
  if (!cond) throw Error(message);
}

}  // namespace lina
