// A user's device env (examples/device_env: PixelBreakout-v0) with its
// fields as tensors on a device. On the CPU device it runs the library's
// host build, as the host's collector does through the native table: the
// device collector then collects exactly what the host's collector
// collects, resumes exactly, and the first-use self-check (run on the CPU
// here) catches a device that steps otherwise.
#include "actor/device_plugin_envs.h"

#include "absl/time/clock.h"
#include "actor/device_collector.h"
#include "envs/call_watch.h"
#include "envs/device_env_plugin.h"
#include "envs/env_plugin.h"
#include "gtest/gtest.h"
#include "testing/rollouts.h"
#include "testing/run_specs.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

RunSpec Spec() {
  return SmallRunSpec(
      "env: {id: PixelBreakout-v0,\n"
      "      plugin: examples/device_env/libpixel_breakout.so,\n"
      "      observation_shape: [2, 36, 36], observation_dtype: uint8,\n"
      "      num_discrete_actions: 3, reward_low: 0, reward_high: 1,\n"
      "      max_episode_steps: 30}\n"
      "envs_per_actor: 6\nsegment_length: 48\n"
      "ppo: {num_minibatches: 2}\n");
}

const rl_device_env_plugin* Table(const EnvSpec& env, std::string* origin) {
  auto plugin = FindEnvPlugin(env);
  EXPECT_TRUE(plugin.ok()) << plugin.status();
  if (!plugin.ok()) return nullptr;
  *origin = plugin->origin;
  return DeviceEnvTableOf(plugin->table);
}

TEST(DevicePluginEnvsTest, TheDeviceCollectorCollectsWhatTheHostsCollects) {
  const RunSpec spec = Spec();
  auto host = RolloutCollector::Create(spec, 5, 1);
  ASSERT_OK(host);
  auto device = DeviceCollector::Create(spec, 5, torch::kCPU);
  ASSERT_OK(device);
  torch::manual_seed(1);
  ActorCritic policy(RunNetworkConfig(spec));
  Rollout a = (*host)->AllocateRollout();
  Rollout b = (*device)->AllocateRollout();
  EXPECT_EQ(b.observations.scalar_type(), torch::kUInt8);
  size_t episodes = 0;
  for (int segment = 0; segment < 3; ++segment) {
    ASSERT_OK((*host)->Collect(policy, &a));
    ASSERT_OK((*device)->Collect(policy, &b));
    ExpectSameRollout(a, b);
    EXPECT_EQ((*host)->episode_returns(), (*device)->episode_returns());
    EXPECT_EQ((*host)->episode_lengths(), (*device)->episode_lengths());
    episodes += (*device)->episode_returns().size();
  }
  EXPECT_GT(episodes, 6u);
  EXPECT_GT(b.observations.max().item<int>(), 200);  // the ball is drawn
}

TEST(DevicePluginEnvsTest, TheDeviceCollectorResumesExactly) {
  const RunSpec spec = Spec();
  auto first = DeviceCollector::Create(spec, 5, torch::kCPU);
  ASSERT_OK(first);
  torch::manual_seed(1);
  ActorCritic policy(RunNetworkConfig(spec));
  Rollout a = (*first)->AllocateRollout();
  ASSERT_OK((*first)->Collect(policy, &a));
  const auto state = (*first)->SaveState();
  EXPECT_EQ(state.count("collector.device_env.field.bricks"), 1u);
  ASSERT_OK((*first)->Collect(policy, &a));
  auto second = DeviceCollector::Create(spec, 5, torch::kCPU);
  ASSERT_OK(second);
  ASSERT_OK((*second)->RestoreState(state));
  Rollout b = (*second)->AllocateRollout();
  ASSERT_OK((*second)->Collect(policy, &b));
  ExpectSameRollout(a, b);
  auto broken = state;
  broken["collector.device_env.field.ball"] =
      torch::zeros({6, 5}, torch::kInt32);
  const absl::Status refused = (*second)->RestoreState(broken);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("collector.device_env.field.ball: Int [6, 5] does not "
                        "fit PixelBreakout-v0 x 6 envs (Int [6, 6])"));
}

TEST(DevicePluginEnvsTest, TheSelfCheckComparesWithTheHostBuild) {
  const RunSpec spec = Spec();
  std::string origin;
  const rl_device_env_plugin* table = Table(spec.env(), &origin);
  ASSERT_NE(table, nullptr);
  EXPECT_OK(CheckDevicePluginEnvs(table, origin, spec.env(), torch::kCPU, 0));
  // A device whose float fields drift: the returns it reports differ.
  const absl::Status drift = CheckDevicePluginEnvs(
      table, origin, spec.env(), torch::kCPU, 1e-4, /*perturb=*/0.5);
  EXPECT_EQ(drift.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(drift.message()),
              HasSubstr("episode returns at step"));
}

// The library's calls were not watched on the device path (the host's
// were): a step that hung hung the actor for good, env.call_timeout_s or
// not. A step that outlives its deadline is now an overrun of the process's
// call watch, which ends an actor worker naming it.
const rl_device_env_plugin* g_table = nullptr;
int SlowStep(const rl_device_env* env, rl_device device,
             const rl_device_rows* rows, const void* actions,
             const rl_env_buffers* out, char* error, size_t error_size) {
  // Until the watch has seen the overrun (a deadline, not a sleep).
  const int64_t before = CallWatch::Process().overruns();
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (CallWatch::Process().overruns() == before && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  return g_table->step(env, device, rows, actions, out, error, error_size);
}

TEST(DevicePluginEnvsTest, AStepOverItsDeadlineIsSeenByTheCallWatch) {
  RunSpec spec = Spec();
  spec.mutable_env()->set_call_timeout_s(0.2f);
  std::string origin;
  g_table = Table(spec.env(), &origin);
  ASSERT_NE(g_table, nullptr);
  rl_device_env_plugin slow = *g_table;
  slow.step = &SlowStep;
  ASSERT_OK_AND_ASSIGN(
      auto envs,
      DevicePluginEnvs::Create(&slow, origin, spec.env(), 2, 1, torch::kCPU));
  const int64_t before = CallWatch::Process().overruns();
  std::vector<int64_t> actions(2, 0);
  std::vector<uint8_t> observations(2 * 2 * 36 * 36), terminated(2),
      truncated(2);
  std::vector<float> rewards(2);
  rl_env_buffers out{};
  out.observations = observations.data();
  out.rewards = rewards.data();
  out.terminated = terminated.data();
  out.truncated = truncated.data();
  ASSERT_OK(envs->Step(actions.data(), out));
  EXPECT_EQ(CallWatch::Process().overruns(), before + 1);
}

TEST(DevicePluginEnvsTest, WhatTheDeviceCannotDoIsRefused) {
  const RunSpec spec = Spec();
  std::string origin;
  const rl_device_env_plugin* table = Table(spec.env(), &origin);
  ASSERT_NE(table, nullptr);
  if ((table->devices & RL_DEVICE_CUDA) != 0) {
    GTEST_SKIP() << "this build carries CUDA kernels (--config=cuda)";
  }
  const auto gpu = DevicePluginEnvs::Create(table, origin, spec.env(), 4, 1,
                                            torch::Device("cuda:0"));
  EXPECT_EQ(gpu.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(gpu.status().message()),
              HasSubstr("was built without CUDA kernels"));
  EXPECT_FALSE(
      DevicePluginEnvs::Create(table, origin, spec.env(), 0, 1, torch::kCPU)
          .ok());
  // The host's path widens uint8 frames for a float32 run; the device's
  // writes the run's buffers itself, so the dtypes must agree.
  EnvSpec floats = spec.env();
  floats.set_observation_dtype("float32");
  const auto widened =
      DevicePluginEnvs::Create(table, origin, floats, 4, 1, torch::kCPU);
  EXPECT_EQ(widened.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(widened.status().message()),
              HasSubstr("writes uint8 observations; the run takes float32"));
}

}  // namespace
}  // namespace rl
