#include "envs/batched_env.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "envs/env_batch.h"
#include "envs/env_registry.h"
#include "envs/random_stream.h"
#include "envs/trig.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

const char* const kAllIds[] = {"CartPole-v1", "Acrobot-v1", "MountainCar-v0",
                               "Pendulum-v1", "MountainCarContinuous-v0"};

std::unique_ptr<BatchedEnv> MustCreate(const std::string& id, int num_envs,
                                       uint64_t seed, int num_threads = 1,
                                       int max_episode_steps = 0) {
  auto env =
      BatchedEnv::Create(id, num_envs, seed, num_threads, max_episode_steps);
  EXPECT_OK(env);
  return *std::move(env);
}

// Output buffers of one step, with optional outputs present.
struct StepRecord {
  StepRecord(int num_envs, int obs_size)
      : obs(num_envs * obs_size),
        final_obs(num_envs * obs_size, -99.0f),
        rewards(num_envs),
        terminated(num_envs),
        truncated(num_envs),
        returns(num_envs),
        lengths(num_envs) {}
  StepOutputs outputs() {
    StepOutputs out;
    out.observations = obs.data();
    out.rewards = rewards.data();
    out.terminated = terminated.data();
    out.truncated = truncated.data();
    out.final_observations = final_obs.data();
    out.episode_returns = returns.data();
    out.episode_lengths = lengths.data();
    return out;
  }
  bool operator==(const StepRecord& o) const {
    return obs == o.obs && final_obs == o.final_obs && rewards == o.rewards &&
           terminated == o.terminated && truncated == o.truncated &&
           returns == o.returns && lengths == o.lengths;
  }
  std::vector<float> obs, final_obs, rewards;
  std::vector<uint8_t> terminated, truncated;
  std::vector<float> returns;
  std::vector<int32_t> lengths;
};

// Steps `env` with actions from a fixed generator: random valid actions, and
// for continuous tasks also out-of-bound ones (clipped by the env).
absl::Status StepRandom(BatchedEnv& env, std::mt19937_64& rng,
                        StepRecord& rec) {
  const EnvSpec& info = env.spec();
  const int n = env.num_envs();
  if (IsDiscrete(info)) {
    std::vector<int64_t> actions(n);
    for (int64_t& a : actions) a = rng() % info.num_discrete_actions();
    return env.StepDiscrete(actions.data(), rec.outputs());
  }
  std::uniform_real_distribution<float> u(1.5f * info.action_low(),
                                          1.5f * info.action_high());
  std::vector<float> actions(n * info.continuous_action_size());
  for (float& a : actions) a = u(rng);
  return env.StepContinuous(actions.data(), rec.outputs());
}

// Whether `obs` is a first observation of the task's initial-state
// distribution (Gymnasium's reset ranges, observed as float32).
bool IsInitialObservation(const std::string& id, const float* obs) {
  if (id == "CartPole-v1") {
    for (int k = 0; k < 4; ++k) {
      if (!(obs[k] >= -0.05f && obs[k] <= 0.05f)) return false;
    }
    return true;
  }
  if (id == "Acrobot-v1") {
    const double t1 = std::atan2(obs[1], obs[0]);
    const double t2 = std::atan2(obs[3], obs[2]);
    return std::fabs(t1) <= 0.1 + 1e-6 && std::fabs(t2) <= 0.1 + 1e-6 &&
           std::fabs(obs[4]) <= 0.1f && std::fabs(obs[5]) <= 0.1f;
  }
  if (id == "MountainCar-v0" || id == "MountainCarContinuous-v0") {
    return obs[0] >= -0.6f && obs[0] <= -0.4f && obs[1] == 0.0f;
  }
  if (id == "Pendulum-v1") {
    return std::fabs(obs[0] * obs[0] + obs[1] * obs[1] - 1.0f) < 1e-5f &&
           obs[2] >= -1.0f && obs[2] <= 1.0f;
  }
  return false;
}

TEST(BatchedEnvTest, UnknownIdListsKnownIds) {
  auto env = BatchedEnv::Create("Breakout-v5", 4, 0);
  ASSERT_THAT(env, StatusIs(absl::StatusCode::kInvalidArgument,
                            HasSubstr("Breakout-v5")));
  const std::string message(env.status().message());
  for (const char* id : kAllIds) EXPECT_THAT(message, HasSubstr(id));
  EXPECT_EQ(RegisteredEnvIds().size(), 5u);
}

TEST(BatchedEnvTest, RejectsBadSizes) {
  EXPECT_THAT(BatchedEnv::Create("CartPole-v1", 0, 0),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(BatchedEnv::Create("CartPole-v1", 4, 0, 0),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(BatchedEnv::Create("CartPole-v1", 4, 0, 1, -1),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(BatchedEnvTest, DescribesGymnasiumSpacesAndTimeLimits) {
  struct Want {
    const char* id;
    int obs, num_actions, action_size;
    float low, high;
    int max_steps, state_size;
  };
  const Want wants[] = {
      {"CartPole-v1", 4, 2, 0, 0, 0, 500, 4},
      {"Acrobot-v1", 6, 3, 0, 0, 0, 500, 4},
      {"MountainCar-v0", 2, 3, 0, 0, 0, 200, 2},
      {"Pendulum-v1", 3, 0, 1, -2, 2, 200, 2},
      {"MountainCarContinuous-v0", 2, 0, 1, -1, 1, 999, 2},
  };
  for (const Want& w : wants) {
    auto env = MustCreate(w.id, 3, 1);
    const EnvSpec& info = env->spec();
    EXPECT_EQ(info.id(), w.id);
    EXPECT_EQ(info.observation_size(), w.obs) << w.id;
    EXPECT_EQ(info.num_discrete_actions(), w.num_actions) << w.id;
    EXPECT_EQ(info.continuous_action_size(), w.action_size) << w.id;
    EXPECT_EQ(info.action_low(), w.low) << w.id;
    EXPECT_EQ(info.action_high(), w.high) << w.id;
    EXPECT_EQ(info.max_episode_steps(), w.max_steps) << w.id;
    EXPECT_EQ(env->state_size(), w.state_size) << w.id;
    EXPECT_EQ(env->num_envs(), 3);
  }
  EXPECT_EQ(MustCreate("CartPole-v1", 1, 0, 1, 7)->spec().max_episode_steps(),
            7);
}

TEST(SinCosTest, AgreesWithLibm) {
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> small(-4.0, 4.0), large(-1e5, 1e5);
  double worst = 0;
  for (int i = 0; i < 200000; ++i) {
    const double x = i % 2 ? small(rng) : large(rng);
    double s, c;
    SinCos(x, &s, &c);
    worst = std::fmax(worst, std::fabs(s - std::sin(x)));
    worst = std::fmax(worst, std::fabs(c - std::cos(x)));
  }
  EXPECT_LT(worst, 4e-16);
  double s, c;
  SinCos(0.0, &s, &c);
  EXPECT_EQ(s, 0.0);
  EXPECT_EQ(c, 1.0);
}

TEST(RandomStreamTest, StatelessAndDistinctPerKey) {
  const RandomStream a(5, 3, 1), same(5, 3, 1);
  EXPECT_EQ(a.Uniform(0), same.Uniform(0));
  EXPECT_NE(a.Uniform(0), a.Uniform(1));
  EXPECT_NE(a.Uniform(0), RandomStream(6, 3, 1).Uniform(0));
  EXPECT_NE(a.Uniform(0), RandomStream(5, 4, 1).Uniform(0));
  EXPECT_NE(a.Uniform(0), RandomStream(5, 3, 2).Uniform(0));
  // Roughly uniform on [0, 1).
  double sum = 0;
  int below_tenth = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const double u = RandomStream(9, i, 1).Uniform(0);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    below_tenth += u < 0.1;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.005);
  EXPECT_NEAR(below_tenth / static_cast<double>(n), 0.1, 0.005);
}

// Same seed, same run, whatever the number of threads and however the 37
// environments are split; a different seed gives a different run.
TEST(BatchedEnvTest, DeterministicAcrossThreadCounts) {
  for (const char* id : kAllIds) {
    std::vector<std::vector<StepRecord>> runs;
    for (int threads : {1, 2, 3}) {
      auto env = MustCreate(id, 37, 1234, threads);
      const int obs_size = env->spec().observation_size();
      std::mt19937_64 rng(99);
      std::vector<StepRecord> run;
      StepRecord reset(37, obs_size);
      ASSERT_OK(env->Reset(reset.obs.data()));
      run.push_back(reset);
      for (int t = 0; t < 600; ++t) {
        run.emplace_back(37, obs_size);
        ASSERT_OK(StepRandom(*env, rng, run.back()));
      }
      runs.push_back(std::move(run));
    }
    for (size_t t = 0; t < runs[0].size(); ++t) {
      ASSERT_TRUE(runs[0][t] == runs[1][t]) << id << " step " << t;
      ASSERT_TRUE(runs[0][t] == runs[2][t]) << id << " step " << t;
    }
    auto other = MustCreate(id, 37, 1235, 1);
    StepRecord other_reset(37, other->spec().observation_size());
    ASSERT_OK(other->Reset(other_reset.obs.data()));
    EXPECT_NE(other_reset.obs, runs[0][0].obs) << id;
  }
}

// Episodes end, their final observation and statistics are reported, and
// the environment restarts from its initial-state distribution in the same
// step; other rows are left alone.
TEST(BatchedEnvTest, AutoResetsIntoInitialStates) {
  for (const char* id : kAllIds) {
    const int n = 16;
    auto env = MustCreate(id, n, 42, 2, /*max_episode_steps=*/60);
    const int obs_size = env->spec().observation_size();
    std::vector<float> first(n * obs_size);
    ASSERT_OK(env->Reset(first.data()));
    for (int e = 0; e < n; ++e) {
      ASSERT_TRUE(IsInitialObservation(id, &first[e * obs_size])) << id;
    }
    std::mt19937_64 rng(7);
    std::vector<int> length(n, 0);
    std::vector<double> ret(n, 0.0);
    int episodes = 0;
    for (int t = 0; t < 200; ++t) {
      StepRecord rec(n, obs_size);
      ASSERT_OK(StepRandom(*env, rng, rec));
      for (int e = 0; e < n; ++e) {
        ++length[e];
        ret[e] += rec.rewards[e];
        ASSERT_FALSE(rec.terminated[e] && rec.truncated[e]);
        const float* final_obs = &rec.final_obs[e * obs_size];
        if (!rec.terminated[e] && !rec.truncated[e]) {
          ASSERT_EQ(rec.lengths[e], 0);
          ASSERT_EQ(rec.returns[e], 0.0f);
          ASSERT_EQ(final_obs[0], -99.0f) << "final row of a running env";
          continue;
        }
        ++episodes;
        ASSERT_EQ(rec.truncated[e], length[e] == 60 && !rec.terminated[e]);
        ASSERT_EQ(rec.lengths[e], length[e]) << id;
        ASSERT_NEAR(rec.returns[e], ret[e],
                    1e-3 * std::fmax(1, std::fabs(ret[e])));
        ASSERT_TRUE(IsInitialObservation(id, &rec.obs[e * obs_size])) << id;
        ASSERT_NE(std::memcmp(final_obs, &rec.obs[e * obs_size],
                              obs_size * sizeof(float)),
                  0);
        length[e] = 0;
        ret[e] = 0;
      }
    }
    EXPECT_GE(episodes, 2 * n) << id;
  }
}

TEST(BatchedEnvTest, CartPoleRewardsEveryStepIncludingTheLast) {
  auto env = MustCreate("CartPole-v1", 64, 3);
  std::mt19937_64 rng(3);
  int ended = 0;
  for (int t = 0; t < 100; ++t) {
    StepRecord rec(64, 4);
    ASSERT_OK(StepRandom(*env, rng, rec));
    for (int e = 0; e < 64; ++e) {
      ASSERT_EQ(rec.rewards[e], 1.0f);
      if (rec.terminated[e]) {
        ++ended;
        ASSERT_EQ(rec.returns[e], static_cast<float>(rec.lengths[e]));
        // Terminated: the pole or the cart is past its threshold.
        const float* f = &rec.final_obs[e * 4];
        ASSERT_TRUE(std::fabs(f[0]) > 2.4f || std::fabs(f[2]) > 0.2094f);
      }
    }
  }
  EXPECT_GT(ended, 64);
}

// A state that terminates at exactly step T, run under a time limit of T:
// terminated, not truncated. Under a limit of T - 1: truncated at T - 1.
TEST(BatchedEnvTest, TerminatedAndTruncatedAreSeparate) {
  const double start[4] = {2.0, 1.0, 0.0, 0.0};
  auto probe = MustCreate("CartPole-v1", 1, 0);
  ASSERT_OK(probe->SetState(0, start, 4));
  StepRecord rec(1, 4);
  const int64_t push_right = 1;
  int steps_to_end = 0;
  do {
    ASSERT_OK(probe->StepDiscrete(&push_right, rec.outputs()));
    ++steps_to_end;
    ASSERT_EQ(rec.truncated[0], 0);
  } while (!rec.terminated[0]);
  ASSERT_GT(steps_to_end, 3);

  for (int limit : {steps_to_end, steps_to_end - 1}) {
    auto env = MustCreate("CartPole-v1", 1, 0, 1, limit);
    ASSERT_OK(env->SetState(0, start, 4));
    for (int t = 1; t <= limit; ++t) {
      StepRecord r(1, 4);
      ASSERT_OK(env->StepDiscrete(&push_right, r.outputs()));
      const bool last = t == limit;
      EXPECT_EQ(r.terminated[0], last && limit == steps_to_end) << t;
      EXPECT_EQ(r.truncated[0], last && limit < steps_to_end) << t;
      if (last) {
        EXPECT_EQ(r.lengths[0], limit);
      }
    }
  }
}

TEST(BatchedEnvTest, StepBeforeResetStartsFromInitialStates) {
  auto env = MustCreate("MountainCar-v0", 8, 11);
  StepRecord rec(8, 2);
  std::vector<int64_t> actions(8, 1);
  ASSERT_OK(env->StepDiscrete(actions.data(), rec.outputs()));
  for (int e = 0; e < 8; ++e) {
    EXPECT_GE(rec.obs[2 * e], -0.7f);
    EXPECT_LE(rec.obs[2 * e], -0.3f);
    EXPECT_EQ(rec.terminated[e], 0);
  }
}

// Bad actions: INVALID_ARGUMENT naming the row, no output written, and no
// environment stepped (the next good step matches an env that never saw the
// bad call).
TEST(BatchedEnvTest, BadDiscreteActionStepsNothing) {
  auto env = MustCreate("CartPole-v1", 8, 5, 2);
  auto twin = MustCreate("CartPole-v1", 8, 5, 1);
  for (int64_t bad : {int64_t{2}, int64_t{-1}}) {
    std::vector<int64_t> actions(8, 1);
    actions[5] = bad;
    StepRecord rec(8, 4);
    std::fill(rec.obs.begin(), rec.obs.end(), 7.0f);
    const absl::Status status =
        env->StepDiscrete(actions.data(), rec.outputs());
    ASSERT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                                 HasSubstr("row 5")));
    for (float x : rec.obs) ASSERT_EQ(x, 7.0f);
  }
  std::vector<int64_t> good(8, 0);
  StepRecord a(8, 4), b(8, 4);
  ASSERT_OK(env->StepDiscrete(good.data(), a.outputs()));
  ASSERT_OK(twin->StepDiscrete(good.data(), b.outputs()));
  EXPECT_TRUE(a == b);
}

TEST(BatchedEnvTest, NonFiniteContinuousActionStepsNothing) {
  for (const char* id : {"Pendulum-v1", "MountainCarContinuous-v0"}) {
    auto env = MustCreate(id, 6, 5);
    auto twin = MustCreate(id, 6, 5);
    const int obs_size = env->spec().observation_size();
    for (float bad : {std::numeric_limits<float>::quiet_NaN(),
                      std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity()}) {
      std::vector<float> actions(6, 0.5f);
      actions[3] = bad;
      StepRecord rec(6, obs_size);
      const absl::Status status =
          env->StepContinuous(actions.data(), rec.outputs());
      ASSERT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                                   HasSubstr("row 3")))
          << id;
    }
    std::vector<float> good(6, 0.25f);
    StepRecord a(6, obs_size), b(6, obs_size);
    ASSERT_OK(env->StepContinuous(good.data(), a.outputs()));
    ASSERT_OK(twin->StepContinuous(good.data(), b.outputs()));
    EXPECT_TRUE(a == b) << id;
  }
}

TEST(BatchedEnvTest, WrongActionKindAndMissingOutputsAreRejected) {
  auto cartpole = MustCreate("CartPole-v1", 2, 0);
  auto pendulum = MustCreate("Pendulum-v1", 2, 0);
  StepRecord rec(2, 4), prec(2, 3);
  const float f[2] = {0, 0};
  const int64_t d[2] = {0, 0};
  EXPECT_THAT(cartpole->StepContinuous(f, rec.outputs()),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(pendulum->StepDiscrete(d, prec.outputs()),
              StatusIs(absl::StatusCode::kInvalidArgument));
  StepOutputs missing = rec.outputs();
  missing.rewards = nullptr;
  EXPECT_THAT(cartpole->StepDiscrete(d, missing),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // Optional outputs may be left out.
  StepOutputs minimal = rec.outputs();
  minimal.final_observations = nullptr;
  minimal.episode_returns = nullptr;
  minimal.episode_lengths = nullptr;
  EXPECT_OK(cartpole->StepDiscrete(d, minimal));
}

TEST(BatchedEnvTest, SetStateValidates) {
  auto env = MustCreate("Pendulum-v1", 2, 0);
  const double good[2] = {0.5, -0.25};
  const double nan[2] = {0.5, std::nan("")};
  EXPECT_THAT(env->SetState(2, good, 2),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(env->SetState(-1, good, 2),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(env->SetState(0, good, 3),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(env->SetState(0, nan, 2),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(env->SetElapsedSteps(0, 200),
              StatusIs(absl::StatusCode::kInvalidArgument));
  ASSERT_OK(env->SetState(1, good, 2));
  // The observation after one step comes from the state that was set.
  StepRecord rec(2, 3);
  const float zero[2] = {0, 0};
  ASSERT_OK(env->StepContinuous(zero, rec.outputs()));
  const double thdot = -0.25 + 15.0 * std::sin(0.5) * 0.05;
  EXPECT_NEAR(rec.obs[3 + 2], thdot, 1e-6);
  EXPECT_NEAR(rec.obs[3 + 0], std::cos(0.5 + thdot * 0.05), 1e-6);
}

TEST(BatchedEnvTest, SaveAndRestoreContinueExactly) {
  auto env = MustCreate("Acrobot-v1", 9, 77, 2);
  std::mt19937_64 rng(1);
  for (int t = 0; t < 150; ++t) {
    StepRecord rec(9, 6);
    ASSERT_OK(StepRandom(*env, rng, rec));
  }
  const std::string saved = env->SaveState();
  // Another seed and thread count: the saved seed is adopted.
  auto restored = MustCreate("Acrobot-v1", 9, 1, 3);
  ASSERT_OK(restored->RestoreState(saved));
  std::mt19937_64 rng_b = rng;
  // 400 steps: many episodes end and restart from the random streams.
  for (int t = 0; t < 400; ++t) {
    StepRecord a(9, 6), b(9, 6);
    ASSERT_OK(StepRandom(*env, rng, a));
    ASSERT_OK(StepRandom(*restored, rng_b, b));
    ASSERT_TRUE(a == b) << "step " << t;
  }
  auto other_size = MustCreate("Acrobot-v1", 8, 77);
  EXPECT_THAT(other_size->RestoreState(saved),
              StatusIs(absl::StatusCode::kInvalidArgument));
  auto other_task = MustCreate("CartPole-v1", 9, 77);
  EXPECT_THAT(other_task->RestoreState(saved),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(restored->RestoreState(saved.substr(0, saved.size() - 1)),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace rl
