// One owner at a time for a file (a store): an exclusive advisory lock
// (flock) on "<path>.lock", which names its holder. The lock goes with the
// holder's process (also when it is killed), so a crash leaves no stale
// lock behind.
#ifndef RL_COMMON_FILE_LOCK_H_
#define RL_COMMON_FILE_LOCK_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rl {

class FileLock {
 public:
  // Takes the lock of `path` and writes `holder` (e.g. "coordinator pid 42
  // on 127.0.0.1:50051") into "<path>.lock". FAILED_PRECONDITION naming
  // the file and what its holder wrote when another process holds it;
  // another error when the lock file cannot be made.
  static absl::StatusOr<FileLock> Acquire(const std::string& path,
                                          absl::string_view holder);

  // Updates what the lock file says of its holder (e.g. once its port is
  // known).
  absl::Status SetHolder(absl::string_view holder);

  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();  // Releases the lock.

 private:
  FileLock(int fd, std::string lock_path)
      : fd_(fd), lock_path_(std::move(lock_path)) {}
  int fd_ = -1;
  std::string lock_path_;
};

}  // namespace rl

#endif  // RL_COMMON_FILE_LOCK_H_
