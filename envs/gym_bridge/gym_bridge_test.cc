// The Gymnasium bridge loaded as a plugin (as actors load it): a registered
// Gymnasium env, a user's own Python env, async worker processes, and the
// errors a user sees. Needs the venv's gymnasium (tools/setup.sh sets
// RL_PYTHON for tests).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "common/status.h"
#include "envs/env_plugin.h"
#include "envs/env_registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

class GymBridgeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Read once, when the first bridge starts the interpreter.
    setenv("PYTHONPATH", "examples/gym_env", 1);
    // The operator's allow-list of modules runs may name
    // (docs/security.md); the refusal test below narrows it.
    setenv(
        "RL_PYTHON_ENV_MODULES",
        "chase_py,bad_spaces,rendezvous_pz,tictactoe_aec,walkers_pz,rl_atari,"
        "ale_py",
        1);
  }

  static EnvSpec Spec(const std::string& id, int obs, int discrete,
                      int continuous = 0, float low = -2, float high = 2) {
    EnvSpec spec;
    spec.set_id(id);
    spec.set_plugin("envs/gym_bridge/libgym_bridge.so");
    spec.set_observation_size(obs);
    spec.set_num_discrete_actions(discrete);
    spec.set_continuous_action_size(continuous);
    if (continuous > 0) {
      spec.set_action_low(low);
      spec.set_action_high(high);
    }
    EXPECT_OK(ResolveEnvSpec(&spec));
    return spec;
  }

  static EnvOpenOptions Options(int num_envs) {
    EnvOpenOptions o;
    o.num_envs = num_envs;
    o.seed = 3;
    o.search_path = std::vector<std::string>{};
    return o;
  }
};

struct Steps {
  int episodes = 0;
  double returns = 0;
  bool finite = true;
};

// `t` steps of random discrete actions.
Steps StepRandomly(BatchedEnv& env, int n, int obs_size, int actions, int t) {
  std::vector<float> obs(n * obs_size), final_obs(n * obs_size), rewards(n),
      returns(n);
  std::vector<uint8_t> term(n), trunc(n);
  std::vector<int32_t> lengths(n);
  std::vector<int64_t> a(n);
  StepOutputs out{obs.data(),       rewards.data(), term.data(),   trunc.data(),
                  final_obs.data(), returns.data(), lengths.data()};
  EXPECT_OK(env.Reset(obs.data()));
  std::mt19937 rng(1);
  Steps s;
  for (int k = 0; k < t; ++k) {
    for (auto& x : a) x = rng() % actions;
    EXPECT_OK(env.StepDiscrete(a.data(), out));
    for (int i = 0; i < n; ++i) {
      if (term[i] || trunc[i]) {
        ++s.episodes;
        s.returns += returns[i];
        EXPECT_EQ(lengths[i], returns[i]);  // CartPole: 1 a step
      }
    }
  }
  return s;
}

TEST_F(GymBridgeTest, ARegisteredGymnasiumEnvStepsWithEpisodeInfo) {
  ASSERT_OK_AND_ASSIGN(auto env,
                       OpenEnv(Spec("CartPole-v1", 4, 2), Options(6)));
  const Steps s = StepRandomly(*env, 6, 4, 2, 300);
  // Random CartPole episodes last about 22 steps.
  EXPECT_GT(s.episodes, 40);
  EXPECT_NEAR(s.returns / s.episodes, 22, 8);
}

// Issue 46: a bare Discrete observation (FrozenLake's state index) is
// one-hot encoded, as a Discrete inside a Dict is.
TEST_F(GymBridgeTest, ADiscreteObservationIsOneHot) {
  ASSERT_OK_AND_ASSIGN(auto env,
                       OpenEnv(Spec("FrozenLake-v1", 16, 4), Options(3)));
  std::vector<float> obs(3 * 16, -1);
  ASSERT_OK(env->Reset(obs.data()));
  for (int i = 0; i < 3; ++i) {
    float sum = 0;
    for (int k = 0; k < 16; ++k) sum += obs[i * 16 + k];
    EXPECT_EQ(sum, 1) << i;
    EXPECT_EQ(obs[i * 16], 1) << i;  // every episode starts in state 0
  }
  std::vector<float> next(3 * 16), final_obs(3 * 16), rewards(3), returns(3);
  std::vector<uint8_t> term(3), trunc(3);
  std::vector<int32_t> lengths(3);
  StepOutputs out{next.data(),      rewards.data(), term.data(),   trunc.data(),
                  final_obs.data(), returns.data(), lengths.data()};
  const std::vector<int64_t> down(3, 1);
  for (int t = 0; t < 20; ++t) {
    ASSERT_OK(env->StepDiscrete(down.data(), out));
    for (int i = 0; i < 3; ++i) {
      float sum = 0;
      for (int k = 0; k < 16; ++k) sum += next[i * 16 + k];
      EXPECT_EQ(sum, 1) << i;
    }
  }
}

TEST_F(GymBridgeTest, AUsersOwnPythonEnvAndItsKwargs) {
  EnvSpec spec = Spec("chase_py:make", 2, 3);
  (*spec.mutable_kwargs()->mutable_fields())["step_size"].set_number_value(0.5);
  ASSERT_OK_AND_ASSIGN(auto env, OpenEnv(spec, Options(4)));
  std::vector<float> obs(8);
  ASSERT_OK(env->Reset(obs.data()));
  std::vector<float> next(8), rewards(4);
  std::vector<uint8_t> term(4), trunc(4);
  StepOutputs out;
  out.observations = next.data();
  out.rewards = rewards.data();
  out.terminated = term.data();
  out.truncated = trunc.data();
  const std::vector<int64_t> right(4, 2);
  ASSERT_OK(env->StepDiscrete(right.data(), out));
  for (int i = 0; i < 4; ++i) {
    if (term[i]) continue;
    // x moved right by the kwargs' step (clipped at 1).
    EXPECT_NEAR(next[2 * i], std::min(1.0f, obs[2 * i] + 0.5f), 1e-5) << i;
  }
  spec.set_num_discrete_actions(4);
  EXPECT_THAT(OpenEnv(spec, Options(1)).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("action Discrete(3), env.num_discrete_"
                                 "actions is 4")));
}

// A PettingZoo Parallel env (examples/gym_env/rendezvous_pz.py: two walkers
// on a ring that must meet): its agents are rows, copy c's agent k at row
// 2c + k, sharing the copy's end and (here, a cooperative game) its
// rewards; the run must declare the agents.
TEST_F(GymBridgeTest, APettingZooParallelEnvsAgentsAreRows) {
  EnvSpec spec = Spec("rendezvous_pz:parallel_env", 18, 3);
  spec.set_agents_per_env(2);
  constexpr int kRows = 8;
  ASSERT_OK_AND_ASSIGN(auto env, OpenEnv(spec, Options(kRows)));
  std::vector<float> obs(kRows * 18), final_obs(kRows * 18), rewards(kRows),
      returns(kRows);
  std::vector<uint8_t> term(kRows), trunc(kRows);
  std::vector<int32_t> lengths(kRows);
  StepOutputs out{obs.data(),       rewards.data(), term.data(),   trunc.data(),
                  final_obs.data(), returns.data(), lengths.data()};
  ASSERT_OK(env->Reset(obs.data()));
  for (int row = 0; row < kRows; ++row) {
    // Its own cell, then the other's: each row sees itself first.
    const int partner = row ^ 1;
    for (int k = 0; k < 9; ++k) {
      EXPECT_EQ(obs[row * 18 + k], obs[partner * 18 + 9 + k]) << row;
    }
  }
  // Walking towards each other (walker_0 right, walker_1 left) they meet
  // within 5 steps on a ring of 9, or pass each other and meet later.
  std::vector<int64_t> towards(kRows);
  for (int row = 0; row < kRows; ++row) towards[row] = row % 2 == 0 ? 2 : 0;
  int ended = 0;
  for (int step = 0; step < 40; ++step) {
    ASSERT_OK(env->StepDiscrete(towards.data(), out));
    for (int row = 0; row < kRows; row += 2) {
      EXPECT_EQ(rewards[row], rewards[row + 1]);
      EXPECT_EQ(term[row], term[row + 1]);
      EXPECT_EQ(trunc[row], trunc[row + 1]);
      if (term[row]) {
        ++ended;
        EXPECT_FLOAT_EQ(rewards[row], 0.95f);
        EXPECT_EQ(returns[row], returns[row + 1]);
        EXPECT_FLOAT_EQ(returns[row], 1.0f - 0.05f * lengths[row]);
      }
    }
  }
  EXPECT_GT(ended, 8);
  // The run must say how many agents an environment holds.
  spec.set_agents_per_env(0);
  EXPECT_THAT(OpenEnv(spec, Options(kRows)).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("2 agents per environment (walker_0, "
                                 "walker_1)")));
}

// A PettingZoo Parallel env whose agents leave early
// (examples/gym_env/walkers_pz.py: walkers from cells 1, 2, 3 stepping
// right reach the goal, cell 7, after 6, 5, 4 steps) through the ABI:
// each leaves at its own end with its own return and length, its row is
// padding (alive 0, nothing counted) until the last one is done, and then
// every row is alive again. The run must allow it.
TEST_F(GymBridgeTest, APettingZooEnvsAgentsLeaveEarlyWhereTheRunAllows) {
  EnvSpec spec = Spec("walkers_pz:parallel_env", 8, 2);
  spec.set_agents_per_env(3);
  spec.set_agents_leave(true);
  ASSERT_OK_AND_ASSIGN(auto env, OpenEnv(spec, Options(3)));
  std::vector<float> obs(3 * 8), final_obs(3 * 8), rewards(3), returns(3);
  std::vector<uint8_t> term(3), trunc(3), alive(3);
  std::vector<int32_t> lengths(3);
  StepOutputs out{obs.data(),       rewards.data(), term.data(),   trunc.data(),
                  final_obs.data(), returns.data(), lengths.data()};
  out.alive = alive.data();
  ASSERT_OK(env->Reset(obs.data()));
  const std::vector<int64_t> right(3, 1);
  std::vector<std::vector<uint8_t>> alive_by_step;
  std::vector<float> ended_returns;
  std::vector<int32_t> ended_lengths;
  for (int step = 0; step < 6; ++step) {
    ASSERT_OK(env->StepDiscrete(right.data(), out));
    alive_by_step.push_back(alive);
    for (int row = 0; row < 3; ++row) {
      if (term[row] || trunc[row]) {
        ended_returns.push_back(returns[row]);
        ended_lengths.push_back(lengths[row]);
      }
    }
  }
  using Bytes = std::vector<uint8_t>;
  EXPECT_EQ(
      alive_by_step,
      (std::vector<Bytes>{
          {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 0}, {1, 0, 0}, {1, 1, 1}}));
  EXPECT_EQ(ended_returns, (std::vector<float>{1, 1, 1}));
  EXPECT_EQ(ended_lengths, (std::vector<int32_t>{4, 5, 6}));
  EXPECT_EQ(obs[1], 1.f) << "walker_0 back in cell 1";
  // Without the run's leave, walker_2's arrival is refused, naming it.
  spec.set_agents_leave(false);
  ASSERT_OK_AND_ASSIGN(auto together, OpenEnv(spec, Options(3)));
  ASSERT_OK(together->Reset(obs.data()));
  absl::Status status;
  for (int step = 0; step < 4 && status.ok(); ++step) {
    status = together->StepDiscrete(right.data(), out);
  }
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kFailedPrecondition,
                               AllOf(HasSubstr("walker_2"),
                                     HasSubstr("env.agents_leave: true"))));
}

// A turn-based PettingZoo (AEC) game through the plugin ABI: the player to
// move gets the empty cells as its mask, the other action 0 only; a game
// ends for both rows with +1 and -1.
TEST_F(GymBridgeTest, APettingZooTurnBasedGameMovesThroughMasks) {
  EnvSpec spec = Spec("tictactoe_aec:env", 19, 9);
  spec.set_agents_per_env(2);
  constexpr int kRows = 4;
  // The game writes masks: the run must say so.
  EXPECT_THAT(OpenEnv(spec, Options(kRows)).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("it writes action masks; declare "
                                 "env.action_mask: true")));
  spec.set_action_mask(true);
  ASSERT_OK_AND_ASSIGN(auto env, OpenEnv(spec, Options(kRows)));
  std::vector<float> obs(kRows * 19), final_obs(kRows * 19), rewards(kRows),
      returns(kRows);
  std::vector<uint8_t> term(kRows), trunc(kRows), masks(kRows * 9);
  std::vector<int32_t> lengths(kRows);
  StepOutputs out{obs.data(),       rewards.data(), term.data(),   trunc.data(),
                  final_obs.data(), returns.data(), lengths.data()};
  out.action_masks = masks.data();
  ASSERT_OK(env->Reset(obs.data(), masks.data()));
  const auto allowed = [&](int row) {
    int n = 0;
    for (int k = 0; k < 9; ++k) n += masks[row * 9 + k];
    return n;
  };
  EXPECT_EQ(allowed(0), 9);
  EXPECT_EQ(allowed(1), 1);
  EXPECT_EQ(masks[1 * 9 + 0], 1);
  // Each copy: player_0 takes 0, 1, 2 (the top row), player_1 3 and 4.
  const std::vector<std::vector<int64_t>> moves = {
      {0, 0, 0, 0}, {0, 3, 0, 3}, {1, 0, 1, 0}, {0, 4, 0, 4}, {2, 0, 2, 0}};
  for (size_t t = 0; t < moves.size(); ++t) {
    ASSERT_OK(env->StepDiscrete(moves[t].data(), out));
    if (t + 1 < moves.size()) {
      EXPECT_EQ(term[0], 0) << t;
      // The mover's mask: the empty cells (9 - t - 1 after t + 1 moves).
      const int mover = t % 2 == 0 ? 1 : 0;
      EXPECT_EQ(allowed(mover), 9 - static_cast<int>(t) - 1) << t;
      EXPECT_EQ(allowed(1 - mover), 1) << t;
    }
  }
  for (int row = 0; row < kRows; ++row) {
    EXPECT_EQ(term[row], 1) << row;
    EXPECT_FLOAT_EQ(rewards[row], row % 2 == 0 ? 1.f : -1.f) << row;
    EXPECT_FLOAT_EQ(returns[row], row % 2 == 0 ? 1.f : -1.f) << row;
    EXPECT_EQ(lengths[row], 5) << row;
  }
  EXPECT_EQ(allowed(0), 9);  // the next game
}

TEST_F(GymBridgeTest, AsyncWorkerProcessesGiveTheSameEpisodes) {
  EnvSpec spec = Spec("CartPole-v1", 4, 2);
  ASSERT_OK_AND_ASSIGN(auto sync_env, OpenEnv(spec, Options(2)));
  (*spec.mutable_kwargs()->mutable_fields())["vectorization_mode"]
      .set_string_value("async");
  ASSERT_OK_AND_ASSIGN(auto async_env, OpenEnv(spec, Options(2)));
  const Steps a = StepRandomly(*sync_env, 2, 4, 2, 100);
  const Steps b = StepRandomly(*async_env, 2, 4, 2, 100);
  EXPECT_EQ(a.episodes, b.episodes);
  EXPECT_EQ(a.returns, b.returns);
}

// Gymnasium's MuJoCo (mujoco from PyPI) and ale-py's Atari (its ROMs in
// the wheel; the RAM observation), as set-up installs them.
TEST_F(GymBridgeTest, MujocoAndAtariEnvsStep) {
  ASSERT_OK_AND_ASSIGN(auto hopper,
                       OpenEnv(Spec("Hopper-v5", 11, 0, 3, -1, 1), Options(2)));
  std::vector<float> obs(22), final_obs(22), rewards(2);
  std::vector<uint8_t> term(2), trunc(2);
  StepOutputs out;
  out.observations = obs.data();
  out.final_observations = final_obs.data();
  out.rewards = rewards.data();
  out.terminated = term.data();
  out.truncated = trunc.data();
  ASSERT_OK(hopper->Reset(obs.data()));
  const std::vector<float> torques = {0.5f, -0.5f, 0.2f, 0.1f, 0.f, -1.f};
  for (int t = 0; t < 50; ++t) {
    ASSERT_OK(hopper->StepContinuous(torques.data(), out));
  }
  EnvSpec pong = Spec("ale_py:ALE/Pong-v5", 128, 6);
  (*pong.mutable_kwargs()->mutable_fields())["obs_type"].set_string_value(
      "ram");
  pong.set_reward_low(-1);
  pong.set_reward_high(1);
  ASSERT_OK_AND_ASSIGN(auto atari, OpenEnv(pong, Options(2)));
  EXPECT_EQ(StepRandomly(*atari, 2, 128, 6, 50).episodes, 0);
}

// Atari the CleanRL way (rl_atari.py): 4 stacked 84x84 grey frames, a
// lost life ends a training episode, rewards clipped to their sign, and
// the games (every life, raw rewards) reported as the episodes.
TEST_F(GymBridgeTest, AtariTheCleanRLWayReportsGamesOverLives) {
  constexpr int kEnvs = 4, kFrames = 4 * 84 * 84;
  EnvSpec spec;
  spec.set_id("rl_atari:Breakout-v5");
  spec.set_plugin("envs/gym_bridge/libgym_bridge.so");
  for (const int d : {4, 84, 84}) spec.add_observation_shape(d);
  spec.set_observation_dtype("uint8");
  spec.set_num_discrete_actions(4);
  spec.set_reward_low(-1);
  spec.set_reward_high(1);
  spec.set_episodic_life(true);
  ASSERT_OK(ResolveEnvSpec(&spec));
  ASSERT_OK_AND_ASSIGN(auto env, OpenEnv(spec, Options(kEnvs)));
  std::vector<uint8_t> obs(kEnvs * kFrames), final_obs(kEnvs * kFrames);
  std::vector<float> rewards(kEnvs), returns(kEnvs);
  std::vector<uint8_t> term(kEnvs), trunc(kEnvs);
  std::vector<int32_t> lengths(kEnvs);
  StepOutputs out{obs.data(),       rewards.data(), term.data(),   trunc.data(),
                  final_obs.data(), returns.data(), lengths.data()};
  ASSERT_OK(env->Reset(obs.data()));
  // The stack starts as four copies of the first frame.
  EXPECT_TRUE(std::equal(obs.begin(), obs.begin() + 84 * 84,
                         obs.begin() + 3 * 84 * 84));
  std::mt19937 rng(7);
  std::vector<int64_t> a(kEnvs);
  std::vector<int> seen(kEnvs), lives(kEnvs);
  std::vector<double> clipped(kEnvs);
  int life_ends = 0, games = 0;
  for (int t = 0; t < 1500; ++t) {
    for (auto& x : a) x = rng() % 4;
    ASSERT_OK(env->StepDiscrete(a.data(), out));
    for (int i = 0; i < kEnvs; ++i) {
      EXPECT_TRUE(rewards[i] == 0 || rewards[i] == 1) << rewards[i];
      ++seen[i];
      clipped[i] += rewards[i];
      life_ends += term[i] | trunc[i];
      lives[i] += term[i];
      if (lengths[i] == 0) continue;
      ASSERT_TRUE(term[i] || trunc[i]) << "a game ends on a life's end";
      ++games;
      // Every step the agent saw, and the no-op and FIRE steps the
      // resets take at each of its lives (1 + 2 a life at most).
      EXPECT_GE(lengths[i], seen[i]);
      EXPECT_LE(lengths[i], seen[i] + 3 * lives[i]);
      // Breakout's bricks give 1, 4 or 7 points: the raw return is at
      // least the clipped one.
      EXPECT_GE(returns[i], clipped[i]);
      EXPECT_EQ(lives[i], 5) << "Breakout has 5 lives";
      seen[i] = lives[i] = 0;
      clipped[i] = 0;
    }
  }
  EXPECT_GE(games, 10);  // random games last about 170 steps
  EXPECT_GE(life_ends, 4 * games);
}

// ale-py's grey frames are a uint8 Box: they pass as bytes where the run
// says observation_dtype uint8, and equal the float32 run's widened values.
TEST_F(GymBridgeTest, AtariFramesPassAsBytes) {
  auto frames = [](const std::string& dtype) {
    EnvSpec s;
    s.set_id("ale_py:ALE/Pong-v5");
    s.set_plugin("envs/gym_bridge/libgym_bridge.so");
    s.add_observation_shape(210);
    s.add_observation_shape(160);
    s.set_observation_dtype(dtype);
    s.set_num_discrete_actions(6);
    s.set_reward_low(-1);
    s.set_reward_high(1);
    (*s.mutable_kwargs()->mutable_fields())["obs_type"].set_string_value(
        "grayscale");
    EXPECT_OK(ResolveEnvSpec(&s));
    return s;
  };
  ASSERT_OK_AND_ASSIGN(auto bytes_env, OpenEnv(frames("uint8"), Options(2)));
  ASSERT_OK_AND_ASSIGN(auto float_env, OpenEnv(frames(""), Options(2)));
  constexpr int kFrame = 210 * 160;
  std::vector<uint8_t> b(2 * kFrame);
  std::vector<float> f(2 * kFrame), rewards(2), f_rewards(2);
  std::vector<uint8_t> term(2), trunc(2), f_term(2), f_trunc(2);
  ASSERT_OK(bytes_env->Reset(b.data()));
  ASSERT_OK(float_env->Reset(f.data()));
  std::set<uint8_t> levels(b.begin(), b.end());
  EXPECT_GT(levels.size(), 2u);  // a frame, not a blank
  std::mt19937 rng(5);
  for (int t = 0; t < 30; ++t) {
    const std::vector<int64_t> actions = {rng() % 6, rng() % 6};
    StepOutputs out;
    out.observations = b.data();
    out.rewards = rewards.data();
    out.terminated = term.data();
    out.truncated = trunc.data();
    ASSERT_OK(bytes_env->StepDiscrete(actions.data(), out));
    StepOutputs f_out;
    f_out.observations = f.data();
    f_out.rewards = f_rewards.data();
    f_out.terminated = f_term.data();
    f_out.truncated = f_trunc.data();
    ASSERT_OK(float_env->StepDiscrete(actions.data(), f_out));
  }
  for (int k = 0; k < 2 * kFrame; ++k) {
    ASSERT_EQ(static_cast<float>(b[k]), f[k]) << "element " << k;
  }
}

// A Dict observation arrives flattened as gymnasium.spaces.flatten does:
// keys in the space's order, a Discrete as a one-hot.
TEST_F(GymBridgeTest, DictObservationsAreFlattened) {
  ASSERT_OK_AND_ASSIGN(auto env,
                       OpenEnv(Spec("bad_spaces:make_dict", 5, 2), Options(2)));
  std::vector<float> obs(10);
  ASSERT_OK(env->Reset(obs.data()));
  EXPECT_EQ(obs,
            (std::vector<float>{0.5f, -0.5f, 0, 0, 1, 0.5f, -0.5f, 0, 0, 1}));
  EXPECT_THAT(OpenEnv(Spec("bad_spaces:make_dict", 4, 2), Options(1)).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("has 5 elements, env.observation_size is 4")));
}

// The bridge lists a Dict's parts (space_parts) as the native ABI does: a
// run may declare them (env.observation_parts, for the per-key encoder),
// checked against the env's; a Dict of uint8 Boxes only passes as bytes.
TEST_F(GymBridgeTest, DictObservationsListTheirParts) {
  auto with_parts =
      [](const std::string& id,
         std::vector<std::tuple<std::string, std::vector<int>, std::string>>
             parts) {
        EnvSpec spec;
        spec.set_id(id);
        spec.set_plugin("envs/gym_bridge/libgym_bridge.so");
        spec.set_num_discrete_actions(2);
        for (const auto& [name, shape, dtype] : parts) {
          ObservationPart* part = spec.add_observation_parts();
          part->set_name(name);
          for (int d : shape) part->add_shape(d);
          part->set_dtype(dtype);
        }
        EXPECT_OK(ResolveEnvSpec(&spec));
        return spec;
      };
  EXPECT_OK(
      OpenEnv(with_parts("bad_spaces:make_dict", {{"position", {2}, "float32"},
                                                  {"room", {3}, "float32"}}),
              Options(1))
          .status());
  EXPECT_THAT(OpenEnv(with_parts("bad_spaces:make_dict",
                                 {{"room", {3}, "float32"},
                                  {"position", {2}, "float32"}}),
                      Options(1))
                  .status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("its observation parts are (position float32 "
                                 "[2]; room float32 [3])")));
  // A scalar Box and a Discrete(3, start=1): parts of [1] and [3].
  const EnvSpec odd =
      with_parts("bad_spaces:make_odd_dict",
                 {{"level", {1}, "float32"}, {"room", {3}, "float32"}});
  ASSERT_OK_AND_ASSIGN(auto odd_env, OpenEnv(odd, Options(1)));
  std::vector<float> odd_obs(4);
  ASSERT_OK(odd_env->Reset(odd_obs.data()));
  EXPECT_EQ(odd_obs, (std::vector<float>{0.25f, 0, 1, 0}));
  const EnvSpec bytes =
      with_parts("bad_spaces:make_byte_dict",
                 {{"frame", {2, 2, 1}, "uint8"}, {"level", {1}, "uint8"}});
  EXPECT_EQ(bytes.observation_dtype(), "uint8");
  ASSERT_OK_AND_ASSIGN(auto env, OpenEnv(bytes, Options(1)));
  std::vector<uint8_t> obs(5);
  ASSERT_OK(env->Reset(obs.data()));
  EXPECT_EQ(obs, (std::vector<uint8_t>{0, 60, 120, 180, 7}));
}

TEST_F(GymBridgeTest, MultiDiscreteAndMultiBinaryActionsPassThrough) {
  auto bare = [](int obs) {
    EnvSpec spec;
    spec.set_id("bad_spaces:make_multi");
    spec.set_plugin("envs/gym_bridge/libgym_bridge.so");
    spec.set_observation_size(obs);
    return spec;
  };
  EnvSpec multi = bare(2);
  multi.add_action_nvec(3);
  multi.add_action_nvec(2);
  ASSERT_OK(ResolveEnvSpec(&multi));
  ASSERT_OK_AND_ASSIGN(auto env, OpenEnv(multi, Options(2)));
  std::vector<float> obs(4), rewards(2);
  std::vector<uint8_t> term(2), trunc(2);
  ASSERT_OK(env->Reset(obs.data()));
  StepOutputs out;
  out.observations = obs.data();
  out.rewards = rewards.data();
  out.terminated = term.data();
  out.truncated = trunc.data();
  const std::vector<int64_t> actions = {2, 1, 0, 1};  // [E, parts]
  ASSERT_OK(env->StepDiscrete(actions.data(), out));
  EXPECT_EQ(obs, (std::vector<float>{2, 1, 0, 1}));  // echoed
  const std::vector<int64_t> bad = {3, 0, 0, 0};
  EXPECT_THAT(env->StepDiscrete(bad.data(), out),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("action 3 of env row 0, part 0")));

  EnvSpec binary = bare(3);
  for (int i = 0; i < 3; ++i) binary.add_action_nvec(2);
  (*binary.mutable_kwargs()->mutable_fields())["binary"].set_bool_value(true);
  ASSERT_OK(ResolveEnvSpec(&binary));
  ASSERT_OK_AND_ASSIGN(auto bits, OpenEnv(binary, Options(1)));
  std::vector<float> obs3(3);
  ASSERT_OK(bits->Reset(obs3.data()));
  out.observations = obs3.data();
  const std::vector<int64_t> one = {1, 0, 1};
  ASSERT_OK(bits->StepDiscrete(one.data(), out));
  EXPECT_EQ(obs3, (std::vector<float>{1, 0, 1}));
  binary.set_action_nvec(0, 3);
  EXPECT_THAT(OpenEnv(binary, Options(1)).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("action MultiBinary([3]), env.action_nvec is "
                                 "[3, 2, 2]")));
}

// Dict and Tuple actions: all-discrete parts pass as one MultiDiscrete
// (Discrete one part, MultiBinary(n) n parts of 2), all-Box parts as one
// Box, in the space's order; the env gets its Dict (or Tuple) back.
TEST_F(GymBridgeTest, DictAndTupleActionsAreFlattened) {
  auto spec = [](const std::string& kind) {
    EnvSpec s;
    s.set_id("bad_spaces:make_dict_actions");
    s.set_plugin("envs/gym_bridge/libgym_bridge.so");
    s.set_observation_size(3);
    if (kind == "box") {
      s.set_continuous_action_size(3);
      s.set_action_low(-1);
      s.set_action_high(1);
      (*s.mutable_kwargs()->mutable_fields())["box"].set_bool_value(true);
    } else if (kind == "tuple") {
      for (const int n : {3, 2, 2}) s.add_action_nvec(n);
      (*s.mutable_kwargs()->mutable_fields())["tuple"].set_bool_value(true);
    } else {  // Gymnasium orders a Dict's keys: fire (2, 2), then move (3)
      for (const int n : {2, 2, 3}) s.add_action_nvec(n);
    }
    EXPECT_OK(ResolveEnvSpec(&s));
    return s;
  };
  std::vector<float> obs(6), rewards(2);
  std::vector<uint8_t> term(2), trunc(2);
  StepOutputs out;
  out.observations = obs.data();
  out.rewards = rewards.data();
  out.terminated = term.data();
  out.truncated = trunc.data();
  for (const std::string kind : {"dict", "tuple"}) {
    ASSERT_OK_AND_ASSIGN(auto env, OpenEnv(spec(kind), Options(2)));
    ASSERT_OK(env->Reset(obs.data()));
    // move 2, fire [1, 0]; move 0, fire [1, 1]: echoed flat, in the
    // order of the parts.
    const std::vector<int64_t> actions =
        kind == "tuple" ? std::vector<int64_t>{2, 1, 0, 0, 1, 1}
                        : std::vector<int64_t>{1, 0, 2, 1, 1, 0};
    ASSERT_OK(env->StepDiscrete(actions.data(), out)) << kind;
    EXPECT_EQ(obs, std::vector<float>(actions.begin(), actions.end())) << kind;
  }
  // Box parts {steer: Box(2), throttle: Box(1)}: one Box of 3 floats.
  ASSERT_OK_AND_ASSIGN(auto boxes, OpenEnv(spec("box"), Options(2)));
  ASSERT_OK(boxes->Reset(obs.data()));
  const std::vector<float> floats = {0.5f, -0.5f, 0.25f, -1, 1, 0};
  ASSERT_OK(boxes->StepContinuous(floats.data(), out));
  EXPECT_EQ(obs, floats);
}

TEST_F(GymBridgeTest, ErrorsNameWhatIsWrong) {
  EXPECT_THAT(
      OpenEnv(Spec("NoSuchEnv-v0", 4, 2), Options(1)).status(),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               AllOf(HasSubstr("create failed"), HasSubstr("NoSuchEnv"))));
  EXPECT_THAT(
      OpenEnv(Spec("bad_spaces:make", 2, 2), Options(1)).status(),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               AllOf(HasSubstr("cannot pass its action space: a Tuple"),
                     HasSubstr("mixing discrete and continuous parts (0: "
                               "Discrete, 1: Box)"))));
  EXPECT_THAT(OpenEnv(Spec("bad_spaces:broken", 2, 2), Options(1)).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("this env cannot be made")));
  EnvSpec spec = Spec("CartPole-v1", 4, 2);
  (*spec.mutable_kwargs()->mutable_fields())["vectorization_mode"]
      .set_string_value("threads");
  EXPECT_THAT(OpenEnv(spec, Options(1)).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("kwargs.vectorization_mode")));
}

// Issue 46 item 1: a run naming a module the operator did not allow (here
// os:system) is refused before anything is imported, naming the rule.
TEST_F(GymBridgeTest, AModuleTheOperatorDidNotAllowIsRefused) {
  EnvSpec spec = Spec("os:system", 2, 3);
  (*spec.mutable_kwargs()->mutable_fields())["command"].set_string_value(
      "touch /tmp/rl_bridge_pwned");
  std::remove("/tmp/rl_bridge_pwned");
  const absl::Status refused = OpenEnv(spec, Options(1)).status();
  EXPECT_THAT(refused,
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("module 'os' is not one this worker "
                                       "may import"),
                             HasSubstr("--python_env_modules"))));
  EXPECT_TRUE(IsRunFatal(refused));
  EXPECT_FALSE(std::filesystem::exists("/tmp/rl_bridge_pwned"));
}

}  // namespace
}  // namespace rl
