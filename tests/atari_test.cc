// Atari the CleanRL way through the whole service: the shipped run files
// (examples/atari) of Breakout and Pong, each for a short budget, through a
// coordinator with a real learner and actor, the actor stepping the games
// in the native plugin (plugin: atari), and Breakout again through the
// Gymnasium bridge (rl_atari, breakout_bridge.yaml). This checks the plumbing,
// not learning (a score is the GPU's job): the frames arrive as uint8 [4, 84,
// 84] (the learner refuses anything else), the run's episodes are whole games
// over every life in raw points, and checkpoints are written.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"
#include "testing/embedded_coordinator.h"

namespace rl {
namespace {

// examples/atari/`game`.yaml, cut to `steps` env steps with a checkpoint
// every 4 updates.
std::string RunFile(const std::string& game, int steps) {
  std::ifstream in("examples/atari/" + game + ".yaml");
  std::stringstream text;
  text << in.rdbuf();
  const std::string yaml = text.str();
  EXPECT_NE(yaml.find("total_env_steps: 10000000"), std::string::npos);
  return absl::StrReplaceAll(
      yaml,
      {{"total_env_steps: 10000000", absl::StrCat("total_env_steps: ", steps)},
       {"checkpoint_interval: 100", "checkpoint_interval: 4"}});
}

int Checkpoints(const std::string& run_dir) {
  int n = 0;
  const std::filesystem::path dir =
      std::filesystem::path(run_dir) / "checkpoints";
  if (!std::filesystem::exists(dir)) return 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    n += entry.path().filename().string().rfind("ckpt-", 0) == 0;
  }
  return n;
}

class AtariTest : public EmbeddedCoordinatorTest {};

TEST_F(AtariTest, BreakoutAndPongRunThroughTheService) {
  StartCoordinator("learners=1,actors=1", {"--lease_ttl_s=10"});
  // Breakout: 5 lives a game. Random games last about 170 steps, so a game
  // reported per lost life (about 35 steps) would count 5x too many.
  const rl::Run breakout = Submit(RunFile("breakout", 8192));
  const rl::Run b = WaitForEnd(breakout.run_id(), absl::Seconds(600));
  ASSERT_EQ(b.state(), SUCCEEDED) << b.failure_reason();
  EXPECT_GE(b.progress().env_steps(), 8192);
  EXPECT_GE(b.progress().episodes(), 8);
  EXPECT_LE(b.progress().episodes() * 80, b.progress().env_steps());
  EXPECT_GE(b.progress().mean_return(), 0);
  EXPECT_LE(b.progress().mean_return(), 50);
  EXPECT_GE(Checkpoints(b.checkpoint_dir()), 1);
  // Pong: no lives; a game ends at 21 points, and random play loses about
  // 21-0 in 800 steps.
  const rl::Run pong = Submit(RunFile("pong", 12288));
  const rl::Run p = WaitForEnd(pong.run_id(), absl::Seconds(600));
  ASSERT_EQ(p.state(), SUCCEEDED) << p.failure_reason();
  EXPECT_GE(p.progress().episodes(), 4);
  EXPECT_GE(p.progress().mean_return(), -21);
  EXPECT_LE(p.progress().mean_return(), -10);
  EXPECT_GE(Checkpoints(p.checkpoint_dir()), 1);
  // The same Breakout through the Gymnasium bridge.
  const rl::Run bridge = Submit(RunFile("breakout_bridge", 8192));
  const rl::Run g = WaitForEnd(bridge.run_id(), absl::Seconds(600));
  ASSERT_EQ(g.state(), SUCCEEDED) << g.failure_reason();
  EXPECT_GE(g.progress().episodes(), 8);
  EXPECT_LE(g.progress().episodes() * 80, g.progress().env_steps());
  EXPECT_LE(g.progress().mean_return(), 50);
  EXPECT_EQ(StopCoordinator(SIGTERM), std::optional<int>(0));
}

}  // namespace
}  // namespace rl
