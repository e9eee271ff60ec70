// A GoogleTest fixture for tests that run the project's binaries as real
// processes (tests/): a directory per test, binaries started from their
// runfiles path with their output in a log file there, port files waited
// for with a deadline, processes stopped with SIGTERM and then SIGKILL (and
// sent SIGTERM if the test process dies first, even by a crash), and
// every process's log printed when the test failed.
//
//   class LearnerTest : public ProcessTest {};
//   TEST_F(LearnerTest, Serves) {
//     Subprocess* learner = Start("learner/learner_main",
//                                 {"--port=0", "--port_file=" + Path("port")});
//     const int port = WaitForPort(*learner, Path("port"));
//     ASSERT_GT(port, 0);
//     ...
//     EXPECT_EQ(Stop(*learner), 0);
//   }
#ifndef RL_TESTING_PROCESS_FIXTURE_H_
#define RL_TESTING_PROCESS_FIXTURE_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/subprocess.h"
#include "gtest/gtest.h"

namespace rl {

// `binary` ("learner/learner_main") as a path in the test's runfiles; an
// absolute path as it is.
std::string RunfilesPath(absl::string_view binary);

// Pids of the running processes whose command line has every one of `args`
// as a whole argument (e.g. {"--worker_name=local-actor-0"}).
std::vector<pid_t> FindProcesses(const std::vector<std::string>& args);

class ProcessTest : public ::testing::Test {
 protected:
  void SetUp() override;
  // Stops what is still running (SIGTERM, then SIGKILL); prints every
  // process's log if the test failed.
  void TearDown() override;

  // `name` in this test's directory (made fresh by SetUp).
  std::string Path(absl::string_view name) const;

  // Starts the project binary `binary` (runfiles-relative) with `args`; its
  // stdout and stderr are appended to Path(log_name) (default: the binary's
  // base name and a number, "learner_main.1.log"). The fixture owns it.
  Subprocess* Start(absl::string_view binary, std::vector<std::string> args,
                    std::string log_name = "");

  // The port `process` wrote to `port_file`; 0 (and a test failure naming
  // the log) if the file did not appear within `timeout` or the process
  // exited first.
  int WaitForPort(Subprocess& process, const std::string& port_file,
                  absl::Duration timeout = absl::Seconds(120));

  // Sends `signal`; after `grace` without an exit, SIGKILL. The exit code
  // (128+N for signal N), nullopt if even SIGKILL did not end it.
  std::optional<int> Stop(Subprocess& process, int signal = SIGTERM,
                          absl::Duration grace = absl::Seconds(30));

 private:
  std::string dir_;
  std::vector<std::unique_ptr<Subprocess>> processes_;
};

}  // namespace rl

#endif  // RL_TESTING_PROCESS_FIXTURE_H_
