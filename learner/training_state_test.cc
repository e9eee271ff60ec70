#include "learner/training_state.h"

#include <torch/torch.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/actor_critic.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

// The policy a kept checkpoint was written for (CartPole-v1's sizes).
ActorCritic CartPolePolicy(int hidden) {
  ActorCriticConfig c;
  c.observation_size = 4;
  c.num_actions = 2;
  c.hidden_sizes = {hidden, hidden};
  return ActorCritic(c);
}

TEST(TrainingStateTest, RoundTripsThroughTheExtraTensors) {
  TrainingState state;
  state.set_env_steps(4096);
  state.set_updates(16);
  state.set_policy_version(17);
  state.set_episodes(40);
  state.set_target_reached(true);
  state.set_target_reached_at_steps(3840);
  state.set_seconds(1.5);
  state.add_recent_returns(20.0f);
  state.add_recent_returns(35.5f);
  torch::Generator generator = at::detail::createCPUGenerator(7);
  state.set_updater_generator(GeneratorStateBytes(generator));
  AckWatermark* w = state.add_acked_segments();
  w->set_actor_id(3);
  w->set_incarnation(0xfedcba9876543210ull);
  w->set_sequence_number(12);
  TensorMap extra;
  PutTrainingState(state, &extra);
  ASSERT_EQ(extra.count(kTrainingStateKey), 1u);
  ASSERT_OK_AND_ASSIGN(const TrainingState back,
                       TakeTrainingState(extra, "test"));
  EXPECT_EQ(back.SerializeAsString(), state.SerializeAsString());

  torch::Generator other = at::detail::createCPUGenerator(99);
  ASSERT_OK(SetGeneratorState(back.updater_generator(), other, "test"));
  EXPECT_EQ(other.current_seed(), 7u);
}

TEST(TrainingStateTest, MissingOrMalformedStateIsInvalidArgument) {
  TensorMap extra;
  EXPECT_THAT(TakeTrainingState(extra, "checkpoint x"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("checkpoint x has no training_state")));
  extra[kTrainingStateKey] = torch::tensor({1.0f, 2.0f});
  EXPECT_THAT(TakeTrainingState(extra, "checkpoint x"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("training_state")));
  extra[kTrainingStateKey] = torch::full({4}, 0xff, torch::kUInt8);
  EXPECT_THAT(TakeTrainingState(extra, "checkpoint x"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is not a TrainingState")));
  torch::Generator generator = at::detail::createCPUGenerator(1);
  EXPECT_THAT(
      SetGeneratorState("abc", generator, "checkpoint x"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("checkpoint x")));
}

// A learner checkpoint written before TrainingState (learner/testdata).
TEST(TrainingStateTest, LoadsALearnerCheckpointWrittenBeforeIt) {
  ActorCritic policy = CartPolePolicy(64);
  TensorMap extra;
  ASSERT_OK(ReadCheckpoint("learner/testdata/learner_checkpoint_2026_11",
                           policy, nullptr, &extra));
  ASSERT_OK_AND_ASSIGN(const TrainingState state,
                       TakeTrainingState(extra, "kept checkpoint"));
  // examples/cartpole.yaml: one actor of 8 envs x 32 steps per update.
  EXPECT_EQ(state.updates(), 233);
  EXPECT_EQ(state.policy_version(), 234);
  EXPECT_EQ(state.env_steps(), 233 * 256);
  EXPECT_GT(state.episodes(), 100);
  EXPECT_EQ(state.recent_returns_size(), 100);
  ASSERT_EQ(state.acked_segments_size(), 1);
  EXPECT_EQ(state.acked_segments(0).actor_id(), 0);
  EXPECT_GE(state.acked_segments(0).sequence_number(), 233);
  torch::Generator generator = at::detail::createCPUGenerator(1);
  EXPECT_OK(SetGeneratorState(state.updater_generator(), generator, "kept"));
}

// An rl_local checkpoint written before TrainingState (learner/testdata).
TEST(TrainingStateTest, LoadsATrainerCheckpointWrittenBeforeIt) {
  ActorCritic policy = CartPolePolicy(16);
  TensorMap extra;
  ASSERT_OK(ReadCheckpoint("learner/testdata/trainer_checkpoint_2026_11",
                           policy, nullptr, &extra));
  ASSERT_OK_AND_ASSIGN(const TrainingState state,
                       TakeTrainingState(extra, "kept checkpoint"));
  EXPECT_EQ(state.updates(), 32);
  EXPECT_EQ(state.env_steps(), 2048);
  EXPECT_EQ(state.policy_version(), 0);
  EXPECT_GT(state.seconds(), 0.0);
  EXPECT_GT(state.episodes(), 0);
  EXPECT_EQ(state.recent_returns_size(), state.episodes());
  EXPECT_EQ(state.acked_segments_size(), 0);
  torch::Generator generator = at::detail::createCPUGenerator(1);
  EXPECT_OK(SetGeneratorState(state.updater_generator(), generator, "kept"));
}

}  // namespace
}  // namespace rl
