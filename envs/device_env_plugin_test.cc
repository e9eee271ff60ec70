// A device env (examples/device_env: PixelBreakout-v0) as actors open it on
// a host: loaded through its rl_device_env_v1 entry, its state fields in
// host memory stepped by its host build, batches that repeat under one seed
// whatever the thread count, a saved state that continues exactly, a game
// that rewards playing it, and tables and layouts refused naming what is
// wrong.
#include "envs/device_env_plugin.h"

#include <algorithm>
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

constexpr char kLibrary[] = "examples/device_env/libpixel_breakout.so";
constexpr int kSide = 36;
constexpr int64_t kObs = 2 * kSide * kSide;

EnvSpec PixelBreakout(const std::string& kwarg = "", double value = 0) {
  EnvSpec spec;
  spec.set_id("PixelBreakout-v0");
  spec.set_plugin(kLibrary);
  for (int d : {2, kSide, kSide}) spec.add_observation_shape(d);
  spec.set_observation_dtype("uint8");
  spec.set_num_discrete_actions(3);
  spec.set_reward_low(0);
  spec.set_reward_high(1);
  spec.set_max_episode_steps(400);
  if (!kwarg.empty()) {
    (*spec.mutable_kwargs()->mutable_fields())[kwarg].set_number_value(value);
  }
  EXPECT_OK(ResolveEnvSpec(&spec));
  return spec;
}

// The ball's and the paddle's columns in channel 0 of row i (-1: none).
void Find(const uint8_t* obs, int* ball, int* paddle) {
  *ball = *paddle = -1;
  for (int y = 0; y < kSide; ++y) {
    for (int x = 0; x < kSide; ++x) {
      const uint8_t v = obs[y * kSide + x];
      if (v == 255 && *ball < 0) *ball = x;
      if (v == 200 && *paddle < 0) *paddle = x;
    }
  }
}

struct Played {
  std::vector<uint8_t> observations;
  std::vector<float> rewards;
  std::vector<float> returns;  // of the episodes that ended
  int terminated = 0, truncated = 0;
};

// `steps` steps of `num_envs` envs; `follow`: move the paddle under the
// ball, else a fixed pattern of actions.
Played Play(BatchedEnv& env, int steps, bool follow) {
  const int n = env.num_envs();
  Played p;
  std::vector<uint8_t> obs(n * kObs), final_obs(n * kObs);
  std::vector<float> rewards(n), returns(n);
  std::vector<uint8_t> term(n), trunc(n);
  std::vector<int32_t> lengths(n);
  StepOutputs out{obs.data(),       rewards.data(), term.data(),   trunc.data(),
                  final_obs.data(), returns.data(), lengths.data()};
  EXPECT_OK(env.Reset(obs.data()));
  std::vector<int64_t> actions(n);
  for (int s = 0; s < steps; ++s) {
    for (int i = 0; i < n; ++i) {
      if (follow) {
        int ball, paddle;
        Find(obs.data() + i * kObs, &ball, &paddle);
        const int centre = paddle + 4;
        actions[i] = ball < 0 || paddle < 0  ? 0
                     : ball + 1 < centre - 1 ? 1
                     : ball + 1 > centre + 1 ? 2
                                             : 0;
      } else {
        actions[i] = (s * 7 + i * 3) / 5 % 3;
      }
    }
    EXPECT_OK(env.StepDiscrete(actions.data(), out));
    p.observations.insert(p.observations.end(), obs.begin(), obs.end());
    p.rewards.insert(p.rewards.end(), rewards.begin(), rewards.end());
    for (int i = 0; i < n; ++i) {
      p.terminated += term[i];
      p.truncated += trunc[i];
      if (term[i] || trunc[i]) {
        EXPECT_GT(lengths[i], 0) << "row " << i;
        p.returns.push_back(returns[i]);
      }
    }
  }
  return p;
}

std::unique_ptr<BatchedEnv> Open(const EnvSpec& spec, int num_envs, int threads,
                                 uint64_t seed = 3) {
  EnvOpenOptions options;
  options.num_envs = num_envs;
  options.seed = seed;
  options.num_threads = threads;
  auto env = OpenEnv(spec, options);
  EXPECT_TRUE(env.ok()) << env.status();
  return env.ok() ? std::move(*env) : nullptr;
}

TEST(DeviceEnvPluginTest, LoadsThroughItsDeviceEntryWithAHostBuild) {
  ASSERT_OK_AND_ASSIGN(const EnvPluginRef ref, FindEnvPlugin(PixelBreakout()));
  const rl_device_env_plugin* device = DeviceEnvTableOf(ref.table);
  ASSERT_NE(device, nullptr);
  EXPECT_NE(device->devices & RL_DEVICE_HOST, 0u);
  EXPECT_EQ(device->abi_version, RL_DEVICE_ENV_ABI_VERSION);
  // The built-in table is no device env's.
  EnvSpec cartpole;
  cartpole.set_id("CartPole-v1");
  ASSERT_OK(ResolveEnvSpec(&cartpole));
  ASSERT_OK_AND_ASSIGN(const EnvPluginRef builtin, FindEnvPlugin(cartpole));
  EXPECT_EQ(DeviceEnvTableOf(builtin.table), nullptr);
}

TEST(DeviceEnvPluginTest, BatchesRepeatUnderOneSeedOnAnyThreadCount) {
  const EnvSpec spec = PixelBreakout();
  auto one = Open(spec, 7, 1);
  auto three = Open(spec, 7, 3);
  ASSERT_NE(one, nullptr);
  ASSERT_NE(three, nullptr);
  const Played a = Play(*one, 300, false);
  const Played b = Play(*three, 300, false);
  EXPECT_TRUE(a.observations == b.observations);
  EXPECT_EQ(a.rewards, b.rewards);
  EXPECT_EQ(a.returns, b.returns);
  // Balls were lost and bricks broken: the game was played.
  EXPECT_GT(a.terminated, 7);
  EXPECT_GT(*std::max_element(a.rewards.begin(), a.rewards.end()), 0.5f);
  // Another seed, other episodes.
  auto other = Open(spec, 7, 1, /*seed=*/4);
  ASSERT_NE(other, nullptr);
  EXPECT_FALSE(Play(*other, 300, false).observations == a.observations);
}

TEST(DeviceEnvPluginTest, FollowingTheBallScoresFarMoreThanNot) {
  const EnvSpec spec = PixelBreakout();
  auto env = Open(spec, 16, 2);
  ASSERT_NE(env, nullptr);
  const Played follow = Play(*env, 800, true);
  const Played pattern = Play(*env, 800, false);
  auto mean = [](const std::vector<float>& v) {
    double s = 0;
    for (float x : v) s += x;
    return v.empty() ? 0.0 : s / v.size();
  };
  // A paddle kept under the ball never loses it and breaks a brick on
  // each of its trips up; the time limit (400 steps) ends its episodes. A
  // fixed pattern loses the ball within a brick or two.
  EXPECT_GT(mean(follow.returns), 5 * mean(pattern.returns) + 1)
      << "follow: " << follow.terminated << " lost, " << follow.truncated
      << " cut; pattern: " << pattern.terminated << " lost";
  EXPECT_GT(follow.truncated, 0);
  EXPECT_EQ(follow.terminated, 0);
}

TEST(DeviceEnvPluginTest, ASavedStateContinuesExactly) {
  const EnvSpec spec = PixelBreakout();
  auto env = Open(spec, 5, 2);
  ASSERT_NE(env, nullptr);
  Play(*env, 57, false);
  const std::string saved = env->SaveState();
  ASSERT_FALSE(saved.empty());
  std::vector<uint8_t> obs(5 * kObs), final_obs(5 * kObs);
  std::vector<float> rewards(5), returns(5);
  std::vector<uint8_t> term(5), trunc(5);
  std::vector<int32_t> lengths(5);
  StepOutputs out{obs.data(),       rewards.data(), term.data(),   trunc.data(),
                  final_obs.data(), returns.data(), lengths.data()};
  const std::vector<int64_t> actions = {0, 1, 2, 1, 0};
  std::vector<uint8_t> first, second;
  for (int s = 0; s < 40; ++s) {
    ASSERT_OK(env->StepDiscrete(actions.data(), out));
    first.insert(first.end(), obs.begin(), obs.end());
  }
  auto fresh = Open(spec, 5, 1, /*seed=*/3);
  ASSERT_NE(fresh, nullptr);
  ASSERT_OK(fresh->RestoreState(saved));
  for (int s = 0; s < 40; ++s) {
    ASSERT_OK(fresh->StepDiscrete(actions.data(), out));
    second.insert(second.end(), obs.begin(), obs.end());
  }
  EXPECT_TRUE(first == second);
  EXPECT_THAT(fresh->RestoreState(saved.substr(1)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("fields take")));
}

TEST(DeviceEnvPluginTest, BadKwargsAndActionsAreRefusedNamingThem) {
  EnvOpenOptions options;
  options.num_envs = 2;
  EXPECT_THAT(OpenEnv(PixelBreakout("paddle_width", 30), options),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("kwargs.paddle_width: must be 4-16")));
  EXPECT_THAT(OpenEnv(PixelBreakout("speed", 2), options),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("kwargs.speed: unknown")));
  auto env = Open(PixelBreakout("paddle_width", 6), 2, 1);
  ASSERT_NE(env, nullptr);
  std::vector<uint8_t> obs(2 * kObs), term(2), trunc(2);
  std::vector<float> rewards(2);
  StepOutputs out{obs.data(), rewards.data(), term.data(), trunc.data()};
  ASSERT_OK(env->Reset(obs.data()));
  const std::vector<int64_t> bad = {0, 3};
  EXPECT_THAT(env->StepDiscrete(bad.data(), out),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("action 3 of env row 1")));
}

TEST(DeviceEnvPluginTest, LayoutsAndTablesAreCheckedNamingWhatIsWrong) {
  rl_device_state_layout layout{};
  layout.num_fields = 2;
  layout.fields[0] = {"ball", RL_FIELD_INT32, 6};
  layout.fields[1] = {"ball", RL_FIELD_UINT8, 1};
  EXPECT_THAT(
      CheckDeviceStateLayout(layout, "lib"),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               HasSubstr("fields[1].name: \"ball\" is declared twice")));
  layout.fields[1] = {"two words", RL_FIELD_UINT8, 1};
  EXPECT_THAT(CheckDeviceStateLayout(layout, "lib"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("fields[1].name: must be [A-Za-z0-9_]+")));
  layout.fields[1] = {"bricks", RL_FIELD_UINT8, 0};
  EXPECT_THAT(CheckDeviceStateLayout(layout, "lib"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("fields[1] (bricks).count: must be >= 1")));
  layout.fields[1] = {"bricks", static_cast<rl_field_dtype>(9), 1};
  EXPECT_THAT(CheckDeviceStateLayout(layout, "lib"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("fields[1] (bricks).dtype: unknown (9)")));
  layout.fields[1] = {"bricks", RL_FIELD_UINT8, 18};
  EXPECT_OK(CheckDeviceStateLayout(layout, "lib"));

  ASSERT_OK_AND_ASSIGN(const EnvPluginRef ref, FindEnvPlugin(PixelBreakout()));
  rl_device_env_plugin table = *DeviceEnvTableOf(ref.table);
  EXPECT_OK(CheckDeviceEnvTable(&table, "lib"));
  table.abi_version = 2;
  EXPECT_THAT(CheckDeviceEnvTable(&table, "lib"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("built for device env ABI version 2")));
  table.abi_version = RL_DEVICE_ENV_ABI_VERSION;
  table.step = nullptr;
  EXPECT_THAT(CheckDeviceEnvTable(&table, "lib"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("required functions null: step")));
  table.step = DeviceEnvTableOf(ref.table)->step;
  table.devices = RL_DEVICE_CUDA;
  EXPECT_THAT(CheckDeviceEnvTable(&table, "lib"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("lack RL_DEVICE_HOST")));
}

TEST(DeviceEnvPluginTest, AHostBuildRefusesToStepOnCuda) {
  ASSERT_OK_AND_ASSIGN(const EnvPluginRef ref, FindEnvPlugin(PixelBreakout()));
  const rl_device_env_plugin* device = DeviceEnvTableOf(ref.table);
  ASSERT_NE(device, nullptr);
  if ((device->devices & RL_DEVICE_CUDA) != 0) {
    GTEST_SKIP() << "this build carries CUDA kernels (--config=cuda)";
  }
  rl_env_options o{};
  o.env_id = "PixelBreakout-v0";
  o.kwargs_json = "{}";
  o.num_envs = 1;
  rl_env_info info{};
  rl_device_state_layout layout{};
  char error[256] = "";
  rl_device_env* env = device->create(&o, &info, &layout, error, sizeof(error));
  ASSERT_NE(env, nullptr) << error;
  rl_device_rows rows{nullptr, 0, 0, nullptr};
  rl_env_buffers out{};
  EXPECT_NE(
      device->reset(env, RL_DEVICE_CUDA, &rows, &out, error, sizeof(error)), 0);
  EXPECT_THAT(std::string(error), HasSubstr("no CUDA kernels"));
  device->destroy(env);
}

}  // namespace
}  // namespace rl
