// Child processes (the project's binaries) with their
// output in a log file, signals, and waits with deadlines.
#ifndef RL_COMMON_SUBPROCESS_H_
#define RL_COMMON_SUBPROCESS_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace rl {

class Subprocess {
 public:
  // Starts `argv` (argv[0] is the program path) with stdout and stderr
  // appended to `log_path`. Aborts the process if fork fails.
  // With `die_with_parent`, the child gets SIGTERM when this process dies
  // (even by SIGKILL), so no orphan outlives its supervisor.
  // `env` ("NAME=VALUE") is set in the child's environment, over what it
  // inherits.
  Subprocess(std::vector<std::string> argv, std::string log_path,
             bool die_with_parent = false, std::vector<std::string> env = {});
  ~Subprocess();  // SIGKILLs a process still running.

  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  void Signal(int signal);
  // The exit code (128+N when killed by signal N), or nullopt if the process
  // is still running at the deadline.
  std::optional<int> Wait(absl::Duration timeout);
  bool running();
  const std::string& log_path() const { return log_path_; }
  // The log so far (for failure messages).
  std::string Log() const;

 private:
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
  std::string log_path_;
};

// Waits until `path` exists and is non-empty; returns its contents.
std::optional<std::string> WaitForFile(const std::string& path,
                                       absl::Duration timeout);

}  // namespace rl

#endif  // RL_COMMON_SUBPROCESS_H_
