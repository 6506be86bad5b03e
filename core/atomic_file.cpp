#include "core/atomic_file.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.h"

namespace lina {

std::string temporary_path_beside(const std::string& path) {
  static std::atomic<unsigned> calls{0};
  return path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(calls++);
}

namespace {

// Writes every piece to `tmp` and flushes it to the disk; returns 0 or errno.
int write_and_sync(const std::string& tmp, const std::vector<Bytes>& pieces) {
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return errno ? errno : EIO;
  bool ok = true;
  for (const Bytes& piece : pieces)
    if (ok && piece.size > 0) ok = std::fwrite(piece.data, 1, piece.size, f) == piece.size;
  ok = ok && std::fflush(f) == 0 && ::fsync(fileno(f)) == 0;
  int error = ok ? 0 : (errno ? errno : EIO);
  if (std::fclose(f) != 0 && ok) error = errno ? errno : EIO;
  return error;
}

}  // namespace

void write_file_atomically(const std::string& path, const std::vector<Bytes>& pieces,
                           const std::string& what) {
  check(!path.empty(), "cannot write " + what + ": the path is empty");
  const std::string tmp = temporary_path_beside(path);
  errno = 0;
  int error = write_and_sync(tmp, pieces);
  if (error == 0 && std::rename(tmp.c_str(), path.c_str()) != 0) error = errno ? errno : EIO;
  if (error != 0) {
    std::remove(tmp.c_str());
    throw Error("cannot write " + what + " " + path + ": " + std::strerror(error));
  }
}

void write_file_atomically(const std::string& path, const std::string& text, const std::string& what) {
  write_file_atomically(path, std::vector<Bytes>{{text.data(), text.size()}}, what);
}

}  // namespace lina
