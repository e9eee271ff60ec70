// The process fixture with /bin/sh standing in for a project binary: a port
// file is waited for, a process that exits first fails the wait at once, and
// Stop ends a process with its signal.
#include "testing/process_fixture.h"

#include <signal.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest-spi.h"
#include "gtest/gtest.h"
#include "testing/wait_for.h"

namespace rl {
namespace {

using ::testing::ElementsAre;

class ProcessFixtureTest : public ProcessTest {};

TEST_F(ProcessFixtureTest, WaitsForThePortFileAndStops) {
  // A unique argument to find the process by (sleep adds its arguments up).
  const std::string marker = absl::StrCat("0.", getpid());
  Subprocess* child =
      Start("/bin/sh",
            {"-c", absl::StrCat("echo 4242 > ", Path("port"), ".tmp && mv ",
                                Path("port"), ".tmp ", Path("port"),
                                " && exec sleep 600 ", marker)},
            "sleep.log");
  EXPECT_EQ(WaitForPort(*child, Path("port")), 4242);
  EXPECT_TRUE(child->running());
  // Found once it runs sleep (after the port file, so waited for).
  std::vector<pid_t> found;
  EXPECT_TRUE(WaitFor(
      [&] {
        found = FindProcesses({"600", marker});
        return !found.empty();
      },
      absl::Seconds(60)));
  EXPECT_EQ(found.size(), 1u);
  EXPECT_EQ(Stop(*child), std::optional<int>(128 + SIGTERM));
  EXPECT_THAT(FindProcesses({"600", marker}), ElementsAre());
}

TEST_F(ProcessFixtureTest, AProcessThatExitsFailsTheWaitAtOnce) {
  Subprocess* child = Start("/bin/sh", {"-c", "echo oops; exit 3"});
  const absl::Time start = absl::Now();
  int port = -1;
  EXPECT_NONFATAL_FAILURE(
      port = WaitForPort(*child, Path("never"), absl::Seconds(300)),
      "the process exited");
  EXPECT_EQ(port, 0);
  EXPECT_LT(absl::Now() - start, absl::Seconds(120));
  EXPECT_EQ(child->Wait(absl::ZeroDuration()), std::optional<int>(3));
  EXPECT_EQ(child->Log(), "oops\n");
}

}  // namespace
}  // namespace rl
