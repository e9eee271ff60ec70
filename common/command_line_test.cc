#include "common/command_line.h"

#include <sys/wait.h>

#include <vector>

#include "absl/flags/flag.h"
#include "gtest/gtest.h"

ABSL_FLAG(int, answer, 0, "A flag of this test.");

namespace rl {
namespace {

int Parse(std::vector<const char*> args) {
  args.insert(args.begin(), "prog");
  ParseCommandLineOrExit(static_cast<int>(args.size()),
                         const_cast<char**>(args.data()), "prog [flags]");
  return absl::GetFlag(FLAGS_answer);
}

TEST(CommandLineTest, ParsesGoodFlags) {
  EXPECT_EQ(Parse({"--answer=42"}), 42);
  EXPECT_EQ(Parse({"--answer", "7"}), 7);
}

TEST(CommandLineTest, BadFlagsExitWithTwo) {
  EXPECT_EXIT(Parse({"--no_such_flag=1"}), ::testing::ExitedWithCode(2),
              "error: unknown flag --no_such_flag");
  EXPECT_EXIT(Parse({"--answer=many"}), ::testing::ExitedWithCode(2),
              "error: --answer: ");
  EXPECT_EXIT(Parse({"--answer"}), ::testing::ExitedWithCode(2),
              "error: --answer: missing value");
  EXPECT_EXIT(Parse({"stray"}), ::testing::ExitedWithCode(2),
              "error: unexpected argument \"stray\"");
}

// absl's usage flags are not "unknown flags" (exit 2): absl prints the
// usage (to stdout) and exits by its own rule.
TEST(CommandLineTest, HelpIsNotAnUnknownFlag) {
  EXPECT_EXIT(
      Parse({"--help"}),
      [](int status) { return WIFEXITED(status) && WEXITSTATUS(status) != 2; },
      "");
}

TEST(CommandLineTest, ExitCodes) {
  EXPECT_EQ(ExitCode(absl::OkStatus()), 0);
  EXPECT_EQ(ExitCode(absl::InvalidArgumentError("run.yaml: env.id")), 2);
  EXPECT_EQ(ExitCode(absl::UnavailableError("port taken")), 1);
  EXPECT_EQ(ExitCode(absl::InternalError("NaN")), 1);
}

}  // namespace
}  // namespace rl
