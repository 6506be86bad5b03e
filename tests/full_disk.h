// A full disk, for one scope: files this process writes may grow to `bytes`
// and no further (RLIMIT_FSIZE; the write then fails with EFBIG, "File too
// large", instead of raising SIGXFSZ). Works without root and without a disk
// to fill.
#pragma once
#include <sys/resource.h>

#include <csignal>

namespace lina::test {

struct FullDisk {
  rlimit before{};
  void (*handler_before)(int) = nullptr;
  explicit FullDisk(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &before);
    handler_before = std::signal(SIGXFSZ, SIG_IGN);
    rlimit limited = before;
    limited.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &limited);
  }
  ~FullDisk() {
    setrlimit(RLIMIT_FSIZE, &before);
    std::signal(SIGXFSZ, handler_before);
  }
  FullDisk(const FullDisk&) = delete;
  FullDisk& operator=(const FullDisk&) = delete;
};

}  // namespace lina::test
