// One `lina train` per run: two runs that would write the same run json (the
// same --out and run name, or the same checkpoint resumed twice) would each
// rename their files over the other's, and both exit 0. A RunLock is a lock
// file beside the run's json (`<json>.lock`, flock'd) held for the run's
// life; the second run refuses at once with one line naming the first.
#pragma once
#include <string>

namespace lina {

class RunLock {
 public:
  // Takes the lock of the run whose json is `json_path` (its folder must
  // exist), or throws lina::Error when another process holds it. On a
  // filesystem that cannot lock, the run goes on without, and says so.
  explicit RunLock(const std::string& json_path);
  // Removes the lock file, then lets go of the lock. A run that is killed
  // (SIGKILL) leaves the file behind, unlocked: the next run takes it.
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace lina
