#include "bench/bench_files.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "testing/temp_dir.h"

namespace rl {
namespace {

namespace fs = std::filesystem;

// Runs in another working directory and restores the test's own after.
class BenchFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    home_ = fs::current_path();
    elsewhere_ = MakeTestDir("elsewhere");
    fs::current_path(elsewhere_);
  }
  void TearDown() override {
    fs::current_path(home_);
    unsetenv("BUILD_WORKING_DIRECTORY");
  }

  fs::path home_;
  std::string elsewhere_;
};

TEST_F(BenchFilesTest, AbsolutePathIsKept) {
  EXPECT_EQ(BenchFilePath("/no/such/file.yaml"), "/no/such/file.yaml");
}

// As from bazel-bin in any directory: the bench's data dependency is found
// in its runfiles tree.
TEST_F(BenchFilesTest, DataDependencyIsFoundInTheRunfiles) {
  const std::string path = BenchFilePath("examples/cartpole.yaml");
  EXPECT_TRUE(fs::path(path).is_absolute()) << path;
  EXPECT_TRUE(fs::is_regular_file(path)) << path;
  EXPECT_EQ(ReadTestFile(path),
            ReadTestFile((home_ / "examples/cartpole.yaml").string()));
}

TEST_F(BenchFilesTest, WorkingDirectoryComesBeforeTheRunfiles) {
  fs::create_directories("examples");
  std::ofstream("examples/cartpole.yaml") << "mine";
  EXPECT_EQ(ReadTestFile(BenchFilePath("examples/cartpole.yaml")), "mine");
}

// As under `bazel run`: a path typed on the command line is relative to
// where bazel was run.
TEST_F(BenchFilesTest, BazelRunsWorkingDirectoryComesFirst) {
  const std::string typed_in = MakeTestDir("typed_in");
  fs::create_directories(fs::path(typed_in) / "examples");
  std::ofstream(fs::path(typed_in) / "examples/cartpole.yaml") << "typed";
  setenv("BUILD_WORKING_DIRECTORY", typed_in.c_str(), 1);
  EXPECT_EQ(ReadTestFile(BenchFilePath("examples/cartpole.yaml")), "typed");
}

TEST_F(BenchFilesTest, MissingFileIsReturnedAsGiven) {
  EXPECT_EQ(BenchFilePath("examples/no_such_run.yaml"),
            "examples/no_such_run.yaml");
}

}  // namespace
}  // namespace rl
