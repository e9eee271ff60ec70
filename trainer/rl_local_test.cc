// rl_local as a user runs it: exit codes (0 done, 1 failed run, 2 bad input,
// 3 budget used without reaching the target) and the error on stderr.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"

namespace rl {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kRlLocal[] = "trainer/rl_local";

// CartPole, 4 envs x 16 steps per update: each run is a few updates.
constexpr char kSmallRun[] = R"(env: {id: CartPole-v1}
envs_per_actor: 4
segment_length: 16
total_env_steps: 128
seed: 3
)";

struct Result {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class RlLocalTest : public testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTestDir(); }

  std::string WriteRunFile(const std::string& text) {
    const fs::path path = dir_ / "run.yaml";
    std::ofstream(path) << text;
    return path.string();
  }

  // Runs rl_local with `args`, stdout and stderr kept apart.
  Result Run(const std::string& args) {
    const fs::path out = dir_ / "stdout", err = dir_ / "stderr";
    fs::remove(out);
    fs::remove(err);
    Subprocess process({"/bin/sh", "-c",
                        std::string("exec ") + kRlLocal + " " + args +
                            " --progress=false 2>" + err.string()},
                       out.string());
    Result result;
    const std::optional<int> code = process.Wait(absl::Seconds(120));
    EXPECT_TRUE(code.has_value()) << "rl_local did not finish";
    result.exit_code = code.value_or(-1);
    result.out = ReadFile(out);
    result.err = ReadFile(err);
    return result;
  }

  std::string RunDirFlag() const {
    return "--run_dir=" + (dir_ / "run_dir").string();
  }

  fs::path dir_;
};

TEST_F(RlLocalTest, FinishesTheBudgetAndEvaluatesTheCheckpoint) {
  const std::string run = WriteRunFile(kSmallRun);
  const Result train = Run("train --run=" + run + " " + RunDirFlag());
  EXPECT_EQ(train.exit_code, 0) << train.out << train.err;
  EXPECT_THAT(train.out, HasSubstr("finished after 128 steps"));
  EXPECT_EQ(train.err, "");

  const Result eval = Run("eval --run=" + run + " --episodes=3 --checkpoint=" +
                          (dir_ / "run_dir").string());
  EXPECT_EQ(eval.exit_code, 0) << eval.out << eval.err;
  EXPECT_THAT(eval.out, HasSubstr("over 3 episodes"));
}

TEST_F(RlLocalTest, BudgetUsedWithoutReachingTheTargetExits3) {
  const std::string run =
      WriteRunFile(std::string(kSmallRun) + "target_return: 10000\n");
  const Result train = Run("train --run=" + run + " " + RunDirFlag());
  EXPECT_EQ(train.exit_code, 3) << train.out << train.err;
  EXPECT_THAT(train.out, HasSubstr("NOT solved after 128 steps"));
}

// A loss that overflows float (value_coef 1e38 is a valid value) makes the
// first update non-finite: the run fails with the updater's message, exit
// code 1, not an abort (134) and not "bad input" (2).
TEST_F(RlLocalTest, ADivergingUpdateExits1WithTheMessageOnStderr) {
  const std::string run =
      WriteRunFile(std::string(kSmallRun) + "ppo: {value_coef: 1.0e+38}\n");
  const Result train = Run("train --run=" + run + " " + RunDirFlag());
  EXPECT_EQ(train.exit_code, 1) << train.out << train.err;
  EXPECT_THAT(train.err, HasSubstr("error: update 1 (after 0 steps): PPO "
                                   "update: the loss or gradient was not "
                                   "finite"));
  EXPECT_THAT(train.out, Not(HasSubstr("error")));
  EXPECT_FALSE(fs::exists(dir_ / "run_dir" / "checkpoints"));
}

TEST_F(RlLocalTest, BadInputExits2NamingTheProblem) {
  const std::string run =
      WriteRunFile(std::string(kSmallRun) + "ppo: {learning_rate: 5}\n");
  const Result field = Run("train --run=" + run + " " + RunDirFlag());
  EXPECT_EQ(field.exit_code, 2) << field.out << field.err;
  EXPECT_THAT(field.err, HasSubstr("ppo.learning_rate"));

  const Result no_run = Run("train " + RunDirFlag());
  EXPECT_EQ(no_run.exit_code, 2);
  EXPECT_THAT(no_run.err, HasSubstr("error: a run file is required (--run)"));

  const Result mode = Run("fly --run=" + run);
  EXPECT_EQ(mode.exit_code, 2);
  EXPECT_THAT(mode.err, HasSubstr("usage: rl_local train|eval"));
}

// rl_local computes on the CPU: a run asking for CUDA is refused (exit 2,
// naming the field), never trained on the CPU instead.
TEST_F(RlLocalTest, ACudaRunIsRefusedNotRunOnTheCpu) {
  const std::string run = WriteRunFile(std::string(kSmallRun) +
                                       "resources: {learner_device: cuda}\n");
  const Result train = Run("train --run=" + run + " " + RunDirFlag());
  EXPECT_EQ(train.exit_code, 2) << train.out << train.err;
  EXPECT_THAT(train.err, HasSubstr("resources.learner_device: \"cuda\""));
  EXPECT_THAT(train.err, HasSubstr("refuses rather than run on the CPU"));
  EXPECT_THAT(train.out, Not(HasSubstr("mean return")));
}

}  // namespace
}  // namespace rl
