#include "runspec/run_spec.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

absl::Status LoadYaml(const std::string& yaml) {
  return LoadRunSpec(yaml, RunFileFormat::kYaml).status();
}

TEST(RunSpecTest, ExampleRunFilesLoad) {
  auto cartpole = LoadRunSpecFile("examples/cartpole.yaml");
  ASSERT_OK(cartpole);
  EXPECT_EQ(cartpole->env().id(), "CartPole-v1");
  EXPECT_EQ(cartpole->envs_per_actor(), 8);
  EXPECT_FLOAT_EQ(cartpole->ppo().learning_rate(), 1e-3f);
  EXPECT_EQ(cartpole->ppo().hidden_sizes_size(), 2);
  EXPECT_EQ(cartpole->sync_mode(), SYNC);
  EXPECT_DOUBLE_EQ(cartpole->target_return(), 475);

  // JSON, with lowerCamelCase names.
  auto pendulum = LoadRunSpecFile("examples/pendulum.json");
  ASSERT_OK(pendulum);
  EXPECT_EQ(pendulum->env().id(), "Pendulum-v1");
  EXPECT_EQ(pendulum->segment_length(), 256);
  EXPECT_TRUE(pendulum->ppo().normalize_observations());
  // An explicit zero is kept for the fields whose default is not zero.
  EXPECT_TRUE(pendulum->ppo().has_entropy_coef());
  EXPECT_EQ(pendulum->ppo().entropy_coef(), 0.0f);
}

TEST(RunSpecTest, DefaultsFillWhatIsLeftOut) {
  auto spec = LoadRunSpec("env: {id: CartPole-v1}", RunFileFormat::kYaml);
  ASSERT_OK(spec);
  EXPECT_EQ(spec->envs_per_actor(), 8);
  EXPECT_EQ(spec->segment_length(), 128);
  EXPECT_FLOAT_EQ(spec->ppo().gamma(), 0.99f);
  EXPECT_FLOAT_EQ(spec->ppo().entropy_coef(), 0.01f);
  EXPECT_TRUE(spec->ppo().normalize_advantages());
  EXPECT_EQ(spec->resources().num_learners(), 1);
  EXPECT_EQ(spec->resources().min_actors(), 1);
  EXPECT_EQ(spec->resources().learner_device(), "cpu");
  EXPECT_EQ(spec->sync_mode(), SYNC);
}

TEST(RunSpecTest, DivisibilityErrorNamesTheField) {
  const absl::Status status = LoadYaml(R"(
env: {id: CartPole-v1}
envs_per_actor: 8
segment_length: 64
ppo: {num_minibatches: 3}
)");
  EXPECT_THAT(
      status,
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("ppo.num_minibatches: must divide "
                         "envs_per_actor*segment_length = 512 (got 3)")));
}

TEST(RunSpecTest, RangeErrorsAreAllListedWithPaths) {
  const absl::Status status = LoadYaml(R"(
env: {id: CartPole-v1}
ppo: {gamma: 1.5, learning_rate: -1, hidden_sizes: [64, 0]}
resources: {num_actors: 2, min_actors: 5, learner_device: tpu}
)");
  EXPECT_THAT(
      status,
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("ppo.gamma: must be in (0, 1] (got 1.5)"),
                     HasSubstr("ppo.learning_rate: must be in (0, 1) (got -1)"),
                     HasSubstr("ppo.hidden_sizes[1]: must be in [1, 65536] "
                               "(got 0)"),
                     HasSubstr("resources.min_actors"),
                     HasSubstr("resources.learner_device"))));
}

TEST(RunSpecTest, NanIsOutOfRange) {
  EXPECT_THAT(
      LoadYaml("env: {id: CartPole-v1}\nppo: {gamma: .nan}"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("ppo.gamma")));
}

TEST(RunSpecTest, UnknownEnvironment) {
  const absl::Status status = LoadYaml("env: {id: Breakout-v5}");
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                               AllOf(HasSubstr("env.id: unknown environment"),
                                     HasSubstr("\"Breakout-v5\""))));
  EXPECT_THAT(LoadYaml("seed: 3"), StatusIs(absl::StatusCode::kInvalidArgument,
                                            HasSubstr("env.id: required")));
}

TEST(RunSpecTest, UnknownFieldIsNamed) {
  const absl::Status status =
      LoadYaml("env: {id: CartPole-v1}\nppo: {learning_rat: 0.1}");
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("learning_rat")));
}

TEST(RunSpecTest, WrongTypeIsNamed) {
  const absl::Status status =
      LoadYaml("env: {id: CartPole-v1}\nenvs_per_actor: many");
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("envs_per_actor")));

  const absl::Status enum_status =
      LoadYaml("env: {id: CartPole-v1}\nsync_mode: SOMETIMES");
  EXPECT_THAT(enum_status, StatusIs(absl::StatusCode::kInvalidArgument,
                                    HasSubstr("sync_mode")));
}

TEST(RunSpecTest, SyntaxErrorsAndMissingFiles) {
  const absl::Status yaml = LoadYaml("env: {id: CartPole-v1\nseed: [");
  EXPECT_THAT(yaml, StatusIs(absl::StatusCode::kInvalidArgument,
                             HasSubstr("not valid YAML: line")));

  EXPECT_THAT(LoadYaml("- a list"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(LoadRunSpec("{\"env\": ", RunFileFormat::kJson),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(LoadRunSpecFile("/nonexistent/run.yaml"),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST(RunSpecTest, SyncModeRejectsPolicyLag) {
  EXPECT_THAT(
      LoadYaml("env: {id: CartPole-v1}\nsync_mode: SYNC\nmax_policy_lag: 2"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("max_policy_lag: must be 0 in SYNC mode")));
  EXPECT_OK(
      LoadYaml("env: {id: CartPole-v1}\nsync_mode: ASYNC\nmax_policy_lag: 2"));
}

TEST(RunSpecTest, QuotedNumbersStayStrings) {
  // A quoted YAML scalar is a string; the proto JSON mapping still accepts
  // numeric strings for numeric fields.
  auto spec = LoadRunSpec("env: {id: \"CartPole-v1\"}\nseed: \"42\"",
                          RunFileFormat::kYaml);
  ASSERT_OK(spec);
  EXPECT_EQ(spec->seed(), 42u);
}

// Resolved once, here: learners and actors receive the derived fields.
TEST(RunSpecTest, LoadResolvesTheEnvironmentFromTheRegistry) {
  auto spec = LoadRunSpec("env: {id: Acrobot-v1, observation_size: 99}\n",
                          RunFileFormat::kYaml);
  ASSERT_OK(spec);
  EXPECT_EQ(spec->env().observation_size(), 6);  // the file's 99 is ignored
  EXPECT_EQ(spec->env().num_discrete_actions(), 3);
  EXPECT_EQ(spec->env().continuous_action_size(), 0);
  EXPECT_EQ(spec->env().max_episode_steps(), 500);

  RunSpec submitted;
  submitted.mutable_env()->set_id("Pendulum-v1");
  submitted.mutable_env()->set_max_episode_steps(50);
  ASSERT_OK(ResolveRunSpec(&submitted));
  EXPECT_EQ(submitted.env().continuous_action_size(), 1);
  EXPECT_EQ(submitted.env().max_episode_steps(), 50);
  EXPECT_EQ(submitted.envs_per_actor(), 8);  // defaults applied too
}

TEST(RunSpecTest, ResolveReportsValidationProblemsFirst) {
  RunSpec spec;
  spec.mutable_env()->set_id("Breakout-v5");
  const absl::Status status = ResolveRunSpec(&spec);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("env.id: unknown environment")));
}

}  // namespace
}  // namespace rl
