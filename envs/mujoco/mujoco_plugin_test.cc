// The MuJoCo plugin as actors open it: `plugin: mujoco` found beside the
// binary, its spaces checked against the run's, batches that repeat under
// one seed whatever the thread count, the time limit, and errors that name
// what is wrong.
#include <cstring>
#include <string>
#include <vector>

#include "envs/env_plugin.h"
#include "envs/env_registry.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

EnvSpec HalfCheetah() {
  EnvSpec spec;
  spec.set_id("HalfCheetah-v5");
  spec.set_plugin(kMujocoPlugin);
  spec.set_observation_size(17);
  spec.set_continuous_action_size(6);
  spec.set_action_low(-1);
  spec.set_action_high(1);
  spec.set_max_episode_steps(50);
  return spec;
}

// `spec` as the coordinator and rl_local hand it to workers.
EnvSpec Resolved(EnvSpec spec) {
  EXPECT_OK(ResolveEnvSpec(&spec));
  return spec;
}

// Observations of `steps` steps of `num_envs` environments on `threads`
// threads, with fixed actions; episode lengths where episodes ended.
struct Rollout {
  std::vector<float> observations;
  std::vector<int32_t> ended_lengths;
  int truncations = 0;
  int terminations = 0;
};

Rollout Roll(const EnvSpec& spec, int num_envs, int threads, int steps) {
  Rollout r;
  EnvOpenOptions options;
  options.num_envs = num_envs;
  options.seed = 7;
  options.num_threads = threads;
  auto env = OpenEnv(Resolved(spec), options);
  EXPECT_TRUE(env.ok()) << env.status();
  if (!env.ok()) return r;
  const int obs_size = spec.observation_size();
  const int nu = spec.continuous_action_size();
  std::vector<float> obs(num_envs * obs_size), final_obs(num_envs * obs_size),
      rewards(num_envs), returns(num_envs);
  std::vector<uint8_t> term(num_envs), trunc(num_envs);
  std::vector<int32_t> lengths(num_envs);
  StepOutputs out{obs.data(),       rewards.data(), term.data(),   trunc.data(),
                  final_obs.data(), returns.data(), lengths.data()};
  EXPECT_OK((*env)->Reset(obs.data()));
  r.observations = obs;
  std::vector<float> actions(num_envs * nu);
  for (int s = 0; s < steps; ++s) {
    for (size_t k = 0; k < actions.size(); ++k) {
      actions[k] = static_cast<float>(((s * 31 + k * 17) % 200) / 100.0 - 1.0);
    }
    EXPECT_OK((*env)->StepContinuous(actions.data(), out));
    r.observations.insert(r.observations.end(), obs.begin(), obs.end());
    for (int i = 0; i < num_envs; ++i) {
      r.truncations += trunc[i];
      r.terminations += term[i];
      if (trunc[i] || term[i]) r.ended_lengths.push_back(lengths[i]);
    }
  }
  return r;
}

TEST(MujocoPluginTest, BatchesRepeatUnderOneSeedOnAnyThreadCount) {
  const Rollout one = Roll(HalfCheetah(), 6, 1, 120);
  const Rollout two = Roll(HalfCheetah(), 6, 2, 120);
  ASSERT_EQ(one.observations.size(), two.observations.size());
  EXPECT_EQ(0, std::memcmp(one.observations.data(), two.observations.data(),
                           one.observations.size() * sizeof(float)));
  // The run's time limit (50) truncates every episode: 6 envs x 2 episodes.
  EXPECT_EQ(one.truncations, 12);
  EXPECT_EQ(one.terminations, 0);
  for (int32_t length : one.ended_lengths) EXPECT_EQ(length, 50);
  // Environments differ from one another (each its own random stream).
  EXPECT_NE(0, std::memcmp(one.observations.data(),
                           one.observations.data() + 17, 17 * sizeof(float)));
}

TEST(MujocoPluginTest, HoppersFallAndStartAgain) {
  EnvSpec spec;
  spec.set_id("Hopper-v5");
  spec.set_plugin(kMujocoPlugin);
  spec.set_observation_size(11);
  spec.set_continuous_action_size(3);
  spec.set_action_low(-1);
  spec.set_action_high(1);
  spec.set_max_episode_steps(1000);
  const Rollout r = Roll(spec, 4, 2, 200);
  EXPECT_GT(r.terminations, 0);
  EXPECT_EQ(r.truncations, 0);
}

// A saved batch restored into another (another seed, fresh) continues
// exactly: the same observations, rewards and flags bit for bit, through
// episodes that end and start again with reset noise from the restored
// generators; Ant's contacts need MuJoCo's warm start restored too.
TEST(MujocoPluginTest, ARestoredBatchContinuesExactly) {
  EnvSpec spec;
  spec.set_id("Ant-v5");
  spec.set_plugin(kMujocoPlugin);
  spec.set_observation_size(105);
  spec.set_continuous_action_size(8);
  spec.set_action_low(-1);
  spec.set_action_high(1);
  spec.set_max_episode_steps(25);
  spec = Resolved(spec);
  constexpr int kEnvs = 3, kObs = 105, kNu = 8;
  auto open = [&](uint64_t seed) {
    EnvOpenOptions options;
    options.num_envs = kEnvs;
    options.seed = seed;
    options.num_threads = 2;
    return OpenEnv(spec, options);
  };
  ASSERT_OK_AND_ASSIGN(auto first, open(7));
  ASSERT_OK_AND_ASSIGN(auto second, open(99));
  struct Out {
    std::vector<float> obs = std::vector<float>(kEnvs * kObs),
                       final_obs = std::vector<float>(kEnvs * kObs),
                       rewards = std::vector<float>(kEnvs),
                       returns = std::vector<float>(kEnvs);
    std::vector<uint8_t> term = std::vector<uint8_t>(kEnvs),
                         trunc = std::vector<uint8_t>(kEnvs);
    std::vector<int32_t> lengths = std::vector<int32_t>(kEnvs);
    StepOutputs outputs() {
      return {obs.data(),       rewards.data(), term.data(),   trunc.data(),
              final_obs.data(), returns.data(), lengths.data()};
    }
  } a, b;
  ASSERT_OK(first->Reset(a.obs.data()));
  ASSERT_OK(second->Reset(b.obs.data()));
  std::vector<float> actions(kEnvs * kNu);
  auto act = [&](int s) {
    for (size_t k = 0; k < actions.size(); ++k) {
      actions[k] = static_cast<float>(((s * 37 + k * 11) % 200) / 100.0 - 1.0);
    }
  };
  for (int s = 0; s < 15; ++s) {
    act(s);
    ASSERT_OK(first->StepContinuous(actions.data(), a.outputs()));
  }
  const std::string state = first->SaveState();
  ASSERT_FALSE(state.empty());
  ASSERT_OK(second->RestoreState(state));
  int ends = 0;
  for (int s = 15; s < 60; ++s) {  // the time limit ends episodes at 25, 50
    act(s);
    ASSERT_OK(first->StepContinuous(actions.data(), a.outputs()));
    ASSERT_OK(second->StepContinuous(actions.data(), b.outputs()));
    ASSERT_EQ(0, std::memcmp(a.obs.data(), b.obs.data(),
                             a.obs.size() * sizeof(float)))
        << "step " << s;
    ASSERT_EQ(a.rewards, b.rewards) << "step " << s;
    ASSERT_EQ(a.term, b.term) << "step " << s;
    ASSERT_EQ(a.trunc, b.trunc) << "step " << s;
    ASSERT_EQ(a.lengths, b.lengths) << "step " << s;
    for (int i = 0; i < kEnvs; ++i) ends += a.term[i] + a.trunc[i];
  }
  EXPECT_GE(ends, kEnvs);  // episodes started again after the restore
  // A state of another batch size is refused, naming both.
  EnvOpenOptions options;
  options.num_envs = 2;
  ASSERT_OK_AND_ASSIGN(auto smaller, OpenEnv(spec, options));
  const absl::Status refused = smaller->RestoreState(state);
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("of 3 envs"), absl::string_view::npos)
      << refused;
}

TEST(MujocoPluginTest, SpacesThatDisagreeWithTheRunAreRefusedNamingBoth) {
  EnvSpec spec = HalfCheetah();
  spec.set_observation_size(18);
  EnvOpenOptions options;
  auto env = OpenEnv(Resolved(spec), options);
  ASSERT_FALSE(env.ok());
  EXPECT_NE(env.status().message().find("18"), absl::string_view::npos)
      << env.status();
  EXPECT_NE(env.status().message().find("17"), absl::string_view::npos)
      << env.status();
}

TEST(MujocoPluginTest, BadIdsAndKwargsFailTheRunNamingThem) {
  EnvSpec spec = HalfCheetah();
  spec.set_id("HalfCheetah-v4");
  auto env = OpenEnv(Resolved(spec), EnvOpenOptions{});
  ASSERT_FALSE(env.ok());
  EXPECT_NE(env.status().message().find("HalfCheetah-v5"),
            absl::string_view::npos)
      << env.status();

  spec = HalfCheetah();
  (*spec.mutable_kwargs()->mutable_fields())["forward_weight"].set_number_value(
      2);
  env = OpenEnv(Resolved(spec), EnvOpenOptions{});
  ASSERT_FALSE(env.ok());
  EXPECT_NE(env.status().message().find("kwargs.forward_weight"),
            absl::string_view::npos)
      << env.status();
  EXPECT_NE(env.status().message().find("forward_reward_weight"),
            absl::string_view::npos)
      << env.status();
}

}  // namespace
}  // namespace rl
