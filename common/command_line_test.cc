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

// --help prints the usage and this program's flags (absl alone printed
// "No flags matched." for binaries whose main is not <name>.cc, and exited
// 1) and exits 0.
TEST(CommandLineTest, HelpExitsZero) {
  for (const char* help : {"--help", "-h"}) {
    EXPECT_EXIT(
        {
          Parse({"--answer=3", help});
          std::exit(9);
        },
        ::testing::ExitedWithCode(0), "")
        << help;
  }
}

TEST(CommandLineTest, PositionalArgumentsUpToTheLimit) {
  std::vector<const char*> args = {"prog", "train", "--answer=5"};
  EXPECT_EQ(ParseCommandLineOrExit(3, const_cast<char**>(args.data()), "u", 1),
            std::vector<std::string>{"train"});
  EXPECT_EQ(absl::GetFlag(FLAGS_answer), 5);
  args = {"prog", "train", "more"};
  EXPECT_EXIT(
      ParseCommandLineOrExit(3, const_cast<char**>(args.data()), "u", 1),
      ::testing::ExitedWithCode(2), "error: unexpected argument \"more\"");
}

TEST(CommandLineTest, ExitCodes) {
  EXPECT_EQ(ExitCode(absl::OkStatus()), 0);
  EXPECT_EQ(ExitCode(absl::InvalidArgumentError("run.yaml: env.id")), 2);
  EXPECT_EQ(ExitCode(absl::UnavailableError("port taken")), 1);
  EXPECT_EQ(ExitCode(absl::InternalError("NaN")), 1);
}

}  // namespace
}  // namespace rl
