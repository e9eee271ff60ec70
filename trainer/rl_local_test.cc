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
#include "policy/compute_device.h"
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

// A resume passes over a checkpoint a crash damaged (with a warning) and
// goes on from the one before; --resume=false refuses a run directory that
// holds an earlier run's checkpoints (the new run's would be pruned
// against them).
TEST_F(RlLocalTest, ResumesPastADamagedCheckpointAndFreshRunsNeedAFreshDir) {
  const std::string run = WriteRunFile(std::string(kSmallRun) +
                                       "checkpoint_interval: 1\n"
                                       "keep_checkpoints: 3\n");
  const Result first = Run("train --run=" + run + " " + RunDirFlag());
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  const fs::path checkpoints = dir_ / "run_dir" / "checkpoints";
  fs::resize_file(checkpoints / "ckpt-000000000002" / "policy.pt", 64);
  const std::string longer =
      WriteRunFile(std::string(kSmallRun).replace(
                       std::string(kSmallRun).find("128"), 3, "192") +
                   "checkpoint_interval: 1\nkeep_checkpoints: 3\n");
  const Result resumed = Run("train --run=" + longer + " " + RunDirFlag());
  EXPECT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  EXPECT_THAT(resumed.out + resumed.err,
              HasSubstr("ckpt-000000000002 is damaged: policy.pt does not "
                        "read"));
  EXPECT_THAT(resumed.out, HasSubstr("ckpt-000000000001 at 64 steps"));
  EXPECT_THAT(resumed.out, HasSubstr("finished after 192 steps"));
  const Result fresh =
      Run("train --run=" + run + " " + RunDirFlag() + " --resume=false");
  EXPECT_EQ(fresh.exit_code, 2) << fresh.out << fresh.err;  // bad input
  EXPECT_THAT(fresh.err, HasSubstr("holds the checkpoints of an earlier run"));
}

// env.call_timeout_s ended only actor workers: rl_local logged the overrun
// and waited for ever on a plugin whose step hung, though the run file's
// docs promised exit status 75. It now ends, naming the call.
TEST_F(RlLocalTest, AHungEnvironmentCallEndsItNamingTheCall) {
  const std::string run = WriteRunFile(
      "env: {id: Probe-v0, plugin: envs/testdata/libtest_plugin.so,\n"
      "      observation_size: 3, num_discrete_actions: 2,\n"
      "      kwargs: {mode: hang, fail_at: 2}, call_timeout_s: 1}\n"
      "envs_per_actor: 4\nsegment_length: 8\ntotal_env_steps: 64\n");
  const Result train = Run("train --run=" + run + " " + RunDirFlag());
  EXPECT_EQ(train.exit_code, 75) << train.err;
  EXPECT_THAT(train.err, HasSubstr("environment call step of environment "
                                   "plugin"));
  EXPECT_THAT(train.err, HasSubstr("did not return within 1 s"));
}

// rl_local trains with one actor and one learner: the service's settings
// of a run file (more actors, a gang, ASYNC) were passed over without a
// word, though an update here learns from a smaller batch. It says so.
TEST_F(RlLocalTest, SaysWhichOfTheServicesSettingsItDoesNotUse) {
  const std::string run = WriteRunFile(
      std::string(kSmallRun) +
      "resources: {num_actors: 2}\nsync_mode: ASYNC\nmax_policy_lag: 2\n");
  const Result train = Run("train --run=" + run + " " + RunDirFlag());
  EXPECT_EQ(train.exit_code, 0) << train.err;
  EXPECT_THAT(train.out, HasSubstr("the service's settings are not used here: "
                                   "resources.num_actors 2"));
  EXPECT_THAT(train.out, HasSubstr("sync_mode ASYNC, max_policy_lag 2"));
  const Result plain = Run("train --run=" + WriteRunFile(kSmallRun) +
                           " --run_dir=" + (dir_ / "plain").string());
  EXPECT_THAT(plain.out, Not(HasSubstr("service's settings")));
}

// --profile=N: a Chrome trace of the first N updates, LibTorch's operators
// of the collection and the update in it.
TEST_F(RlLocalTest, ProfileWritesAChromeTraceOfTheFirstUpdates) {
  const std::string run = WriteRunFile(kSmallRun);
  const Result train =
      Run("train --run=" + run + " " + RunDirFlag() + " --profile=1");
  EXPECT_EQ(train.exit_code, 0) << train.out << train.err;
  const std::string trace = ReadFile(dir_ / "run_dir" / "profile.json");
  EXPECT_THAT(trace, HasSubstr("\"traceEvents\""));
  EXPECT_THAT(trace, HasSubstr("aten::"));
  const Result bad = Run("train --run=" + run + " --profile=-1");
  EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
  EXPECT_THAT(bad.err, HasSubstr("--profile: must be >= 0"));
}

// The exported file plays as the checkpoint it came from: the same mean
// return over the same seeded episodes. Its sidecar names its inputs.
TEST_F(RlLocalTest, AnExportedPolicyPlaysAsItsCheckpoint) {
  const std::string run = WriteRunFile(kSmallRun);
  ASSERT_EQ(Run("train --run=" + run + " " + RunDirFlag()).exit_code, 0);
  const std::string file = (dir_ / "cartpole.pt").string();
  const Result exported =
      Run("export --run=" + run +
          " --checkpoint=" + (dir_ / "run_dir").string() + " --output=" + file);
  EXPECT_EQ(exported.exit_code, 0) << exported.out << exported.err;
  EXPECT_THAT(ReadFile(file + ".json"),
              HasSubstr("\"name\": \"obs\", \"dtype\": \"float32\", "
                        "\"shape\": [\"B\", 4]"));
  const Result from_checkpoint =
      Run("eval --run=" + run +
          " --episodes=5 --checkpoint=" + (dir_ / "run_dir").string());
  const Result from_file =
      Run("eval --run=" + run + " --episodes=5 --policy=" + file);
  EXPECT_EQ(from_file.exit_code, 0) << from_file.out << from_file.err;
  EXPECT_EQ(from_checkpoint.exit_code, 0) << from_checkpoint.err;
  auto mean = [](const std::string& out) {
    const size_t at = out.find("mean return");
    return at == std::string::npos ? "(none) " + out : out.substr(at, 30);
  };
  EXPECT_EQ(mean(from_file.out), mean(from_checkpoint.out));
  EXPECT_THAT(mean(from_file.out), HasSubstr("mean return"));
  // What is wrong is named.
  // ONNX too (onnxruntime runs such files in //policy:onnx_export_test).
  const std::string onnx_file = (dir_ / "policy.onnx").string();
  const Result onnx = Run("export --run=" + run +
                          " --checkpoint=" + (dir_ / "run_dir").string() +
                          " --output=" + onnx_file + " --format=onnx");
  EXPECT_EQ(onnx.exit_code, 0) << onnx.err;
  EXPECT_THAT(ReadFile(onnx_file + ".json"), HasSubstr("\"format\": \"onnx\""));
  EXPECT_GT(std::filesystem::file_size(onnx_file), 1000u);
  const Result tflite = Run("export --run=" + run +
                            " --checkpoint=" + (dir_ / "run_dir").string() +
                            " --output=" + file + " --format=tflite");
  EXPECT_EQ(tflite.exit_code, 2);
  EXPECT_THAT(tflite.err, HasSubstr("--format: must be torchscript or onnx"));
  const Result no_policy =
      Run("eval --run=" + run + " --policy=" + (dir_ / "none.pt").string());
  EXPECT_EQ(no_policy.exit_code, 2) << no_policy.err;
  EXPECT_THAT(no_policy.err, HasSubstr("not a TorchScript module"));
  // Issue 46: an ONNX file given to eval is a one-line error, no C++
  // backtrace of LibTorch's.
  const Result given_onnx = Run("eval --run=" + run + " --policy=" + onnx_file);
  EXPECT_EQ(given_onnx.exit_code, 2) << given_onnx.err;
  EXPECT_THAT(given_onnx.err, HasSubstr("not a TorchScript module"));
  EXPECT_THAT(given_onnx.err, Not(HasSubstr("frame #")));
  const Result both = Run("eval --run=" + run + " --policy=" + file +
                          " --checkpoint=" + (dir_ / "run_dir").string());
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_THAT(both.err, HasSubstr("give one"));
  const Result stray = Run("train --run=" + run + " --output=" + file);
  EXPECT_EQ(stray.exit_code, 2);
  EXPECT_THAT(stray.err, HasSubstr("are export's flags"));
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

  // Flags and files as every other binary: exit 2 (absl alone exits 1).
  const Result flag = Run("train --run=" + run + " --no_such_flag=1");
  EXPECT_EQ(flag.exit_code, 2) << flag.err;
  EXPECT_THAT(flag.err, HasSubstr("error: unknown flag --no_such_flag"));
  const Result missing = Run("train --run=" + (dir_ / "missing.yaml").string() +
                             " " + RunDirFlag());
  EXPECT_EQ(missing.exit_code, 2) << missing.err;
  EXPECT_THAT(missing.err, HasSubstr("cannot read run file"));
  const Result extra = Run("train eval --run=" + run);
  EXPECT_EQ(extra.exit_code, 2) << extra.err;
  EXPECT_THAT(extra.err, HasSubstr("unexpected argument \"eval\""));
}

// --help prints the usage and rl_local's flags, exit 0 (absl printed "No
// flags matched." and exited 1).
TEST_F(RlLocalTest, HelpListsTheFlags) {
  const Result help = Run("--help");
  EXPECT_EQ(help.exit_code, 0) << help.err;
  EXPECT_THAT(help.out, HasSubstr("usage: rl_local train|eval"));
  EXPECT_THAT(help.out, HasSubstr("--run (default: \"\")"));
  EXPECT_THAT(help.out, HasSubstr("--episodes (default: 100)"));
  EXPECT_THAT(help.out, Not(HasSubstr("No flags matched")));
}

// The coordinator's admission, locally: a run whose segments could never be
// held is bad input (exit 2 naming the fields), not a LibTorch abort trying
// to allocate a terabyte.
TEST_F(RlLocalTest, ARunTooBigForTheMachineExits2) {
  const std::string run = WriteRunFile(
      "env: {id: CartPole-v1}\nenvs_per_actor: 1048576\n"
      "segment_length: 65536\nppo: {num_minibatches: 1}\n");
  const Result train = Run("train --run=" + run + " " + RunDirFlag());
  EXPECT_EQ(train.exit_code, 2) << train.out << train.err;
  EXPECT_THAT(train.err, HasSubstr("envs_per_actor x segment_length"));
  EXPECT_THAT(train.err, HasSubstr("message limit"));
  EXPECT_FALSE(fs::exists(dir_ / "run_dir" / "checkpoints"));
}

// rl_local computes on the CPU: a run asking for CUDA is refused (exit 2,
// naming the field), never trained on the CPU instead.
// Where no CUDA device is visible, refused (never trained on the CPU
// instead); on a GPU machine it trains (after its self-check).
TEST_F(RlLocalTest, ACudaRunIsRefusedNotRunOnTheCpu) {
  const std::string run = WriteRunFile(std::string(kSmallRun) +
                                       "resources: {learner_device: cuda}\n");
  const Result train = Run("train --run=" + run + " " + RunDirFlag());
  if (!VisibleCudaDevices().empty()) {
    EXPECT_EQ(train.exit_code, 0) << train.out << train.err;
    return;
  }
  EXPECT_EQ(train.exit_code, 2) << train.out << train.err;
  EXPECT_THAT(train.err, HasSubstr("resources.learner_device: \"cuda\""));
  EXPECT_THAT(train.err, HasSubstr("refuses rather than run on the CPU"));
  EXPECT_THAT(train.out, Not(HasSubstr("mean return")));
}

}  // namespace
}  // namespace rl
