#include "actor/device_collector.h"

#include "actor/device_envs.h"
#include "envs/batched_env.h"
#include "gtest/gtest.h"
#include "testing/rollouts.h"
#include "testing/run_specs.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

// The envs on the CPU device run the host batch's very code: identical
// seeds give identical episodes, step for step.
TEST(DeviceEnvsTest, StepsAsTheHostsBatch) {
  for (const char* id : {"CartPole-v1", "Pendulum-v1"}) {
    SCOPED_TRACE(id);
    const int n = 37;
    auto host = BatchedEnv::Create(id, n, 11, 1, 30);
    ASSERT_OK(host);
    auto device = DeviceEnvs::Create(id, n, 11, torch::kCPU, 30);
    ASSERT_OK(device);
    const int64_t obs = (*host)->spec().observation_size();
    torch::Tensor host_obs = torch::zeros({n, obs});
    torch::Tensor device_obs = torch::full({n, obs}, -7.0f);
    ASSERT_OK((*host)->Reset(host_obs.data_ptr<float>()));
    ASSERT_OK((*device)->Reset(device_obs.data_ptr<float>()));
    EXPECT_TRUE(torch::equal(host_obs, device_obs));
    const bool discrete = IsDiscrete((*host)->spec());
    torch::manual_seed(3);
    int ended = 0;
    for (int t = 0; t < 80; ++t) {
      torch::Tensor actions = discrete ? torch::randint(0, 2, {n}, torch::kLong)
                                       : torch::randn({n, 1}) * 3;
      torch::Tensor r[2] = {torch::zeros({n}), torch::full({n}, -1.0f)};
      torch::Tensor term[2] = {torch::zeros({n}, torch::kUInt8),
                               torch::full({n}, 9, torch::kUInt8)};
      torch::Tensor trunc[2] = {torch::zeros({n}, torch::kUInt8),
                                torch::full({n}, 9, torch::kUInt8)};
      torch::Tensor ret[2] = {torch::zeros({n}), torch::full({n}, -1.0f)};
      torch::Tensor len[2] = {torch::zeros({n}, torch::kInt32),
                              torch::full({n}, -1, torch::kInt32)};
      StepOutputs h;
      h.observations = host_obs.data_ptr<float>();
      h.rewards = r[0].data_ptr<float>();
      h.terminated = term[0].data_ptr<uint8_t>();
      h.truncated = trunc[0].data_ptr<uint8_t>();
      h.episode_returns = ret[0].data_ptr<float>();
      h.episode_lengths = len[0].data_ptr<int32_t>();
      ASSERT_OK(discrete
                    ? (*host)->StepDiscrete(actions.data_ptr<int64_t>(), h)
                    : (*host)->StepContinuous(actions.data_ptr<float>(), h));
      StepBuffers d;
      d.observations = device_obs.data_ptr<float>();
      d.rewards = r[1].data_ptr<float>();
      d.terminated = term[1].data_ptr<uint8_t>();
      d.truncated = trunc[1].data_ptr<uint8_t>();
      d.episode_returns = ret[1].data_ptr<float>();
      d.episode_lengths = len[1].data_ptr<int32_t>();
      ASSERT_OK((*device)->Step(actions.data_ptr(), d));
      ASSERT_TRUE(torch::equal(host_obs, device_obs)) << "step " << t;
      ASSERT_TRUE(torch::equal(r[0], r[1]));
      ASSERT_TRUE(torch::equal(term[0], term[1]));
      ASSERT_TRUE(torch::equal(trunc[0], trunc[1]));
      ASSERT_TRUE(torch::equal(ret[0], ret[1]));
      ASSERT_TRUE(torch::equal(len[0], len[1]));
      ended += (term[0] | trunc[0]).sum().item<int>();
    }
    EXPECT_GT(ended, n);  // the auto-resets were compared too
  }
}

TEST(DeviceEnvsTest, RefusesWhatIsNotBuiltIn) {
  auto envs = DeviceEnvs::Create("Probe-v0", 4, 1, torch::kCPU);
  ASSERT_FALSE(envs.ok());
  EXPECT_EQ(envs.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(envs.status().message()),
              HasSubstr("not a built-in env"));
  EXPECT_FALSE(DeviceEnvs::Create("CartPole-v1", 0, 1, torch::kCPU).ok());
}

// The envs' self-check, run on the CPU as on a device: it passes against
// itself and names what differs when the device's state is off.
TEST(DeviceEnvsTest, TheSelfCheckComparesWithTheCpu) {
  EXPECT_OK(CheckDeviceEnvs("CartPole-v1", torch::kCPU, 1e-4));
  EXPECT_OK(CheckDeviceEnvs("Pendulum-v1", torch::kCPU, 1e-4));
  const absl::Status off =
      CheckDeviceEnvs("CartPole-v1", torch::kCPU, 1e-4, 1e-2);
  EXPECT_EQ(off.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(off.message()),
              HasSubstr("stepping CartPole-v1 on cpu: observations at step 0"));
  EXPECT_OK(CheckDeviceEnvsOnFirstUse("CartPole-v1", torch::kCPU));
}

RunSpec Spec(const std::string& env) {
  return SmallRunSpec("env: {id: " + env +
                      ", max_episode_steps: 40}\n"
                      "envs_per_actor: 12\nsegment_length: 64\n"
                      "ppo: {num_minibatches: 2}\n"
                      "execution: {cpu_kernels: libtorch}");
}

// On the CPU device, the device collector is the host collector: the same
// rollouts, bit for bit, segment after segment, and the same episodes.
TEST(DeviceCollectorTest, CollectsWhatTheHostCollectorCollects) {
  for (const char* id : {"CartPole-v1", "Pendulum-v1"}) {
    SCOPED_TRACE(id);
    const RunSpec spec = Spec(id);
    auto host = RolloutCollector::Create(spec, 5, 1);
    ASSERT_OK(host);
    auto device = DeviceCollector::Create(spec, 5, torch::kCPU);
    ASSERT_OK(device);
    torch::manual_seed(1);
    ActorCritic policy(RunNetworkConfig(spec));
    Rollout a = (*host)->AllocateRollout();
    Rollout b = (*device)->AllocateRollout();
    size_t episodes = 0;
    for (int segment = 0; segment < 3; ++segment) {
      ASSERT_OK((*host)->Collect(policy, &a));
      ASSERT_OK((*device)->Collect(policy, &b));
      ExpectSameRollout(a, b);
      EXPECT_EQ((*host)->episode_returns(), (*device)->episode_returns());
      EXPECT_EQ((*host)->episode_lengths(), (*device)->episode_lengths());
      episodes += (*device)->episode_returns().size();
    }
    EXPECT_GT(episodes, 12u);
    EXPECT_GT(
        b.truncated.sum().item<int64_t>() + a.truncated.sum().item<int64_t>(),
        0);
  }
}

TEST(DeviceCollectorTest, ResumesExactly) {
  const RunSpec spec = Spec("CartPole-v1");
  auto first = DeviceCollector::Create(spec, 5, torch::kCPU);
  ASSERT_OK(first);
  torch::manual_seed(1);
  ActorCritic policy(RunNetworkConfig(spec));
  Rollout a = (*first)->AllocateRollout();
  ASSERT_OK((*first)->Collect(policy, &a));
  const auto state = (*first)->SaveState();
  ASSERT_OK((*first)->Collect(policy, &a));
  auto second = DeviceCollector::Create(spec, 99, torch::kCPU);
  ASSERT_OK(second);
  ASSERT_OK((*second)->RestoreState(state));
  Rollout b = (*second)->AllocateRollout();
  ASSERT_OK((*second)->Collect(policy, &b));
  ExpectSameRollout(a, b);
  // A state of another batch size is refused, saying what does not fit.
  const RunSpec other = SmallRunSpec(
      "env: {id: CartPole-v1}\nenvs_per_actor: 3\nsegment_length: 64\n"
      "ppo: {num_minibatches: 2}");
  auto third = DeviceCollector::Create(other, 5, torch::kCPU);
  ASSERT_OK(third);
  const absl::Status refused = (*third)->RestoreState(state);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("checkpoint observations do not fit"));
}

// A checkpoint of one kind of collector is refused by the other, saying
// where its envs stepped.
TEST(DeviceCollectorTest, CheckpointsSayWhereTheirEnvsStepped) {
  const RunSpec spec = Spec("CartPole-v1");
  auto host = RolloutCollector::Create(spec, 5, 1);
  ASSERT_OK(host);
  auto device = DeviceCollector::Create(spec, 5, torch::kCPU);
  ASSERT_OK(device);
  const absl::Status from_host = (*device)->RestoreState((*host)->SaveState());
  EXPECT_EQ(from_host.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(from_host.message()),
              HasSubstr("envs stepped on the host"));
  const absl::Status from_device =
      (*host)->RestoreState((*device)->SaveState());
  EXPECT_EQ(from_device.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(from_device.message()),
              HasSubstr("envs stepped on a GPU"));
}

// The host's collector wherever the envs cannot or need not step on the
// device: acting on the CPU, or a plugin env.
TEST(DeviceCollectorTest, TheFactoryPicksTheHostsCollectorOnTheCpu) {
  auto collector =
      CreateSegmentCollector(Spec("CartPole-v1"), 5, 1, torch::kCPU);
  ASSERT_OK(collector);
  EXPECT_NE(dynamic_cast<RolloutCollector*>(collector->get()), nullptr);
  EXPECT_TRUE((*collector)->rollout_device().is_cpu());
}

TEST(DeviceCollectorTest, SaysWhatStaysOnTheHost) {
  const struct {
    const char* yaml;
    const char* field;
  } cases[] = {
      {"env: {id: CartPole-v1}\npolicy: {core: lstm}", "policy.core"},
      {"env: {id: CartPole-v1}\nppo: {normalize_rewards: true}",
       "ppo.normalize_rewards"},
  };
  for (const auto& c : cases) {
    const absl::Status status = DeviceCollector::Supports(SmallRunSpec(c.yaml));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.yaml;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.field));
  }
  EXPECT_OK(DeviceCollector::Supports(Spec("CartPole-v1")));
  // A plugin that is no device env is found out when it is loaded.
  const auto plugin = DeviceCollector::Create(
      SmallRunSpec(
          "env: {id: Probe-v0, plugin: envs/testdata/libtest_plugin.so,"
          "\n      observation_size: 3, num_discrete_actions: 2}"),
      1, torch::kCPU);
  EXPECT_EQ(plugin.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(plugin.status().message()),
              HasSubstr("env.plugin: envs/testdata/libtest_plugin.so is not a "
                        "device env"));
}

}  // namespace
}  // namespace rl
