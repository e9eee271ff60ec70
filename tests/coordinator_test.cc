// The embedded system as real processes: a coordinator that spawns its own
// learner and actor workers, driven through RunService over gRPC.
#include <signal.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc_util.h"
#include "common/subprocess.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"
#include "runspec/run_spec.h"
#include "testing/embedded_coordinator.h"
#include "testing/process_fixture.h"
#include "testing/status_matchers.h"
#include "testing/wait_for.h"

namespace rl {
namespace {

std::string CartPole(const std::string& name, int64_t steps,
                     bool with_target = true) {
  return absl::StrCat(R"(
name: )",
                      name, R"(
env: {id: CartPole-v1}
envs_per_actor: 8
segment_length: 32
total_env_steps: )",
                      steps, with_target ? "\ntarget_return: 475\n" : "\n", R"(
ppo: {learning_rate: 1.0e-3, gamma: 0.98, gae_lambda: 0.8, num_epochs: 20,
      num_minibatches: 1, clip_value_loss: false, entropy_coef: 0.0}
resources: {num_actors: 1}
checkpoint_interval: 5
)");
}

class CoordinatorTest : public EmbeddedCoordinatorTest {};

TEST_F(CoordinatorTest, SubmittedRunSucceeds) {
  StartCoordinator("learners=1,actors=1", {"--lease_ttl_s=3"});
  const rl::Run submitted = Submit(CartPole("cartpole", 200000), "once");
  EXPECT_EQ(Submit(CartPole("cartpole", 200000), "once").run_id(),
            submitted.run_id());  // idempotent
  const rl::Run done = WaitForRun(submitted.run_id(), [](const rl::Run& r) {
    return r.state() == SUCCEEDED || r.state() == FAILED;
  });
  EXPECT_EQ(done.state(), SUCCEEDED) << done.failure_reason();
  EXPECT_GE(done.progress().mean_return(), 475);
  EXPECT_EQ(StopCoordinator(SIGTERM), std::optional<int>(0));
}

TEST_F(CoordinatorTest, CancelWhileRunningFreesTheWorkers) {
  StartCoordinator("learners=1,actors=1", {"--lease_ttl_s=3"});
  const rl::Run first = Submit(CartPole("long", 50000000, false));
  ASSERT_EQ(
      WaitForRun(first.run_id(),
                 [](const rl::Run& r) { return r.progress().env_steps() > 0; })
          .state(),
      RUNNING);
  const rl::Run second = Submit(CartPole("next", 200000));
  // The pool is busy: the second run stays queued while the first one
  // makes progress (two more progress reports: the coordinator placed runs
  // many times over in between).
  int64_t steps = Get(first.run_id()).progress().env_steps();
  int reports = 0;
  WaitFor(
      [&] {
        if (Get(second.run_id()).state() != QUEUED) return true;
        const int64_t now = Get(first.run_id()).progress().env_steps();
        if (now > steps) ++reports;
        steps = now;
        return reports >= 2;
      },
      absl::Seconds(120), absl::Milliseconds(100));
  EXPECT_EQ(reports, 2);
  EXPECT_EQ(Get(second.run_id()).state(), QUEUED);
  CancelRunRequest cancel;
  cancel.set_run_id(first.run_id());
  rl::Run cancelled;
  auto context = ContextWithDeadline(absl::Seconds(10));
  ASSERT_TRUE(stub_->CancelRun(context.get(), cancel, &cancelled).ok());
  EXPECT_EQ(cancelled.state(), CANCELLED);
  const rl::Run done = WaitForRun(second.run_id(), [](const rl::Run& r) {
    return r.state() == SUCCEEDED || r.state() == FAILED;
  });
  EXPECT_EQ(done.state(), SUCCEEDED) << done.failure_reason();
  EXPECT_EQ(Get(first.run_id()).state(), CANCELLED);
  StopCoordinator(SIGTERM);
}

TEST_F(CoordinatorTest, TwoRunsShareThePool) {
  StartCoordinator("learners=2,actors=2", {"--lease_ttl_s=3"});
  const rl::Run a = Submit(CartPole("a", 200000));
  const rl::Run b = Submit(CartPole("b", 200000));
  for (const rl::Run& run : {a, b}) {
    const rl::Run done = WaitForRun(run.run_id(), [](const rl::Run& r) {
      return r.state() == SUCCEEDED || r.state() == FAILED;
    });
    EXPECT_EQ(done.state(), SUCCEEDED) << done.failure_reason();
  }
  StopCoordinator(SIGTERM);
}

// The pid of this coordinator's local worker `name` (from /proc), or -1.
pid_t FindWorker(int coordinator_port, const std::string& name) {
  const std::vector<pid_t> pids =
      FindProcesses({absl::StrCat("--coordinator=127.0.0.1:", coordinator_port),
                     "--worker_name=" + name});
  return pids.empty() ? -1 : pids.front();
}

TEST_F(CoordinatorTest, KilledWorkerIsReplacedAndTheRunSucceeds) {
  StartCoordinator("learners=1,actors=1", {"--lease_ttl_s=3"});
  const rl::Run run = Submit(CartPole("resilient", 300000));
  ASSERT_EQ(WaitForRun(run.run_id(),
                       [](const rl::Run& r) {
                         return r.progress().env_steps() > 5000;
                       })
                .state(),
            RUNNING);
  const pid_t actor = FindWorker(port_, "local-actor-0");
  ASSERT_GT(actor, 0);
  kill(actor, SIGKILL);
  const rl::Run done = WaitForRun(run.run_id(), [](const rl::Run& r) {
    return r.state() == SUCCEEDED || r.state() == FAILED;
  });
  EXPECT_EQ(done.state(), SUCCEEDED) << done.failure_reason();
  EXPECT_NE(FindWorker(port_, "local-actor-0"), actor);  // a new process
  StopCoordinator(SIGTERM);
}

TEST_F(CoordinatorTest, CoordinatorKilledAndRestartedMidRun) {
  StartCoordinator("learners=1,actors=1", {"--lease_ttl_s=3"});
  const rl::Run run = Submit(CartPole("survivor", 300000));
  ASSERT_EQ(WaitForRun(run.run_id(),
                       [](const rl::Run& r) {
                         return r.progress().env_steps() > 5000;
                       })
                .state(),
            RUNNING);
  // SIGKILL: the local workers lose their parent and exit or are orphaned;
  // the restarted coordinator recovers the run from its store and its new
  // workers resume it from the checkpoint.
  StopCoordinator(SIGKILL);
  StartCoordinator("learners=1,actors=1", {"--lease_ttl_s=3"});
  EXPECT_NE(Get(run.run_id()).state(), QUEUED);  // recovered, not resubmitted
  const rl::Run done = WaitForRun(run.run_id(), [](const rl::Run& r) {
    return r.state() == SUCCEEDED || r.state() == FAILED;
  });
  EXPECT_EQ(done.state(), SUCCEEDED) << done.failure_reason();
  StopCoordinator(SIGTERM);
}

TEST_F(CoordinatorTest, LocalWorkersExitWhenTheCoordinatorDies) {
  StartCoordinator("learners=1,actors=1", {"--lease_ttl_s=3"});
  const rl::Run run = Submit(CartPole("orphans", 10000000, false));
  ASSERT_EQ(WaitForRun(run.run_id(),
                       [](const rl::Run& r) {
                         return r.progress().env_steps() > 2000;
                       })
                .state(),
            RUNNING);
  // The learner and the actor, with their streams open (policy
  // subscription, rollouts, telemetry).
  const std::string mark = absl::StrCat("--coordinator=127.0.0.1:", port_);
  ASSERT_GE(FindProcesses({mark}).size(), 2u);
  StopCoordinator(SIGKILL);
  std::vector<pid_t> left;
  const bool gone = WaitFor(
      [&] {
        left = FindProcesses({mark});
        return left.empty();
      },
      absl::Seconds(60), absl::Milliseconds(200));
  EXPECT_TRUE(gone) << left.size()
                    << " local worker(s) outlived their coordinator";
}

}  // namespace
}  // namespace rl
