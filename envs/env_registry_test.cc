#include "envs/env_registry.h"

#include <algorithm>
#include <random>
#include <vector>

#include "envs/batched_env.h"
#include "envs/env_batch.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The registry's rows come from the physics' own constants
// (env_registry.cc, SpecOf): nothing to compare them with.

// Random play never leaves the declared reward range (learners refuse
// segments outside it).
TEST(EnvRegistryTest, RewardsStayInTheDeclaredRange) {
  constexpr int kEnvs = 64;
  for (const std::string& id : RegisteredEnvIds()) {
    SCOPED_TRACE(id);
    auto env = BatchedEnv::Create(id, kEnvs, /*seed=*/7);
    ASSERT_OK(env);
    const EnvSpec& info = (*env)->spec();
    EXPECT_LE(info.reward_low(), info.reward_high());
    std::vector<float> obs(kEnvs * info.observation_size());
    std::vector<float> rewards(kEnvs);
    std::vector<uint8_t> terminated(kEnvs), truncated(kEnvs);
    StepOutputs out;
    out.observations = obs.data();
    out.rewards = rewards.data();
    out.terminated = terminated.data();
    out.truncated = truncated.data();
    ASSERT_OK((*env)->Reset(obs.data()));
    std::mt19937 rng(11);
    float low = 1e30f, high = -1e30f;
    for (int step = 0; step < 1000; ++step) {
      if (IsDiscrete(info)) {
        std::vector<int64_t> actions(kEnvs);
        for (auto& a : actions) a = rng() % info.num_discrete_actions();
        ASSERT_OK((*env)->StepDiscrete(actions.data(), out));
      } else {
        // Beyond the bounds too: clipped, as Gymnasium does.
        std::uniform_real_distribution<float> u(2 * info.action_low(),
                                                2 * info.action_high());
        std::vector<float> actions(kEnvs * info.continuous_action_size());
        for (auto& a : actions) a = u(rng);
        ASSERT_OK((*env)->StepContinuous(actions.data(), out));
      }
      for (float r : rewards) {
        low = std::min(low, r);
        high = std::max(high, r);
      }
    }
    EXPECT_GE(low, info.reward_low());
    EXPECT_LE(high, info.reward_high());
  }
}

TEST(EnvRegistryTest, IdsInOrder) {
  EXPECT_THAT(RegisteredEnvIds(),
              ElementsAre("CartPole-v1", "Acrobot-v1", "MountainCar-v0",
                          "Pendulum-v1", "MountainCarContinuous-v0"));
}

TEST(EnvRegistryTest, UnknownIdNamesTheKnownOnes) {
  absl::StatusOr<EnvKind> kind = FindEnvKind("Breakout-v5");
  EXPECT_THAT(kind,
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"Breakout-v5\"; known ids: CartPole-v1, ")));
}

TEST(EnvRegistryTest, ResolveFillsTheDerivedFields) {
  EnvSpec env;
  env.set_id("Pendulum-v1");
  ASSERT_OK(ResolveEnvSpec(&env));
  EXPECT_EQ(env.observation_size(), 3);
  EXPECT_EQ(env.num_discrete_actions(), 0);
  EXPECT_EQ(env.continuous_action_size(), 1);
  EXPECT_EQ(env.max_episode_steps(), 200);
  EXPECT_EQ(env.action_low(), -2.0f);
  EXPECT_EQ(env.action_high(), 2.0f);
  EXPECT_LT(env.reward_low(), -16.0f);
  EXPECT_EQ(env.reward_high(), 0.0f);
  // Idempotent: a resolved spec resolves to itself.
  EnvSpec again = env;
  ASSERT_OK(ResolveEnvSpec(&again));
  EXPECT_EQ(again.SerializeAsString(), env.SerializeAsString());
}

TEST(EnvRegistryTest, ResolveKeepsAShorterTimeLimit) {
  EnvSpec env;
  env.set_id("CartPole-v1");
  env.set_max_episode_steps(100);
  ASSERT_OK(ResolveEnvSpec(&env));
  EXPECT_EQ(env.max_episode_steps(), 100);
  EXPECT_EQ(env.num_discrete_actions(), 2);
  EXPECT_EQ(env.reward_high(), 1.0f);
  EXPECT_OK(CheckResolvedEnvSpec(env));
}

// Workers take the spec as given: one that is not resolved, or resolved
// against other sizes, is refused naming what is wrong, never filled in.
TEST(EnvRegistryTest, CheckResolvedRefusesWhatIsNotResolved) {
  EnvSpec env;
  env.set_id("CartPole-v1");
  EXPECT_THAT(CheckResolvedEnvSpec(env),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is not resolved")));
  ASSERT_OK(ResolveEnvSpec(&env));
  EnvSpec stale = env;  // stored before the reward range was in the spec
  stale.clear_reward_high();
  EXPECT_THAT(CheckResolvedEnvSpec(stale),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("lacks fields the registry fills")));
  EnvSpec other = env;
  other.set_continuous_action_size(3);
  EXPECT_THAT(CheckResolvedEnvSpec(other),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("env.continuous_action_size")));
  EnvSpec wrong_range = env;
  wrong_range.set_reward_high(5);
  EXPECT_THAT(CheckResolvedEnvSpec(wrong_range),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("env.reward_high: CartPole-v1 has 1")));
}

// A resolved spec carries a fingerprint of itself and of the registry row
// that resolved it; a worker takes a spec whose fingerprint matches without
// resolving it again (here one resolving would refuse), and checks one
// edited since, or stored before fingerprints, the old way.
TEST(EnvRegistryTest, AResolvedSpecCarriesItsFingerprint) {
  EnvSpec env;
  env.set_id("CartPole-v1");
  ASSERT_OK(ResolveEnvSpec(&env));
  ASSERT_NE(env.resolved_fingerprint(), 0u);
  EXPECT_EQ(env.resolved_fingerprint(), EnvSpecFingerprint(env));
  EXPECT_OK(CheckResolvedEnvSpec(env));
  // Resolving again gives the same fingerprint; another env another one.
  EnvSpec again = env;
  ASSERT_OK(ResolveEnvSpec(&again));
  EXPECT_EQ(again.resolved_fingerprint(), env.resolved_fingerprint());
  EnvSpec acrobot;
  acrobot.set_id("Acrobot-v1");
  ASSERT_OK(ResolveEnvSpec(&acrobot));
  EXPECT_NE(acrobot.resolved_fingerprint(), env.resolved_fingerprint());

  // Not resolved again: an id this binary does not know, fingerprinted.
  EnvSpec unknown = env;
  unknown.set_id("Unknown-v9");
  unknown.set_resolved_fingerprint(EnvSpecFingerprint(unknown));
  EXPECT_OK(CheckResolvedEnvSpec(unknown));
  // Edited since: resolved again, which names the id.
  unknown.set_resolved_fingerprint(env.resolved_fingerprint());
  EXPECT_THAT(
      CheckResolvedEnvSpec(unknown),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("Unknown-v9")));
  EnvSpec stored_before = env;
  stored_before.clear_resolved_fingerprint();
  EXPECT_OK(CheckResolvedEnvSpec(stored_before));
  stored_before.clear_reward_high();
  EXPECT_THAT(CheckResolvedEnvSpec(stored_before),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("lacks fields the registry fills")));
}

TEST(EnvRegistryTest, ResolveRefusesADisagreeingField) {
  EnvSpec env;
  env.set_id("CartPole-v1");
  env.set_observation_size(5);
  const absl::Status status = ResolveEnvSpec(&env);
  EXPECT_THAT(
      status,
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("env.observation_size: CartPole-v1 has 4 (got 5)")));
}

// Lives are a plugin's (the Gymnasium bridge's Atari ids).
TEST(EnvRegistryTest, ResolveRefusesEpisodicLifeForABuiltInEnv) {
  EnvSpec env;
  env.set_id("CartPole-v1");
  env.set_episodic_life(true);
  EXPECT_THAT(ResolveEnvSpec(&env),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("env.episodic_life: CartPole-v1 has no "
                                 "lives (plugins only)")));
}

TEST(EnvRegistryTest, ResolveRefusesAnUnknownId) {
  EnvSpec env;
  env.set_id("Pong");
  const absl::Status status = ResolveEnvSpec(&env);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("env.id: ")));
}

}  // namespace
}  // namespace rl
