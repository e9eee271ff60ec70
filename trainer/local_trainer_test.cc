#include "trainer/local_trainer.h"

#include <torch/utils.h>

#include <filesystem>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "learner/checkpoint.h"
#include "policy/actor_critic.h"
#include "runspec/run_footprint.h"
#include "runspec/run_spec.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace rl {
namespace {

namespace fs = std::filesystem;

RunSpec SmallRun(const std::string& env_yaml) {
  auto spec = LoadRunSpec(env_yaml + R"(
envs_per_actor: 4
segment_length: 16
total_env_steps: 100000
seed: 7
ppo: {num_minibatches: 2, num_epochs: 2, normalize_observations: true, normalize_rewards: true}
)",
                          RunFileFormat::kYaml);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

void ExpectSameParameters(LocalTrainer& a, LocalTrainer& b) {
  const auto pa = a.policy()->named_parameters();
  const auto pb = b.policy()->named_parameters();
  for (const auto& item : pa) {
    EXPECT_TRUE(torch::equal(item.value(), pb[item.key()])) << item.key();
  }
  const auto ba = a.policy()->named_buffers();
  const auto bb = b.policy()->named_buffers();
  for (const auto& item : ba) {
    EXPECT_TRUE(torch::equal(item.value(), bb[item.key()])) << item.key();
  }
}

// An interrupted and resumed run matches an uninterrupted one exactly.
void CheckResume(const std::string& env_yaml, const std::string& name) {
  const RunSpec spec = SmallRun(env_yaml);
  TrainerOptions plain;
  auto straight = LocalTrainer::Create(spec, plain);
  ASSERT_TRUE(straight.ok()) << straight.status();
  ASSERT_TRUE((*straight)->Train(nullptr, 6).ok());

  TrainerOptions with_dir;
  with_dir.run_dir = MakeTestDir(name);
  auto first = LocalTrainer::Create(spec, with_dir);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE((*first)->Train(nullptr, 3).ok());  // Writes a final checkpoint.
  auto latest = LatestCheckpoint(with_dir.run_dir + "/checkpoints");
  ASSERT_TRUE(latest.ok()) << latest.status();

  auto resumed = LocalTrainer::Create(spec, with_dir);
  ASSERT_TRUE(resumed.ok());
  ASSERT_TRUE((*resumed)->Restore(*latest).ok());
  EXPECT_EQ((*resumed)->progress().env_steps, 3 * 4 * 16);
  EXPECT_EQ((*resumed)->progress().updates, 3);
  ASSERT_TRUE((*resumed)->Train(nullptr, 3).ok());
  EXPECT_EQ((*resumed)->progress().env_steps,
            (*straight)->progress().env_steps);
  EXPECT_EQ((*resumed)->progress().episodes, (*straight)->progress().episodes);
  ExpectSameParameters(**straight, **resumed);
}

TEST(LocalTrainerTest, ResumedRunMatchesUninterruptedDiscrete) {
  CheckResume("env: {id: CartPole-v1}", "resume_cartpole");
}

TEST(LocalTrainerTest, ResumedRunMatchesUninterruptedContinuous) {
  CheckResume("env: {id: Pendulum-v1}", "resume_pendulum");
}

// A CUDA learner_device trains a copy of the acting policy and copies its
// weights back after every update; run on the CPU, that bookkeeping (and
// its checkpoints and resume) gives exactly the one-policy run.
TEST(LocalTrainerTest, ATrainedCopyAsOnAGpuMatchesTheOnePolicyRun) {
  RunSpec spec = SmallRun("env: {id: CartPole-v1}");
  spec.mutable_execution()->set_cpu_kernels(
      "libtorch");  // the path a GPU takes
  auto straight = LocalTrainer::Create(spec, {});
  ASSERT_TRUE(straight.ok()) << straight.status();
  ASSERT_TRUE((*straight)->Train(nullptr, 6).ok());

  TrainerOptions copy;
  copy.separate_learner_policy_for_testing = true;
  copy.run_dir = MakeTestDir("learner_copy");
  auto first = LocalTrainer::Create(spec, copy);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE((*first)->Train(nullptr, 3).ok());
  auto latest = LatestCheckpoint(copy.run_dir + "/checkpoints");
  ASSERT_TRUE(latest.ok()) << latest.status();
  auto resumed = LocalTrainer::Create(spec, copy);
  ASSERT_TRUE(resumed.ok());
  ASSERT_TRUE((*resumed)->Restore(*latest).ok());
  ASSERT_TRUE((*resumed)->Train(nullptr, 3).ok());
  EXPECT_EQ((*resumed)->progress().episodes, (*straight)->progress().episodes);
  ExpectSameParameters(**straight, **resumed);
}

TEST(LocalTrainerTest, SameSeedSameRun) {
  const RunSpec spec = SmallRun("env: {id: Acrobot-v1}");
  auto a = LocalTrainer::Create(spec, {});
  auto b = LocalTrainer::Create(spec, {});
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE((*a)->Train(nullptr, 3).ok());
  ASSERT_TRUE((*b)->Train(nullptr, 3).ok());
  ExpectSameParameters(**a, **b);
}

TEST(LocalTrainerTest, CountsStepsAndStopsAtTheBudget) {
  RunSpec spec = SmallRun("env: {id: MountainCar-v0}");
  spec.set_total_env_steps(200);  // 4 x 16 = 64 per update -> 4 updates.
  auto trainer = LocalTrainer::Create(spec, {});
  ASSERT_TRUE(trainer.ok());
  auto result = (*trainer)->Train();
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->progress.updates, 4);
  EXPECT_EQ(result->progress.env_steps, 256);
  EXPECT_GT(result->time.update, 0);
  EXPECT_GT(result->time.env, 0);
}

// A finished run started again trains no more and keeps its time: the
// checkpoint it writes again says what the first run took, not 0 s.
TEST(LocalTrainerTest, AFinishedRunStartedAgainKeepsItsTime) {
  RunSpec spec = SmallRun("env: {id: MountainCar-v0}");
  spec.set_total_env_steps(128);  // 2 updates
  TrainerOptions options;
  options.run_dir = MakeTestDir("finished");
  ASSERT_OK_AND_ASSIGN(auto first, LocalTrainer::Create(spec, options));
  ASSERT_OK_AND_ASSIGN(const TrainResult done, first->Train());
  ASSERT_GT(done.progress.seconds, 0);
  for (int again = 0; again < 2; ++again) {
    ASSERT_OK_AND_ASSIGN(auto resumed, LocalTrainer::Create(spec, options));
    ASSERT_OK_AND_ASSIGN(const std::string latest,
                         LatestCheckpoint(options.run_dir + "/checkpoints"));
    ASSERT_OK(resumed->Restore(latest));
    ASSERT_OK_AND_ASSIGN(const TrainResult result, resumed->Train());
    EXPECT_EQ(result.progress.updates, 2);
    EXPECT_EQ(result.progress.seconds, done.progress.seconds) << again;
    EXPECT_GT(result.progress.steps_per_second, 0);
  }
}

// A run file changed between a checkpoint and its resume: the state goes
// on under the new settings, and the trainer says what changed (the budget
// left out: raising it is how a run goes on).
TEST(LocalTrainerTest, AResumeSaysWhatTheRunFileChanged) {
  RunSpec spec = SmallRun("env: {id: MountainCar-v0}");
  TrainerOptions options;
  options.run_dir = MakeTestDir("changed");
  ASSERT_OK_AND_ASSIGN(auto first, LocalTrainer::Create(spec, options));
  ASSERT_OK(first->Train(nullptr, 1).status());
  ASSERT_OK_AND_ASSIGN(const std::string latest,
                       LatestCheckpoint(options.run_dir + "/checkpoints"));
  ASSERT_OK_AND_ASSIGN(auto same, LocalTrainer::Create(spec, options));
  ASSERT_OK(same->Restore(latest));
  EXPECT_TRUE(same->run_file_changes().empty());
  spec.mutable_ppo()->set_learning_rate(5e-4);
  spec.set_seed(8);
  spec.set_total_env_steps(200000);
  ASSERT_OK_AND_ASSIGN(auto changed, LocalTrainer::Create(spec, options));
  ASSERT_OK(changed->Restore(latest));
  const std::vector<std::string>& lines = changed->run_file_changes();
  ASSERT_EQ(lines.size(), 2u) << ::testing::PrintToString(lines);
  EXPECT_THAT(lines, ::testing::Contains(
                         ::testing::HasSubstr("modified: seed: 7 -> 8")));
  EXPECT_THAT(lines,
              ::testing::Contains(::testing::HasSubstr("ppo.learning_rate")));
}

// Trains the probe plugin's run `yaml` (target 9.5 of 10) in one process:
// the target is reached, and a greedy evaluation scores near it too. Near:
// training stops the moment the sampled policy's running mean crosses 9.5,
// so the greedy one can sit just under it (9.45 seen, after Adam's
// rounding changed); random play scores far less (2.5 on the pixels).
void ExpectProbeLearns(const std::string& yaml) {
  auto spec = LoadRunSpec(yaml, RunFileFormat::kYaml);
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto trainer = LocalTrainer::Create(*spec, {});
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  auto result = (*trainer)->Train();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->target_reached) << result->progress.mean_return;
  auto evaluated = EvaluatePolicy(*spec, (*trainer)->policy(), 20, 5);
  ASSERT_TRUE(evaluated.ok()) << evaluated.status();
  EXPECT_GE(*evaluated, 9.0);
}

// Action masks through the one-process trainer: the probe plugin fails the
// run if its masked action is taken (envs/testdata/test_plugin.cc), so a
// run that reaches its target never took one; evaluation honours them too.
TEST(LocalTrainerTest, AMaskedEnvLearnsWithoutTakingAMaskedAction) {
  ExpectProbeLearns(R"(
env: {id: Probe-v0, plugin: envs/testdata/libtest_plugin.so,
      kwargs: {mode: masked}, observation_size: 6, num_discrete_actions: 3,
      action_mask: true, reward_low: 0, reward_high: 1}
envs_per_actor: 16
segment_length: 32
total_env_steps: 40000
target_return: 9.5
seed: 2
ppo: {learning_rate: 3.0e-3, num_epochs: 10, num_minibatches: 4, gamma: 0.9}
)");
}

// MultiDiscrete actions through the one-process trainer: two parts (3 and
// 2 choices), each rewarded when it matches its part of the observation.
TEST(LocalTrainerTest, MultiDiscreteActionsLearn) {
  ExpectProbeLearns(R"(
env: {id: Probe-v0, plugin: envs/testdata/libtest_plugin.so,
      kwargs: {mode: multi}, observation_size: 5, action_nvec: [3, 2],
      reward_low: 0, reward_high: 1}
envs_per_actor: 16
segment_length: 32
total_env_steps: 60000
target_return: 9.5
seed: 2
ppo: {learning_rate: 3.0e-3, num_epochs: 10, num_minibatches: 4, gamma: 0.9}
)");
}

// MultiBinary actions through a Bernoulli head (env.action_binary): three
// bits, each rewarded when it copies its bit of the observation; one bit's
// wrong value is masked at every step, and taking it fails the run (the
// probe plugin's "bits" mode), so reaching the target never took one.
TEST(LocalTrainerTest, MultiBinaryActionsLearnAsBernoulliBits) {
  ExpectProbeLearns(R"(
env: {id: Probe-v0, plugin: envs/testdata/libtest_plugin.so,
      kwargs: {mode: bits}, observation_size: 3, action_binary: 3,
      action_mask: true, reward_low: 0, reward_high: 1}
envs_per_actor: 16
segment_length: 32
total_env_steps: 60000
target_return: 9.5
seed: 2
ppo: {learning_rate: 3.0e-3, num_epochs: 10, num_minibatches: 4, gamma: 0.9}
)");
}

// uint8 image observations (the pixel plugin: which quadrant holds the
// white pixel) stay bytes in the rollouts and are learned by the MLP (asked
// for: a 6x6 image would get the IMPALA CNN), the network scaling them:
// random play scores 2.5, the target is 9.5.
TEST(LocalTrainerTest, UInt8ImageObservationsLearn) {
  ExpectProbeLearns(R"(
env: {id: Pixels-v0, plugin: envs/testdata/libpixel_plugin.so,
      observation_shape: [6, 6, 1], observation_dtype: uint8,
      num_discrete_actions: 4, reward_low: 0, reward_high: 1}
policy: {encoder: mlp}
envs_per_actor: 16
segment_length: 32
total_env_steps: 60000
target_return: 9.5
seed: 2
ppo: {learning_rate: 3.0e-3, num_epochs: 10, num_minibatches: 4, gamma: 0.9}
)");
}

// The Nature CNN (chosen for 36x36 uint8 images) learns the pixel env from
// the bytes.
TEST(LocalTrainerTest, ACnnLearnsFromImages) {
  ExpectProbeLearns(R"(
env: {id: Pixels-v0, plugin: envs/testdata/libpixel_plugin.so,
      kwargs: {size: 36}, observation_shape: [36, 36, 1],
      observation_dtype: uint8, num_discrete_actions: 4, reward_low: 0,
      reward_high: 1}
envs_per_actor: 16
segment_length: 32
total_env_steps: 60000
target_return: 9.5
seed: 2
ppo: {learning_rate: 1.0e-3, num_epochs: 4, num_minibatches: 4, gamma: 0.9}
)");
}

// A Dict observation read per key (envs/testdata/dict_plugin.cc: the
// IMPALA CNN for its 8x8 image part, its hint one-hot as it is) and a Dict
// action (MultiDiscrete [2, 2]): each part pays half, so the target needs
// both (random play 5, one part 7.5, target 9.5).
TEST(LocalTrainerTest, ADictObservationIsLearnedPerKey) {
  ExpectProbeLearns(R"(
env: {id: Lookout-v0, plugin: envs/testdata/libdict_plugin.so,
      kwargs: {size: 8},
      observation_parts: [{name: hint, shape: [2]},
                          {name: image, shape: [8, 8, 1], dtype: uint8}],
      action_nvec: [2, 2], reward_low: 0, reward_high: 1}
envs_per_actor: 16
segment_length: 32
total_env_steps: 60000
target_return: 9.5
seed: 2
ppo: {learning_rate: 1.0e-3, num_epochs: 4, num_minibatches: 4, gamma: 0.9}
)");
}

// Footprint admission counts the network it admits: the estimate of the
// parameters is the count of the policy built, for each encoder and core.
TEST(LocalTrainerTest, TheFootprintCountsEveryEncodersParameters) {
  for (const std::string& env :
       {std::string("{id: CartPole-v1}"),
        std::string("{id: Pixels-v0, plugin: p.so, observation_shape: [36, "
                    "36, 1], observation_dtype: uint8, num_discrete_actions: "
                    "4}"),
        std::string("{id: Pixels-v0, plugin: p.so, observation_shape: [3, "
                    "13, 11], observation_dtype: uint8, num_discrete_actions: "
                    "4}"),
        std::string("{id: Pixels-v0, plugin: p.so, observation_shape: [40, "
                    "52, 2], observation_dtype: uint8, "
                    "continuous_action_size: 2, action_low: -1, action_high: "
                    "1}\npolicy: {hidden_sizes: [32]}"),
        std::string("{id: CartPole-v1}\npolicy: {core: lstm, core_size: 16}"),
        std::string("{id: Pendulum-v1}\npolicy: {core: gru}"),
        std::string("{id: Pixels-v0, plugin: p.so, observation_shape: [8, "
                    "8, 1], observation_dtype: uint8, num_discrete_actions: "
                    "4}\npolicy: {core: lstm, core_size: 32}"),
        std::string("{id: Lookout-v0, plugin: p.so, observation_parts: "
                    "[{name: hint, shape: [2]}, {name: image, shape: [40, "
                    "36, 3], dtype: uint8}, {name: eye, shape: [9, 9, 3], "
                    "dtype: uint8}], action_nvec: [2, 2]}"),
        std::string("{id: Bits-v0, plugin: p.so, observation_size: 5, "
                    "action_binary: 3}")}) {
    auto spec = LoadRunSpec("env: " + env + "\n", RunFileFormat::kYaml);
    ASSERT_TRUE(spec.ok()) << spec.status();
    auto policy = CreateActorCritic(
        MakeActorCriticConfig(spec->env(), spec->policy(), spec->ppo()));
    ASSERT_TRUE(policy.ok()) << policy.status();
    int64_t count = 0;
    for (const auto& p : (*policy)->parameters()) count += p.numel();
    EXPECT_EQ(EstimateRunFootprint(*spec).parameters, count)
        << spec->policy().encoder() << " " << env;
  }
}

TEST(LocalTrainerTest, EvaluationIsDeterministic) {
  const RunSpec spec = SmallRun("env: {id: CartPole-v1}");
  auto trainer = LocalTrainer::Create(spec, {});
  ASSERT_TRUE(trainer.ok());
  auto a = EvaluatePolicy(spec, (*trainer)->policy(), 10, 99);
  auto b = EvaluatePolicy(spec, (*trainer)->policy(), 10, 99);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_GE(*a, 8);  // CartPole episodes last at least 8 steps.
  EXPECT_EQ(EvaluatePolicy(spec, (*trainer)->policy(), 0, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A game of two agents per environment: evaluation opens whole games (6
// rows for 5 episodes) and counts every player's episodes.
TEST(LocalTrainerTest, EvaluationOfATwoPlayerGamePlaysWholeGames) {
  auto spec = LoadRunSpecFile("examples/multi_agent/light_cycles.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto trainer = LocalTrainer::Create(*spec, {});
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  std::vector<double> returns;
  auto mean = EvaluatePolicy(*spec, (*trainer)->policy(), 5, 7, &returns);
  ASSERT_TRUE(mean.ok()) << mean.status();
  ASSERT_EQ(returns.size(), 5u);
  for (const double r : returns) {
    EXPECT_TRUE(r == 1 || r == 0 || r == -1) << r;
  }
  EXPECT_NE(DescribeGameOutcomes(returns), "");
}

TEST(LocalTrainerTest, CheckpointOfAnotherEnvironmentIsRejected) {
  TrainerOptions options;
  options.run_dir = MakeTestDir("mismatch");
  auto cartpole =
      LocalTrainer::Create(SmallRun("env: {id: CartPole-v1}"), options);
  ASSERT_TRUE(cartpole.ok());
  auto dir = (*cartpole)->WriteCheckpoint();
  ASSERT_TRUE(dir.ok()) << dir.status();
  auto acrobot = LocalTrainer::Create(SmallRun("env: {id: Acrobot-v1}"), {});
  ASSERT_TRUE(acrobot.ok());
  EXPECT_EQ((*acrobot)->Restore(*dir).code(),
            absl::StatusCode::kInvalidArgument);
}

// rl_local's checkpoint written before the counters moved into
// TrainingState (learner/testdata/README.md has its run) resumes.
TEST(LocalTrainerTest, ACheckpointWrittenBeforeTrainingStateResumes) {
  auto spec = LoadRunSpec(R"(
name: legacy
env: {id: CartPole-v1}
envs_per_actor: 4
segment_length: 16
total_env_steps: 4096
seed: 3
checkpoint_interval: 8
policy: {hidden_sizes: [16, 16]}
)",
                          RunFileFormat::kYaml);
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto trainer = LocalTrainer::Create(*spec, {});
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  const absl::Status restored =
      (*trainer)->Restore("learner/testdata/trainer_checkpoint_2026_11");
  ASSERT_TRUE(restored.ok()) << restored;
  EXPECT_EQ((*trainer)->progress().env_steps, 2048);
  EXPECT_EQ((*trainer)->progress().updates, 32);
  EXPECT_GT((*trainer)->progress().episodes, 0);
  ASSERT_TRUE((*trainer)->Train(nullptr, 2).ok());
  EXPECT_EQ((*trainer)->progress().env_steps, 2048 + 2 * 64);
}

TEST(LocalTrainerTest, GameOutcomesCountScoresOfOneGame) {
  EXPECT_EQ(DescribeGameOutcomes({1, 1, 0, -1}),
            "won 50.0%, drew 25.0%, lost 25.0%");
  EXPECT_EQ(DescribeGameOutcomes({1, 0.5}), "");  // not a game's scores
  EXPECT_EQ(DescribeGameOutcomes({}), "");
}

}  // namespace
}  // namespace rl
