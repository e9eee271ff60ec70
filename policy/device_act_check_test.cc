#include "policy/device_act_check.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::vector<ActorCriticConfig> Configs() {
  ActorCriticConfig discrete;
  discrete.observation_size = 6;
  discrete.num_actions = 4;
  discrete.hidden_sizes = {16};
  discrete.action_masks = true;
  ActorCriticConfig box;
  box.observation_size = 3;
  box.action_size = 2;
  box.hidden_sizes = {8};
  box.normalize_observations = true;
  ActorCriticConfig multi;
  multi.observation_size = 5;
  multi.action_nvec = {3, 2};
  multi.byte_observations = true;
  multi.action_masks = true;
  ActorCriticConfig lstm = discrete;
  lstm.core = ActorCriticConfig::Core::kLstm;
  lstm.core_size = 8;
  return {discrete, box, multi, lstm};
}

// The same code on the CPU against the CPU: every network passes.
TEST(DeviceActCheckTest, NetworkKeysReadAndDiffer) {
  ActorCriticConfig mlp;
  mlp.observation_size = 4;
  mlp.num_actions = 2;
  EXPECT_EQ(NetworkKey(mlp), "mlp obs 4 -> [64,64] tanh -> discrete 2");
  ActorCriticConfig cnn = mlp;
  cnn.encoder = ActorCriticConfig::Encoder::kNatureCnn;
  cnn.image_chw = {4, 84, 84};
  cnn.channels_last = true;
  cnn.observation_size = 84 * 84 * 4;
  cnn.byte_observations = true;
  cnn.hidden_sizes = {512};
  cnn.core = ActorCriticConfig::Core::kLstm;
  cnn.core_size = 128;
  cnn.num_actions = 6;
  cnn.action_masks = true;
  EXPECT_EQ(NetworkKey(cnn),
            "nature_cnn image 4x84x84 hwc obs 28224 uint8 -> [512] tanh lstm "
            "128 -> discrete 6 masked");
  // Any field that changes the network changes the key.
  std::vector<ActorCriticConfig> variants(8, mlp);
  variants[1].shared_trunk = true;
  variants[2].activation = ActorCriticConfig::Activation::kRelu;
  variants[3].normalize_observations = true;
  variants[4].num_actions = 0;
  variants[4].action_size = 2;
  variants[5].num_actions = 0;
  variants[5].action_nvec = {2, 3};
  variants[6].hidden_sizes = {64};
  variants[7].core = ActorCriticConfig::Core::kGru;
  variants[7].core_size = 64;
  std::set<std::string> keys;
  for (const auto& v : variants) keys.insert(NetworkKey(v));
  EXPECT_EQ(keys.size(), variants.size());
}

TEST(DeviceActCheckTest, EveryCheckRunIsListedWithItsResult) {
  int runs = 0;
  EXPECT_OK(CheckOncePerProcess("a passing check", [&] {
    ++runs;
    return absl::OkStatus();
  }));
  EXPECT_THAT(
      CheckOncePerProcess("a failing check",
                          [&] {
                            ++runs;
                            return absl::FailedPreconditionError("differs");
                          }),
      StatusIs(absl::StatusCode::kFailedPrecondition));
  // Once each: the second call returns the first result.
  EXPECT_OK(CheckOncePerProcess("a passing check", [&] {
    ++runs;
    return absl::InternalError("run again");
  }));
  EXPECT_EQ(runs, 2);
  std::map<std::string, absl::Status> listed;
  for (const auto& [check, status] : DeviceChecksRun()) listed[check] = status;
  ASSERT_TRUE(listed.count("a passing check"));
  EXPECT_OK(listed["a passing check"]);
  ASSERT_TRUE(listed.count("a failing check"));
  EXPECT_THAT(
      listed["a failing check"],
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("differs")));
}

TEST(DeviceActCheckTest, TheCpuActsAsItself) {
  for (const ActorCriticConfig& config : Configs()) {
    SCOPED_TRACE(NetworkKey(config));
    EXPECT_OK(CheckDeviceActing(config, torch::kCPU));
  }
  EXPECT_OK(CheckDeviceActingOnFirstUse(Configs()[0], torch::kCPU));
}

TEST(DeviceActCheckTest, ADeviceThatActsDifferentlyIsRefusedNamingWhat) {
  DeviceActCheckOptions options;
  options.perturb_for_testing = [](ActorCritic& policy) {
    torch::NoGradGuard no_grad;
    for (auto& p : policy->parameters()) p.add_(0.05);
  };
  for (const ActorCriticConfig& config : Configs()) {
    SCOPED_TRACE(NetworkKey(config));
    EXPECT_THAT(CheckDeviceActing(config, torch::kCPU, options),
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         AllOf(HasSubstr("the acting self-check of cpu "
                                         "failed"),
                               HasSubstr("differ by"))));
  }
}

}  // namespace
}  // namespace rl
