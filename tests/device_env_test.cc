// A user's device env through the whole service on the CPU: the shipped
// run file examples/device_env/pixel_breakout.yaml (PixelBreakout-v0,
// envs/plugin_api/rl_device_env.h) through a coordinator with a real
// learner and actor, the actor stepping the library's host build behind
// the native ABI, the Nature CNN on uint8 [2, 36, 36] frames. The run must
// learn to the run file's target (a mean return of 8 over the last 100
// games; random actions score 0.35, a fixed pattern about 1): the one test
// that holds PixelBreakout to its target (examples/device_env's CMake test
// trains its own build briefly). Runs reached it at 315k-413k env steps
// (2026-11-30), so the file's 500k budget is raised to 700k here: the run
// ends at its target either way.
#include <signal.h>

#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>

#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"
#include "testing/embedded_coordinator.h"

namespace rl {
namespace {

class DeviceEnvTest : public EmbeddedCoordinatorTest {};

TEST_F(DeviceEnvTest, PixelBreakoutLearnsThroughTheService) {
  std::ifstream in("examples/device_env/pixel_breakout.yaml");
  std::stringstream text;
  text << in.rdbuf();
  const std::string yaml = text.str();
  ASSERT_NE(yaml.find("total_env_steps: 500000"), std::string::npos);
  ASSERT_NE(yaml.find("target_return: 8"), std::string::npos);
  ASSERT_NE(yaml.find("plugin: pixel_breakout"), std::string::npos);
  StartCoordinator("learners=1,actors=1", {"--lease_ttl_s=10"});
  const rl::Run run = Submit(absl::StrReplaceAll(
      yaml, {{"total_env_steps: 500000", "total_env_steps: 700000"}}));
  const rl::Run r = WaitForEnd(run.run_id(), absl::Seconds(1200));
  ASSERT_EQ(r.state(), SUCCEEDED) << r.failure_reason();
  std::cout << "PixelBreakout through the service: " << r.progress().env_steps()
            << " env steps, " << r.progress().episodes()
            << " episodes, mean return " << r.progress().mean_return()
            << ", target reached at " << r.progress().target_reached_at_steps()
            << " steps" << std::endl;
  EXPECT_GT(r.progress().target_reached_at_steps(), 0)
      << "the run used its whole budget without reaching its target";
  EXPECT_GE(r.progress().mean_return(), 2.0);
  EXPECT_GE(r.progress().episodes(), 100);
  EXPECT_EQ(StopCoordinator(SIGTERM), std::optional<int>(0));
}

}  // namespace
}  // namespace rl
