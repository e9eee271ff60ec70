// A full disk, simulated without mounting anything (the tests may run as
// root, so permissions would not stop a write): while a FileSizeLimit
// lives, this process's files cannot grow past `bytes`, and a write beyond
// fails with EFBIG (SIGXFSZ, which would kill the process, is ignored).
#ifndef RL_TESTING_FILE_SIZE_LIMIT_H_
#define RL_TESTING_FILE_SIZE_LIMIT_H_

#include <sys/resource.h>

#include <algorithm>
#include <csignal>

#include "gtest/gtest.h"

namespace rl {

class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &saved_);
    previous_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit limited = saved_;
    limited.rlim_cur = std::min(bytes, saved_.rlim_max);
    EXPECT_EQ(setrlimit(RLIMIT_FSIZE, &limited), 0);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, previous_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit saved_{};
  void (*previous_handler_)(int) = nullptr;
};

}  // namespace rl

#endif  // RL_TESTING_FILE_SIZE_LIMIT_H_
