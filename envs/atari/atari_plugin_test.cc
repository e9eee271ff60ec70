// The Atari plugin as actors open it: `plugin: atari` found beside the
// binary, its spaces checked against the run's, batches that repeat under
// one seed whatever the thread count, lives and games reported as
// env.episodic_life says, and errors that name what is wrong.
#include <cstdint>
#include <string>
#include <vector>

#include "envs/env_plugin.h"
#include "envs/env_registry.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

EnvSpec Breakout() {
  EnvSpec spec;
  spec.set_id("Breakout-v5");
  spec.set_plugin(kAtariPlugin);
  for (int d : {4, 84, 84}) spec.add_observation_shape(d);
  spec.set_observation_dtype("uint8");
  spec.set_num_discrete_actions(4);
  spec.set_reward_low(-1);
  spec.set_reward_high(1);
  spec.set_episodic_life(true);
  EXPECT_OK(ResolveEnvSpec(&spec));
  return spec;
}

struct Rollout {
  std::vector<uint8_t> observations;
  int lives_lost = 0;  // terminated, the game going on
  int games = 0;       // games ended (their lengths reported)
  std::vector<float> game_returns;
  double clipped_rewards = 0;
};

Rollout Roll(const EnvSpec& spec, int num_envs, int threads, int steps) {
  Rollout r;
  EnvOpenOptions options;
  options.num_envs = num_envs;
  options.seed = 7;
  options.num_threads = threads;
  auto env = OpenEnv(spec, options);
  EXPECT_TRUE(env.ok()) << env.status();
  if (!env.ok()) return r;
  const int64_t size = 4 * 84 * 84;
  std::vector<uint8_t> obs(num_envs * size), final_obs(num_envs * size);
  std::vector<float> rewards(num_envs), returns(num_envs);
  std::vector<uint8_t> term(num_envs), trunc(num_envs);
  std::vector<int32_t> lengths(num_envs);
  StepOutputs out{obs.data(),       rewards.data(), term.data(),   trunc.data(),
                  final_obs.data(), returns.data(), lengths.data()};
  EXPECT_OK((*env)->Reset(obs.data()));
  r.observations = obs;
  std::vector<int64_t> actions(num_envs);
  for (int s = 0; s < steps; ++s) {
    for (int i = 0; i < num_envs; ++i) actions[i] = (s * 7 + i * 3) / 5 % 4;
    EXPECT_OK((*env)->StepDiscrete(actions.data(), out));
    r.observations.insert(r.observations.end(), obs.begin(), obs.end());
    for (int i = 0; i < num_envs; ++i) {
      r.clipped_rewards += rewards[i];
      if (lengths[i] > 0) {
        ++r.games;
        r.game_returns.push_back(returns[i]);
      } else if (term[i]) {
        ++r.lives_lost;
      }
    }
  }
  return r;
}

TEST(AtariPluginTest, BatchesRepeatUnderOneSeedOnAnyThreadCount) {
  const Rollout one = Roll(Breakout(), 4, 1, 600);
  const Rollout two = Roll(Breakout(), 4, 2, 600);
  EXPECT_EQ(one.observations, two.observations);
  // Lives are lost (training episodes end) and games end, their raw
  // returns reported; environments differ (their own no-op starts).
  EXPECT_GT(one.lives_lost, 0);
  EXPECT_GT(one.games, 0);
  EXPECT_GT(one.clipped_rewards, 0);
  const int64_t size = 4 * 84 * 84;
  EXPECT_NE(
      std::vector<uint8_t>(one.observations.begin() + 40 * 4 * size,
                           one.observations.begin() + 40 * 4 * size + size),
      std::vector<uint8_t>(
          one.observations.begin() + 40 * 4 * size + size,
          one.observations.begin() + 40 * 4 * size + 2 * size));
}

// A checkpoint's batch continues exactly where it was saved: the same
// frames, rewards, lives and games, in a batch opened with another seed,
// mid-game (lives lost, the frame stack full, no-op generators drawn).
TEST(AtariPluginTest, ASavedStateContinuesExactly) {
  const int n = 3;
  const int64_t size = 4 * 84 * 84;
  auto open = [&](int num_envs, uint64_t seed) {
    EnvOpenOptions options;
    options.num_envs = num_envs;
    options.seed = seed;
    auto env = OpenEnv(Breakout(), options);
    EXPECT_TRUE(env.ok()) << env.status();
    return env.ok() ? *std::move(env) : nullptr;
  };
  std::vector<uint8_t> obs(n * size), final_obs(n * size);
  std::vector<float> rewards(n), returns(n);
  std::vector<uint8_t> term(n), trunc(n);
  std::vector<int32_t> lengths(n);
  StepOutputs out{obs.data(),       rewards.data(), term.data(),   trunc.data(),
                  final_obs.data(), returns.data(), lengths.data()};
  std::vector<int64_t> actions(n);
  auto play = [&](BatchedEnv& env, int from, int steps, Rollout* r) {
    for (int s = from; s < from + steps; ++s) {
      for (int i = 0; i < n; ++i) actions[i] = (s * 7 + i * 3) / 5 % 4;
      ASSERT_OK(env.StepDiscrete(actions.data(), out));
      if (r == nullptr) continue;
      r->observations.insert(r->observations.end(), obs.begin(), obs.end());
      for (int i = 0; i < n; ++i) {
        r->clipped_rewards += rewards[i];
        r->lives_lost += term[i];
        if (lengths[i] > 0) r->game_returns.push_back(returns[i]);
      }
    }
  };
  auto env = open(n, 7);
  ASSERT_NE(env, nullptr);
  ASSERT_OK(env->Reset(obs.data()));
  play(*env, 0, 300, nullptr);
  const std::string saved = env->SaveState();
  ASSERT_FALSE(saved.empty());
  Rollout first, second;
  play(*env, 300, 400, &first);
  EXPECT_GT(first.lives_lost, 0);
  EXPECT_GT(first.clipped_rewards, 0);

  auto fresh = open(n, 99);
  ASSERT_NE(fresh, nullptr);
  ASSERT_OK(fresh->Reset(obs.data()));
  ASSERT_OK(fresh->RestoreState(saved));
  play(*fresh, 300, 400, &second);
  EXPECT_TRUE(first.observations == second.observations);
  EXPECT_EQ(first.clipped_rewards, second.clipped_rewards);
  EXPECT_EQ(first.lives_lost, second.lives_lost);
  EXPECT_EQ(first.game_returns, second.game_returns);

  auto other = open(n + 1, 7);
  ASSERT_NE(other, nullptr);
  EXPECT_THAT(other->RestoreState(saved).message(),
              HasSubstr("a saved batch of 3 games; this one has 4"));
  EXPECT_THAT(fresh->RestoreState(saved.substr(0, saved.size() / 2)).message(),
              HasSubstr("cut short"));
}

TEST(AtariPluginTest, BadIdsKwargsAndSpacesAreRefusedNamingThem) {
  EnvOpenOptions options;
  options.num_envs = 2;
  EnvSpec spec = Breakout();
  spec.set_id("Breakout-v4");
  EXPECT_THAT(OpenEnv(spec, options).status().message(),
              HasSubstr("Breakout-v5"));
  spec = Breakout();
  spec.set_id("NoSuchGame-v5");
  EXPECT_THAT(OpenEnv(spec, options).status().message(),
              HasSubstr("no_such_game.bin"));
  spec = Breakout();
  (*spec.mutable_kwargs()->mutable_fields())["full_action_space"]
      .set_bool_value(true);
  EXPECT_THAT(OpenEnv(spec, options).status().message(),
              HasSubstr("full_action_space"));
  spec = Breakout();
  (*spec.mutable_kwargs()->mutable_fields())["frameskip"].set_number_value(2);
  EXPECT_THAT(OpenEnv(spec, options).status().message(),
              HasSubstr("kwargs.frameskip: unknown option of plugin: atari (it "
                        "takes noop_max, frame_skip,"));
  // The run declares Pong's 6 actions for Breakout's 4.
  spec = Breakout();
  spec.set_num_discrete_actions(6);
  const absl::Status status = OpenEnv(spec, options).status();
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("6"));
}

}  // namespace
}  // namespace rl
