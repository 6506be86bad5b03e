#include "experiments/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.h"

namespace lina {

namespace {

// Whether `fd` is still the file at `path`: the run that held the lock before
// may have removed it between our open and our flock, and a lock on a removed
// file keeps no one out.
bool still_there(int fd, const std::string& path) {
  struct stat held {}, named {};
  return ::fstat(fd, &held) == 0 && ::stat(path.c_str(), &named) == 0 && held.st_dev == named.st_dev &&
         held.st_ino == named.st_ino;
}

// The process id the holder wrote into the lock file, or "" when unreadable.
std::string holder_of(const std::string& path) {
  char text[32] = {};
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  const ssize_t n = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  std::string pid(text, n > 0 ? size_t(n) : 0);
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  return pid.find_first_not_of("0123456789") == std::string::npos ? pid : "";
}

// flock's errors on a filesystem that does not lock (Lustre mounted without
// -o flock: ENOSYS; some NFS: ENOLCK): the run goes on unprotected, with a note.
bool cannot_lock_here(int error) {
  return error == ENOSYS || error == ENOLCK || error == EOPNOTSUPP || error == EINVAL;
}

[[noreturn]] void refuse(const std::string& json_path, const std::string& lock_path) {
  const std::string pid = holder_of(lock_path);
  throw Error("another lina train" + (pid.empty() ? "" : " (process " + pid + ")") + " is writing " +
              json_path + " (it holds " + lock_path + "): wait for it to end, or give this run another --out");
}

}  // namespace

RunLock::RunLock(const std::string& json_path) : path_(json_path + ".lock") {
  for (;;) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) {
      const int error = errno;
      throw Error("cannot create the lock file " + path_ + ": " + std::strerror(error));
    }
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int error = errno;
      ::close(fd_);
      fd_ = -1;
      if (error == EWOULDBLOCK) refuse(json_path, path_);
      if (!cannot_lock_here(error)) throw Error("cannot lock " + path_ + ": " + std::strerror(error));
      std::fprintf(stderr, "lina: note: %s cannot be locked on this filesystem (%s): a second run of this json "
                   "would not be refused\n", path_.c_str(), std::strerror(error));
      ::unlink(path_.c_str());
      return;
    }
    if (still_there(fd_, path_)) break;
    ::close(fd_);  // locked a file that its holder had just removed: open the new one
  }
  // This process's id, for a refused run's message (the lock holds without it).
  const std::string pid = std::to_string(::getpid()) + "\n";
  const bool noted = ::ftruncate(fd_, 0) == 0 && ::write(fd_, pid.data(), pid.size()) == ssize_t(pid.size());
  (void)noted;
}

RunLock::~RunLock() {
  if (fd_ < 0) return;
  // Removed while still locked: a run that opened it meanwhile finds it gone
  // once it has the lock (still_there) and makes a new one.
  ::unlink(path_.c_str());
  ::close(fd_);
}

}  // namespace lina
