#include "learner/device_self_check.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

struct Case {
  std::string name;
  ActorCriticConfig config;
};

std::vector<Case> Cases() {
  std::vector<Case> cases;
  ActorCriticConfig discrete;
  discrete.observation_size = 6;
  discrete.num_actions = 3;
  discrete.hidden_sizes = {16, 16};
  discrete.normalize_observations = true;
  discrete.action_masks = true;
  cases.push_back({"discrete, masks, normalised", discrete});
  ActorCriticConfig box;
  box.observation_size = 5;
  box.action_size = 2;
  box.hidden_sizes = {8};
  cases.push_back({"box", box});
  ActorCriticConfig multi;
  multi.observation_size = 4;
  multi.action_nvec = {3, 2};
  multi.hidden_sizes = {8};
  multi.byte_observations = true;
  multi.action_masks = true;  // one mask per part, side by side
  cases.push_back({"multi-discrete, uint8", multi});
  ActorCriticConfig lstm = discrete;
  lstm.action_masks = false;
  lstm.core = ActorCriticConfig::Core::kLstm;
  lstm.core_size = 8;
  cases.push_back({"lstm", lstm});
  ActorCriticConfig gru = box;
  gru.core = ActorCriticConfig::Core::kGru;
  gru.core_size = 6;
  cases.push_back({"gru", gru});
  return cases;
}

PPOConfig Ppo() {
  PPOConfig ppo;
  ppo.set_learning_rate(3e-3);
  ppo.set_gamma(0.99f);
  ppo.set_gae_lambda(0.95f);
  ppo.set_clip_coef(0.2f);
  ppo.set_entropy_coef(0.01f);
  ppo.set_value_coef(0.5f);
  ppo.set_max_grad_norm(0.5f);
  ppo.set_normalize_advantages(true);
  ppo.set_num_epochs(4);  // replaced by one epoch of one minibatch
  ppo.set_num_minibatches(4);
  return ppo;
}

// execution: auto, with `precision` and `cuda_graphs` if given.
ExecutionConfig Execution(const std::string& precision = "auto",
                          const std::string& cuda_graphs = "auto") {
  ExecutionConfig execution;
  execution.set_cpu_kernels("auto");
  execution.set_precision(precision);
  execution.set_cuda_graphs(cuda_graphs);
  return execution;
}

// The device check's comparison, run on the CPU against the CPU: the same
// code, so every tensor agrees, and an update that moved the weights at
// all (the rollout is not empty of signal).
TEST(DeviceSelfCheckTest, TheCpuAgreesWithItselfForEveryNetwork) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    ASSERT_OK_AND_ASSIGN(
        const DeviceCheckReport report,
        CheckDeviceUpdate(c.config, Ppo(), Execution(), torch::kCPU));
    EXPECT_EQ(report.device, "cpu");
    // Four losses, and every parameter and buffer.
    EXPECT_GT(report.tensors_compared, 4 + 4);
    EXPECT_LE(report.max_relative_difference, 1e-6);
  }
}

// The graphed path (execution.cuda_graphs) through its CPU stand-in: four
// minibatches (two warm-ups, a capture and replays) agree with the CPU's
// eager update for every network a graph takes, and a perturbed result is
// refused.
TEST(DeviceSelfCheckTest, AGraphedUpdateIsCheckedToo) {
  DeviceCheckOptions options;
  options.deferred_graphs_for_testing = true;
  for (const Case& c : Cases()) {
    if (c.config.core != ActorCriticConfig::Core::kNone) continue;
    SCOPED_TRACE(c.name);
    ASSERT_OK_AND_ASSIGN(
        const DeviceCheckReport report,
        CheckDeviceUpdate(c.config, Ppo(), Execution(), torch::kCPU, options));
    EXPECT_TRUE(report.cuda_graphs);
    EXPECT_LE(report.max_relative_difference, 1e-5);
  }
  // execution.cuda_graphs: on (the CPU's reference still runs eagerly).
  ASSERT_OK_AND_ASSIGN(
      const DeviceCheckReport report,
      CheckDeviceUpdate(Cases()[0].config, Ppo(), Execution("auto", "on"),
                        torch::kCPU, options));
  EXPECT_TRUE(report.cuda_graphs);
  options.perturb_for_testing = [](ActorCritic& policy) {
    torch::NoGradGuard no_grad;
    policy->parameters().back().add_(1e-2);
  };
  EXPECT_THAT(CheckDeviceUpdate(Cases()[0].config, Ppo(), Execution(),
                                torch::kCPU, options)
                  .status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST(DeviceSelfCheckTest, ADeviceThatComputesDifferentlyIsRefusedNamingWhat) {
  DeviceCheckOptions options;
  options.perturb_for_testing = [](ActorCritic& policy) {
    torch::NoGradGuard no_grad;
    auto params = policy->named_parameters();
    params[params.keys().back()].add_(1e-2);
  };
  const Case c = Cases()[0];
  ActorCritic probe = *CreateActorCritic(c.config);
  const std::string last = probe->named_parameters().keys().back();
  EXPECT_THAT(
      CheckDeviceUpdate(c.config, Ppo(), Execution(), torch::kCPU, options),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               AllOf(HasSubstr("the self-check of cpu failed"),
                     HasSubstr("parameter " + last + " differs by"),
                     HasSubstr("the tolerance is 0.0001"))));
  // A tolerance wide enough lets the same difference pass.
  options.tolerance = 0.5;
  EXPECT_OK(
      CheckDeviceUpdate(c.config, Ppo(), Execution(), torch::kCPU, options)
          .status());
}

// execution.precision: bfloat16 on the CPU (autocast works there too): the
// update really ran in bfloat16 (it differs from float32's), within the
// bfloat16 tolerance.
TEST(DeviceSelfCheckTest, ABfloat16UpdateIsComparedWithItsOwnTolerance) {
  const PPOConfig ppo = Ppo();
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    ASSERT_OK_AND_ASSIGN(
        const DeviceCheckReport report,
        CheckDeviceUpdate(c.config, ppo, Execution("bfloat16"), torch::kCPU));
    EXPECT_TRUE(report.bfloat16);
    EXPECT_EQ(report.tolerance, DeviceCheckOptions().bfloat16_tolerance);
    EXPECT_GT(report.max_relative_difference, 1e-6) << report.worst;
    EXPECT_LE(report.max_relative_difference, report.tolerance);
  }
  ASSERT_OK_AND_ASSIGN(const DeviceCheckReport f32,
                       CheckDeviceUpdate(Cases()[0].config, ppo,
                                         Execution("float32"), torch::kCPU));
  EXPECT_FALSE(f32.bfloat16);
  EXPECT_EQ(f32.max_relative_difference, 0);
}

TEST(DeviceSelfCheckTest, TheCpuNeedsNoCheck) {
  EXPECT_OK(CheckDeviceOnFirstUse(Cases()[0].config, Ppo(), Execution(),
                                  torch::kCPU));
}

}  // namespace
}  // namespace rl
