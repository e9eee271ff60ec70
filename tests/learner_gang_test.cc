// Runs with several learners, as real processes: the embedded coordinator
// spawns local learners and actors, places a run with num_learners: 2 as
// one gang (ranks 0 and 1 of a gloo process group, meeting at rank 0's
// TCPStore), and the gang trains it to the end; a rank killed mid-run makes
// the whole gang restart from the latest checkpoint, and the run succeeds.
#include <signal.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/grpc_util.h"
#include "common/subprocess.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"
#include "runspec/run_spec.h"
#include "testing/embedded_coordinator.h"
#include "testing/process_fixture.h"
#include "testing/run_specs.h"
#include "testing/status_matchers.h"
#include "testing/wait_for.h"

namespace rl {
namespace {

// CartPole split over two learners with one actor each.
std::string GangRun(const std::string& name, int64_t steps) {
  return absl::StrCat("name: ", name, R"(
env: {id: CartPole-v1}
envs_per_actor: 8
segment_length: 32
total_env_steps: )",
                      steps, R"(
ppo: {learning_rate: 1.0e-3, gamma: 0.98, gae_lambda: 0.8, num_epochs: 10,
      num_minibatches: 1, clip_value_loss: false, entropy_coef: 0.0}
resources: {num_learners: 2, num_actors: 2}
checkpoint_interval: 5
)");
}

class LearnerGangTest : public EmbeddedCoordinatorTest {
 protected:
  void SetUp() override {
    EmbeddedCoordinatorTest::SetUp();
    StartCoordinator("learners=2,actors=2", {"--lease_ttl_s=5"});
  }

  // Ranks of the learners working for `run_id` now.
  std::set<int> LearnerRanks(const std::string& run_id) {
    std::set<int> ranks;
    const ListWorkersResponse workers = Workers();
    for (const Worker& w : workers.workers()) {
      if (w.capabilities().role() == LEARNER &&
          w.assignment().run_id() == run_id) {
        EXPECT_EQ(w.assignment().world_size(), 2);
        ranks.insert(w.assignment().rank());
      }
    }
    return ranks;
  }
};

TEST_F(LearnerGangTest, TwoRanksTrainOneRun) {
  const rl::Run run = Submit(GangRun("gang", 20480));
  std::set<int> ranks;
  WaitFor(
      [&] {
        ranks = LearnerRanks(run.run_id());
        return ranks.size() == 2 || Get(run.run_id()).state() == FAILED;
      },
      absl::Seconds(120), absl::Milliseconds(200));
  EXPECT_EQ(ranks, (std::set<int>{0, 1}));
  const rl::Run done = WaitForEnd(run.run_id());
  ASSERT_EQ(done.state(), SUCCEEDED) << done.failure_reason();
  // The two ranks' steps together: 2 actors x 8 envs x 32 steps an update.
  EXPECT_GE(done.progress().env_steps(), 20480);
  EXPECT_EQ(done.progress().env_steps() % 512, 0);
  EXPECT_EQ(Stop(*coordinator_, SIGTERM), std::optional<int>(0));
}

// Agents that leave early (env.agents_leave) in a gang: each rank weighs
// its gradient by its alive rows, and the gang learns Walkers-v0 (three
// walkers an environment, each leaving when it reaches the goal or falls).
TEST_F(LearnerGangTest, AGangTrainsAgentsThatLeaveEarly) {
  const rl::Run run =
      Submit(absl::StrCat("name: gang-walkers\n", rl::WalkersEnvYaml(50), R"(
envs_per_actor: 24
segment_length: 32
total_env_steps: 100000
target_return: 0.9
policy: {hidden_sizes: [32, 32]}
ppo: {learning_rate: 1.0e-3, num_epochs: 4, num_minibatches: 4}
resources: {num_learners: 2, num_actors: 2}
)"));
  const rl::Run done = WaitForEnd(run.run_id());
  ASSERT_EQ(done.state(), SUCCEEDED) << done.failure_reason();
  EXPECT_GT(done.progress().target_reached_at_steps(), 0)
      << "mean return " << done.progress().mean_return() << " after "
      << done.progress().env_steps() << " steps";
  std::printf(
      "Walkers-v0 by a gang of 2: the target 0.9 reached at %lld "
      "env steps\n",
      static_cast<long long>(done.progress().target_reached_at_steps()));
  EXPECT_EQ(Stop(*coordinator_, SIGTERM), std::optional<int>(0));
}

TEST_F(LearnerGangTest, KilledRankRestartsTheGangAndTheRunSucceeds) {
  // A budget far past the kill point: progress reaches the coordinator in
  // steps of a heartbeat, and an optimised build once ran a 40960-step
  // budget to its end between two looks.
  const rl::Run run = Submit(GangRun("gang-restart", 204800));
  WaitFor([&] { return Get(run.run_id()).progress().env_steps() >= 8192; },
          absl::Seconds(200), absl::Milliseconds(100));
  ASSERT_EQ(Get(run.run_id()).state(), RUNNING);
  const std::vector<pid_t> rank1 =
      FindProcesses({absl::StrCat("--coordinator=127.0.0.1:", port_),
                     "--worker_name=local-learner-1"});
  ASSERT_EQ(rank1.size(), 1u);
  kill(rank1.front(), SIGKILL);
  const rl::Run done = WaitForEnd(run.run_id());
  ASSERT_EQ(done.state(), SUCCEEDED) << done.failure_reason();
  EXPECT_GE(done.progress().env_steps(), 204800);
  EXPECT_TRUE(absl::StrContains(CoordinatorLog(), "gang restart 1"))
      << CoordinatorLog();
  EXPECT_EQ(Stop(*coordinator_, SIGTERM), std::optional<int>(0));
}

}  // namespace
}  // namespace rl
