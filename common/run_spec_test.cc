#include "common/run_spec.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

std::string Message(const absl::Status& status) {
  return std::string(status.message());
}

absl::Status LoadYaml(const std::string& yaml) {
  return LoadRunSpec(yaml, RunFileFormat::kYaml).status();
}

TEST(RunSpecTest, ExampleRunFilesLoad) {
  auto cartpole = LoadRunSpecFile("examples/cartpole.yaml");
  ASSERT_TRUE(cartpole.ok()) << cartpole.status();
  EXPECT_EQ(cartpole->env().id(), "CartPole-v1");
  EXPECT_EQ(cartpole->envs_per_actor(), 8);
  EXPECT_FLOAT_EQ(cartpole->ppo().learning_rate(), 1e-3f);
  EXPECT_EQ(cartpole->ppo().hidden_sizes_size(), 2);
  EXPECT_EQ(cartpole->sync_mode(), SYNC);
  EXPECT_DOUBLE_EQ(cartpole->target_return(), 475);

  // JSON, with lowerCamelCase names.
  auto pendulum = LoadRunSpecFile("examples/pendulum.json");
  ASSERT_TRUE(pendulum.ok()) << pendulum.status();
  EXPECT_EQ(pendulum->env().id(), "Pendulum-v1");
  EXPECT_EQ(pendulum->segment_length(), 256);
  EXPECT_TRUE(pendulum->ppo().normalize_observations());
  // An explicit zero is kept for the fields whose default is not zero.
  EXPECT_TRUE(pendulum->ppo().has_entropy_coef());
  EXPECT_EQ(pendulum->ppo().entropy_coef(), 0.0f);
}

TEST(RunSpecTest, DefaultsFillWhatIsLeftOut) {
  auto spec = LoadRunSpec("env: {id: CartPole-v1}", RunFileFormat::kYaml);
  ASSERT_TRUE(spec.ok()) << spec.status();
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
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(status),
              HasSubstr("ppo.num_minibatches: must divide "
                        "envs_per_actor*segment_length = 512 (got 3)"));
}

TEST(RunSpecTest, RangeErrorsAreAllListedWithPaths) {
  const absl::Status status = LoadYaml(R"(
env: {id: CartPole-v1}
ppo: {gamma: 1.5, learning_rate: -1, hidden_sizes: [64, 0]}
resources: {num_actors: 2, min_actors: 5, learner_device: tpu}
)");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  const std::string m = Message(status);
  EXPECT_THAT(m, HasSubstr("ppo.gamma: must be in (0, 1] (got 1.5)"));
  EXPECT_THAT(m, HasSubstr("ppo.learning_rate: must be in (0, 1) (got -1)"));
  EXPECT_THAT(m,
              HasSubstr("ppo.hidden_sizes[1]: must be in [1, 65536] (got 0)"));
  EXPECT_THAT(m, HasSubstr("resources.min_actors"));
  EXPECT_THAT(m, HasSubstr("resources.learner_device"));
}

TEST(RunSpecTest, NanIsOutOfRange) {
  EXPECT_THAT(Message(LoadYaml("env: {id: CartPole-v1}\nppo: {gamma: .nan}")),
              HasSubstr("ppo.gamma"));
}

TEST(RunSpecTest, UnknownEnvironment) {
  const absl::Status status = LoadYaml("env: {id: Breakout-v5}");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(status), HasSubstr("env.id: unknown environment"));
  EXPECT_THAT(Message(status), HasSubstr("\"Breakout-v5\""));
  EXPECT_THAT(Message(LoadYaml("seed: 3")), HasSubstr("env.id: required"));
}

TEST(RunSpecTest, UnknownFieldIsNamed) {
  const absl::Status status =
      LoadYaml("env: {id: CartPole-v1}\nppo: {learning_rat: 0.1}");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(status), HasSubstr("learning_rat"));
}

TEST(RunSpecTest, WrongTypeIsNamed) {
  const absl::Status status =
      LoadYaml("env: {id: CartPole-v1}\nenvs_per_actor: many");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(status), HasSubstr("envs_per_actor"));

  const absl::Status enum_status =
      LoadYaml("env: {id: CartPole-v1}\nsync_mode: SOMETIMES");
  EXPECT_EQ(enum_status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(enum_status), HasSubstr("sync_mode"));
}

TEST(RunSpecTest, SyntaxErrorsAndMissingFiles) {
  const absl::Status yaml = LoadYaml("env: {id: CartPole-v1\nseed: [");
  EXPECT_EQ(yaml.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(yaml), HasSubstr("not valid YAML: line"));

  EXPECT_EQ(LoadYaml("- a list").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadRunSpec("{\"env\": ", RunFileFormat::kJson).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadRunSpecFile("/nonexistent/run.yaml").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(RunSpecTest, SyncModeRejectsPolicyLag) {
  EXPECT_THAT(
      Message(LoadYaml(
          "env: {id: CartPole-v1}\nsync_mode: SYNC\nmax_policy_lag: 2")),
      HasSubstr("max_policy_lag: must be 0 in SYNC mode"));
  EXPECT_TRUE(LoadYaml("env: {id: CartPole-v1}\nsync_mode: ASYNC\n"
                       "max_policy_lag: 2")
                  .ok());
}

TEST(RunSpecTest, QuotedNumbersStayStrings) {
  // A quoted YAML scalar is a string; the proto JSON mapping still accepts
  // numeric strings for numeric fields.
  auto spec = LoadRunSpec("env: {id: \"CartPole-v1\"}\nseed: \"42\"",
                          RunFileFormat::kYaml);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->seed(), 42u);
}

}  // namespace
}  // namespace rl
