// Environments of one's own through the whole service: the example plugin
// (examples/plugin_env) trained by a coordinator with real learner and
// actor processes, and every way a plugin can fail ending its run FAILED
// with the reason, while the workers go on to train the next run.
#include <signal.h>
#include <stdlib.h>

#include <filesystem>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"
#include "testing/embedded_coordinator.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

std::string Absolute(const std::string& runfile) {
  return std::filesystem::absolute(runfile).string();
}

// The example's run file, its plugin named by absolute path.
std::string Chase(const std::string& name) {
  return absl::StrCat(R"(
name: )",
                      name, R"(
env:
  id: Chase-v0
  plugin: )",
                      Absolute("examples/plugin_env/libchase_env.so"), R"(
  kwargs: {step_size: 0.1, goal_radius: 0.05}
  observation_size: 2
  num_discrete_actions: 3
  reward_low: -0.01
  reward_high: 1.0
  max_episode_steps: 60
envs_per_actor: 16
segment_length: 64
total_env_steps: 300000
target_return: 0.9
ppo: {learning_rate: 3.0e-3, num_epochs: 10, num_minibatches: 4}
)");
}

// The same env in Python (examples/gym_env/chase_py.py) through the
// Gymnasium bridge.
std::string ChasePy(const std::string& name) {
  std::string yaml = Chase(name);
  const std::string from = "  id: Chase-v0\n  plugin: " +
                           Absolute("examples/plugin_env/libchase_env.so");
  yaml.replace(yaml.find(from), from.size(),
               "  id: chase_py:make\n  plugin: " +
                   Absolute("envs/gym_bridge/libgym_bridge.so"));
  return yaml;
}

// The probe plugin (envs/testdata/test_plugin.cc) misbehaving as `mode`
// says; the run declares `obs_size` observation elements (the plugin has 3).
std::string Probe(const std::string& name, const std::string& plugin,
                  const std::string& mode, int obs_size = 3) {
  return absl::StrCat(R"(
name: )",
                      name, R"(
env:
  id: Probe-v0
  plugin: )",
                      Absolute(plugin), R"(
  kwargs: {mode: )",
                      mode, R"(, fail_at: 40}
  observation_size: )",
                      obs_size, R"(
  num_discrete_actions: 2
envs_per_actor: 4
segment_length: 16
total_env_steps: 100000
)");
}

class PluginEnvTest : public EmbeddedCoordinatorTest {};

TEST_F(PluginEnvTest, FailuresEndTheRunWithTheReasonAndAPluginTrains) {
  // The workers inherit it: the bridge's interpreter finds chase_py there.
  setenv("PYTHONPATH", Absolute("examples/gym_env").c_str(), 1);
  // The operator allows the example's module (docs/security.md); nothing
  // else a run names is imported.
  setenv("RL_PYTHON_ENV_MODULES", "chase_py", 1);
  // A plugin outside the directories the workers load from.
  const std::string outside = "/tmp/rl_plugin_env_test_outside";
  std::filesystem::create_directories(outside);
  std::filesystem::copy_file("envs/testdata/libtest_plugin.so",
                             outside + "/libtest_plugin.so",
                             std::filesystem::copy_options::overwrite_existing);
  StartCoordinator("learners=1,actors=1",
                   {"--lease_ttl_s=3", "--max_worker_failures=1"});
  constexpr char kProbe[] = "envs/testdata/libtest_plugin.so";
  constexpr char kPixels[] = "envs/testdata/libpixel_plugin.so";
  constexpr char kDict[] = "envs/testdata/libdict_plugin.so";
  struct Case {
    std::string name, yaml, reason;
  };
  const std::vector<Case> cases = {
      {"no-entry",
       Probe("no-entry", "envs/testdata/libno_entry_plugin.so", "ok"),
       "does not export rl_env_plugin_v1"},
      {"abi", Probe("abi", "envs/testdata/libbad_abi_plugin.so", "ok"),
       "built for plugin ABI version 42"},
      {"spaces", Probe("spaces", kProbe, "ok", /*obs_size=*/5),
       "Box(float32, [3]) has 3 elements, env.observation_size is 5"},
      {"create", Probe("create", kProbe, "create_error"),
       "create failed: the probe refuses"},
      {"step", Probe("step", kProbe, "step_error"),
       "step failed: the probe broke"},
      // fail_at 40 is the last step of an episode: its final observation.
      {"nan", Probe("nan", kProbe, "nan"), "non-finite final observation"},
      // Issue 46: the actor process dies inside the plugin's step: the run
      // fails at once, naming the call, the plugin and the signal.
      {"crash", Probe("crash", kProbe, "crash"),
       "environment call step of environment plugin"},
      {"crash-signal", Probe("crash-signal", kProbe, "crash"),
       "crashed the process (SIGABRT)"},
      // A step that never returns: the actor ends after env.call_timeout_s
      // and a fresh one serves the runs below.
      {"hang",
       [&] {
         std::string yaml = Probe("hang", kProbe, "hang");
         yaml.replace(yaml.find("  num_discrete_actions: 2\n"), 0,
                      "  call_timeout_s: 2\n");
         return yaml;
       }(),
       "environment call step of environment plugin"},
      // The trust model: a library outside the workers' directories, a
      // Python module the operator did not allow.
      {"outside", Probe("outside", outside + "/libtest_plugin.so", "ok"),
       "outside the directories this worker loads plugins from"},
      {"os-system",
       [&] {
         std::string yaml = ChasePy("os-system");
         yaml.replace(yaml.find("chase_py:make"), 13, "os:system");
         return yaml;
       }(),
       "module 'os' is not one this worker may import"},
  };
  for (const Case& c : cases) {
    const rl::Run submitted = Submit(c.yaml);
    const rl::Run done = WaitForEnd(submitted.run_id(), absl::Seconds(180));
    EXPECT_EQ(done.state(), FAILED) << c.name;
    EXPECT_THAT(done.failure_reason(), HasSubstr(c.reason)) << c.name;
  }
  // The workers are unharmed: the example plugin trains to its target on
  // them, and so does the same env written in Python (examples/gym_env)
  // through the Gymnasium bridge.
  for (const std::string& yaml : {Chase("chase"), ChasePy("chase-py")}) {
    const rl::Run chase = Submit(yaml);
    const rl::Run done = WaitForEnd(chase.run_id(), absl::Seconds(400));
    EXPECT_EQ(done.state(), SUCCEEDED) << done.failure_reason();
    EXPECT_GE(done.progress().mean_return(), 0.9);
  }
  // Action masks: the probe fails the run if its masked action is ever
  // taken; the masks travel with the segments to the learner's loss, and
  // the run learns to take the rewarded one of the two allowed actions
  // (random: 5 of 10).
  const rl::Run masked = Submit(absl::StrCat(R"(
name: masked
env:
  id: Probe-v0
  plugin: )",
                                             Absolute(kProbe), R"(
  kwargs: {mode: masked}
  observation_size: 6
  num_discrete_actions: 3
  action_mask: true
  reward_low: 0
  reward_high: 1
envs_per_actor: 16
segment_length: 32
total_env_steps: 100000
target_return: 9.5
ppo: {learning_rate: 3.0e-3, num_epochs: 10, num_minibatches: 4, gamma: 0.9}
)"));
  const rl::Run done = WaitForEnd(masked.run_id(), absl::Seconds(400));
  EXPECT_EQ(done.state(), SUCCEEDED) << done.failure_reason();
  EXPECT_GE(done.progress().mean_return(), 9.5);
  // uint8 images (envs/testdata/pixel_plugin.cc): bytes in the actor's
  // rollouts, on the wire (the learner refuses float32 observations for a
  // uint8 run) and in the learner's batches; random play scores 2.5.
  const rl::Run pixels = Submit(absl::StrCat(R"(
name: pixels
env:
  id: Pixels-v0
  plugin: )",
                                             Absolute(kPixels), R"(
  observation_shape: [6, 6, 1]
  observation_dtype: uint8
  num_discrete_actions: 4
  reward_low: 0
  reward_high: 1
envs_per_actor: 16
segment_length: 32
total_env_steps: 150000
target_return: 9.5
ppo: {learning_rate: 3.0e-3, num_epochs: 10, num_minibatches: 4, gamma: 0.9}
)"));
  const rl::Run pixels_done = WaitForEnd(pixels.run_id(), absl::Seconds(400));
  EXPECT_EQ(pixels_done.state(), SUCCEEDED) << pixels_done.failure_reason();
  EXPECT_GE(pixels_done.progress().mean_return(), 9.5);
  // A Dict observation read per key (envs/testdata/dict_plugin.cc: a CNN
  // for its image part; the actor checks the plugin's parts against the
  // run's), and MultiBinary actions through a Bernoulli head with masks (a
  // masked bit value taken fails the run): one part of each Dict pays half.
  const rl::Run dict = Submit(absl::StrCat(R"(
name: lookout
env:
  id: Lookout-v0
  plugin: )",
                                           Absolute(kDict), R"(
  kwargs: {size: 8}
  observation_parts:
    - {name: hint, shape: [2]}
    - {name: image, shape: [8, 8, 1], dtype: uint8}
  action_nvec: [2, 2]
  reward_low: 0
  reward_high: 1
envs_per_actor: 16
segment_length: 32
total_env_steps: 100000
target_return: 9.5
seed: 2
ppo: {learning_rate: 1.0e-3, num_epochs: 4, num_minibatches: 4, gamma: 0.9}
)"));
  const rl::Run bits = Submit(absl::StrCat(R"(
name: bits
env:
  id: Probe-v0
  plugin: )",
                                           Absolute(kProbe), R"(
  kwargs: {mode: bits}
  observation_size: 3
  action_binary: 3
  action_mask: true
  reward_low: 0
  reward_high: 1
envs_per_actor: 16
segment_length: 32
total_env_steps: 60000
target_return: 9.5
ppo: {learning_rate: 3.0e-3, num_epochs: 10, num_minibatches: 4, gamma: 0.9}
)"));
  for (const rl::Run& run : {dict, bits}) {
    const rl::Run done = WaitForEnd(run.run_id(), absl::Seconds(400));
    EXPECT_EQ(done.state(), SUCCEEDED)
        << run.spec().name() << ": " << done.failure_reason();
    EXPECT_GE(done.progress().mean_return(), 9.5) << run.spec().name();
  }
  EXPECT_EQ(StopCoordinator(SIGTERM), std::optional<int>(0));
}

}  // namespace
}  // namespace rl
