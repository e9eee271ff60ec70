// The embedded system as real processes: a coordinator that spawns its own
// learner and actor workers, driven through RunService over gRPC.
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/grpc_util.h"
#include "common/run_spec.h"
#include "common/subprocess.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"

namespace rl {
namespace {

namespace fs = std::filesystem;

constexpr char kCoordinator[] = "coordinator/coordinator_main";

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

class CoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(std::getenv("TEST_TMPDIR")) /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }

  void StartCoordinator(const std::string& workers, int port = 0) {
    const std::string port_file =
        (dir_ / absl::StrCat("port", ++starts_)).string();
    coordinator_ = std::make_unique<Subprocess>(
        std::vector<std::string>{
            kCoordinator, absl::StrCat("--port=", port),
            "--port_file=" + port_file, "--store=" + (dir_ / "c.db").string(),
            "--runs_dir=" + (dir_ / "runs").string(),
            "--log_dir=" + (dir_ / "logs").string(), "--lease_ttl_s=3",
            "--local_workers=" + workers},
        (dir_ / "coordinator.log").string());
    auto text = WaitForFile(port_file, absl::Seconds(60));
    ASSERT_TRUE(text.has_value()) << coordinator_->Log();
    port_ = std::atoi(text->c_str());
    stub_ =
        RunService::NewStub(CreateChannel(absl::StrCat("127.0.0.1:", port_)));
  }

  void StopCoordinator(int signal) {
    coordinator_->Signal(signal);
    coordinator_->Wait(absl::Seconds(30));
  }

  rl::Run Submit(const std::string& yaml, const std::string& key = "") {
    auto spec = ParseRunSpec(yaml, RunFileFormat::kYaml);
    EXPECT_TRUE(spec.ok()) << spec.status();
    SubmitRunRequest request;
    *request.mutable_spec() = *spec;
    request.set_idempotency_key(key);
    SubmitRunResponse response;
    auto context = ContextWithDeadline(absl::Seconds(10));
    const grpc::Status status =
        stub_->SubmitRun(context.get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.run();
  }

  rl::Run Get(const std::string& id) {
    GetRunRequest request;
    request.set_run_id(id);
    rl::Run run;
    auto context = ContextWithDeadline(absl::Seconds(10));
    stub_->GetRun(context.get(), request, &run);
    return run;
  }

  // Polls until `pred(run)` or the deadline; returns the last run seen.
  template <typename Pred>
  rl::Run WaitFor(const std::string& id, Pred pred,
                  absl::Duration timeout = absl::Seconds(180)) {
    const absl::Time deadline = absl::Now() + timeout;
    rl::Run run;
    while (absl::Now() < deadline) {
      run = Get(id);
      if (pred(run)) break;
      absl::SleepFor(absl::Milliseconds(100));
    }
    return run;
  }

  fs::path dir_;
  int starts_ = 0;
  int port_ = 0;
  std::unique_ptr<Subprocess> coordinator_;
  std::unique_ptr<RunService::Stub> stub_;
};

TEST_F(CoordinatorTest, SubmittedRunSucceeds) {
  StartCoordinator("learners=1,actors=1");
  const rl::Run submitted = Submit(CartPole("cartpole", 200000), "once");
  EXPECT_EQ(Submit(CartPole("cartpole", 200000), "once").run_id(),
            submitted.run_id());  // idempotent
  const rl::Run done = WaitFor(submitted.run_id(), [](const rl::Run& r) {
    return r.state() == SUCCEEDED || r.state() == FAILED;
  });
  EXPECT_EQ(done.state(), SUCCEEDED) << done.failure_reason();
  EXPECT_GE(done.progress().mean_return(), 475);
  StopCoordinator(SIGTERM);
  EXPECT_EQ(coordinator_->Wait(absl::ZeroDuration()), std::optional<int>(0));
}

TEST_F(CoordinatorTest, CancelWhileRunningFreesTheWorkers) {
  StartCoordinator("learners=1,actors=1");
  const rl::Run first = Submit(CartPole("long", 50000000, false));
  ASSERT_EQ(
      WaitFor(first.run_id(),
              [](const rl::Run& r) { return r.progress().env_steps() > 0; })
          .state(),
      RUNNING);
  const rl::Run second = Submit(CartPole("next", 200000));
  absl::SleepFor(absl::Seconds(1));
  EXPECT_EQ(Get(second.run_id()).state(), QUEUED);  // pool busy
  CancelRunRequest cancel;
  cancel.set_run_id(first.run_id());
  rl::Run cancelled;
  auto context = ContextWithDeadline(absl::Seconds(10));
  ASSERT_TRUE(stub_->CancelRun(context.get(), cancel, &cancelled).ok());
  EXPECT_EQ(cancelled.state(), CANCELLED);
  const rl::Run done = WaitFor(second.run_id(), [](const rl::Run& r) {
    return r.state() == SUCCEEDED || r.state() == FAILED;
  });
  EXPECT_EQ(done.state(), SUCCEEDED) << done.failure_reason();
  EXPECT_EQ(Get(first.run_id()).state(), CANCELLED);
  StopCoordinator(SIGTERM);
}

TEST_F(CoordinatorTest, TwoRunsShareThePool) {
  StartCoordinator("learners=2,actors=2");
  const rl::Run a = Submit(CartPole("a", 200000));
  const rl::Run b = Submit(CartPole("b", 200000));
  for (const rl::Run& run : {a, b}) {
    const rl::Run done = WaitFor(run.run_id(), [](const rl::Run& r) {
      return r.state() == SUCCEEDED || r.state() == FAILED;
    });
    EXPECT_EQ(done.state(), SUCCEEDED) << done.failure_reason();
  }
  StopCoordinator(SIGTERM);
}

// The pid of this coordinator's local worker `name` (from /proc), or -1.
pid_t FindWorker(int coordinator_port, const std::string& name) {
  const std::string want_coordinator =
      absl::StrCat("--coordinator=127.0.0.1:", coordinator_port);
  const std::string want_name = "--worker_name=" + name;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string pid = entry.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)),
                        std::istreambuf_iterator<char>());
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(want_coordinator) != std::string::npos &&
        cmdline.find(want_name + " ") != std::string::npos) {
      return std::atoi(pid.c_str());
    }
  }
  return -1;
}

TEST_F(CoordinatorTest, KilledWorkerIsReplacedAndTheRunSucceeds) {
  StartCoordinator("learners=1,actors=1");
  const rl::Run run = Submit(CartPole("resilient", 300000));
  ASSERT_EQ(
      WaitFor(run.run_id(),
              [](const rl::Run& r) { return r.progress().env_steps() > 5000; })
          .state(),
      RUNNING);
  const pid_t actor = FindWorker(port_, "local-actor-0");
  ASSERT_GT(actor, 0);
  kill(actor, SIGKILL);
  const rl::Run done = WaitFor(run.run_id(), [](const rl::Run& r) {
    return r.state() == SUCCEEDED || r.state() == FAILED;
  });
  EXPECT_EQ(done.state(), SUCCEEDED) << done.failure_reason();
  EXPECT_NE(FindWorker(port_, "local-actor-0"), actor);  // a new process
  StopCoordinator(SIGTERM);
}

TEST_F(CoordinatorTest, CoordinatorKilledAndRestartedMidRun) {
  StartCoordinator("learners=1,actors=1");
  const rl::Run run = Submit(CartPole("survivor", 300000));
  ASSERT_EQ(
      WaitFor(run.run_id(),
              [](const rl::Run& r) { return r.progress().env_steps() > 5000; })
          .state(),
      RUNNING);
  // SIGKILL: the local workers lose their parent and exit or are orphaned;
  // the restarted coordinator recovers the run from its store and its new
  // workers resume it from the checkpoint.
  StopCoordinator(SIGKILL);
  StartCoordinator("learners=1,actors=1");
  EXPECT_NE(Get(run.run_id()).state(), QUEUED);  // recovered, not resubmitted
  const rl::Run done = WaitFor(run.run_id(), [](const rl::Run& r) {
    return r.state() == SUCCEEDED || r.state() == FAILED;
  });
  EXPECT_EQ(done.state(), SUCCEEDED) << done.failure_reason();
  StopCoordinator(SIGTERM);
}

}  // namespace
}  // namespace rl
