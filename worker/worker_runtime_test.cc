// The worker runtime against the real coordinator core and WorkerService,
// in-process: assignments start and stop workloads, progress and ends reach
// the run's record.
#include "worker/worker_runtime.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/coordinator_core.h"
#include "coordinator/coordinator_service.h"
#include "gmock/gmock.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "testing/run_specs.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"
#include "testing/wait_for.h"
#include "worker/worker_agent.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

// Records what the runtime asks of it; finishes or fails when told.
class FakeWorkload : public Workload {
 public:
  absl::Status Start(const Assignment& assignment) override {
    const std::function<bool()> superseded = Superseded();
    bool waits = false;
    {
      absl::MutexLock lock(&mu_);
      started_.push_back(assignment);
      waits = assignment.run_id() == waits_for_peers_;
    }
    if (waits) {
      // As a gang's rendezvous: until a newer assignment supersedes this
      // one, or its deadline.
      const absl::Time deadline = absl::Now() + absl::Seconds(60);
      while (!superseded() && absl::Now() < deadline) {
        absl::SleepFor(absl::Milliseconds(5));
      }
      const bool cancelled = superseded();
      absl::MutexLock lock(&mu_);
      outcomes_.push_back(absl::StrCat(assignment.run_id(), ": ",
                                       cancelled ? "cancelled" : "timed out"));
      if (cancelled) return absl::CancelledError("a newer assignment");
    }
    absl::MutexLock lock(&mu_);
    running_ = true;
    return start_error_;
  }
  WorkloadState Poll() override {
    absl::MutexLock lock(&mu_);
    in_held_poll_ = hold_polls_;
    mu_.Await(absl::Condition(
        +[](bool* hold) { return !*hold; }, &hold_polls_));
    in_held_poll_ = false;
    ++polls_;
    WorkloadState state;
    state.finished = finished_;
    state.status = end_status_;
    if (report_progress_) {
      RunProgress progress;
      progress.set_env_steps(steps_);
      state.progress = progress;
    }
    return state;
  }
  void Stop() override {
    absl::MutexLock lock(&mu_);
    if (running_ && hold_stops_) {
      // As an update stuck in its collective: until the test lets go.
      in_held_stop_ = true;
      mu_.Await(absl::Condition(
          +[](bool* hold) { return !*hold; }, &hold_stops_));
      in_held_stop_ = false;
    }
    if (running_) ++stops_;
    running_ = false;
  }

  // Poll, or a Stop of running work, waits while held.
  void HoldPolls(bool hold) {
    absl::MutexLock lock(&mu_);
    hold_polls_ = hold;
  }
  void HoldStops(bool hold) {
    absl::MutexLock lock(&mu_);
    hold_stops_ = hold;
  }
  bool in_held_poll() {
    absl::MutexLock lock(&mu_);
    return in_held_poll_;
  }
  bool in_held_stop() {
    absl::MutexLock lock(&mu_);
    return in_held_stop_;
  }
  // A Start of `run_id` waits for peers that never come.
  void WaitForPeersIn(const std::string& run_id) {
    absl::MutexLock lock(&mu_);
    waits_for_peers_ = run_id;
  }
  // How each such Start ended: "RUN: cancelled" or "RUN: timed out".
  std::vector<std::string> outcomes() {
    absl::MutexLock lock(&mu_);
    return outcomes_;
  }

  void ReportProgress(int64_t steps) {
    absl::MutexLock lock(&mu_);
    report_progress_ = true;
    steps_ = steps;
  }
  void Finish(absl::Status status, bool with_progress = true) {
    absl::MutexLock lock(&mu_);
    finished_ = true;
    end_status_ = std::move(status);
    if (!with_progress) report_progress_ = false;
  }
  void FailStarts(absl::Status error) {
    absl::MutexLock lock(&mu_);
    start_error_ = std::move(error);
  }
  std::vector<Assignment> started() {
    absl::MutexLock lock(&mu_);
    return started_;
  }
  int stops() {
    absl::MutexLock lock(&mu_);
    return stops_;
  }
  bool running() {
    absl::MutexLock lock(&mu_);
    return running_;
  }

 private:
  absl::Mutex mu_;
  std::vector<Assignment> started_ ABSL_GUARDED_BY(mu_);
  int stops_ ABSL_GUARDED_BY(mu_) = 0;
  int polls_ ABSL_GUARDED_BY(mu_) = 0;
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  bool report_progress_ ABSL_GUARDED_BY(mu_) = false;
  int64_t steps_ ABSL_GUARDED_BY(mu_) = 0;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status end_status_ ABSL_GUARDED_BY(mu_);
  absl::Status start_error_ ABSL_GUARDED_BY(mu_);
  bool hold_polls_ ABSL_GUARDED_BY(mu_) = false;
  bool hold_stops_ ABSL_GUARDED_BY(mu_) = false;
  bool in_held_poll_ ABSL_GUARDED_BY(mu_) = false;
  bool in_held_stop_ ABSL_GUARDED_BY(mu_) = false;
  std::string waits_for_peers_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> outcomes_ ABSL_GUARDED_BY(mu_);
};

class WorkerRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = MakeTestDir();
    CoordinatorOptions options;
    options.store_path = dir + "/coordinator.db";
    options.runs_dir = dir + "/runs";
    ASSERT_OK_AND_ASSIGN(core_, CoordinatorCore::Create(options));
    workers_ = std::make_unique<WorkerServiceImpl>(core_.get());
    grpc::ServerBuilder builder;
    builder.RegisterService(workers_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override {
    runtimes_.clear();
    server_->Shutdown();
  }

  WorkerRuntime* StartWorker(
      WorkerRole role, const std::string& name, Workload* workload,
      std::function<std::vector<DeviceCheck>()> device_checks = nullptr) {
    WorkerRuntimeOptions options;
    options.agent.device_checks = std::move(device_checks);
    options.agent.channel = server_->InProcessChannel(grpc::ChannelArguments());
    options.agent.worker_name = name;
    options.agent.role = role;
    options.agent.address = role == LEARNER ? "127.0.0.1:1" : "";
    options.report_interval = absl::Milliseconds(20);
    auto runtime = WorkerRuntime::Create(options, workload);
    EXPECT_OK(runtime);
    if (!runtime.ok()) return nullptr;
    runtimes_.push_back(std::move(*runtime));
    return runtimes_.back().get();
  }

  std::string Submit() {
    SubmitRunRequest request;
    *request.mutable_spec() = SmallRunSpec();
    auto response = core_->SubmitRun(request);
    EXPECT_OK(response);
    return response.ok() ? response->run().run_id() : "";
  }

  // Ticks the coordinator (placement, leases) as its main loop does, until
  // `predicate` holds.
  bool WaitTicking(const std::function<bool()>& predicate) {
    return WaitFor(
        [&] {
          core_->Tick();
          return predicate();
        },
        absl::Seconds(60));
  }
  bool WaitForState(const std::string& run_id, RunState state) {
    return WaitTicking([&] {
      auto run = core_->GetRun(run_id);
      return run.ok() && run->state() == state;
    });
  }

  // Outlive the runtimes (TearDown stops those first).
  FakeWorkload learner, actor;
  std::unique_ptr<CoordinatorCore> core_;
  std::unique_ptr<WorkerServiceImpl> workers_;
  std::unique_ptr<grpc::Server> server_;
  std::vector<std::unique_ptr<WorkerRuntime>> runtimes_;
};

TEST_F(WorkerRuntimeTest, RunsAnAssignmentReportsProgressAndItsEnd) {
  StartWorker(LEARNER, "learner-a", &learner);
  StartWorker(ACTOR, "actor-a", &actor);
  const std::string run_id = Submit();
  ASSERT_TRUE(WaitForState(run_id, RUNNING));
  ASSERT_TRUE(WaitTicking([&] { return !learner.started().empty(); }));
  ASSERT_TRUE(WaitTicking([&] { return !actor.started().empty(); }));
  EXPECT_EQ(learner.started()[0].run_id(), run_id);
  EXPECT_EQ(learner.started()[0].spec().env().observation_size(), 4);
  ASSERT_EQ(actor.started()[0].learner_addresses_size(), 1);
  EXPECT_EQ(actor.started()[0].learner_addresses(0), "127.0.0.1:1");

  learner.ReportProgress(1234);
  EXPECT_TRUE(WaitFor(
      [&] {
        auto run = core_->GetRun(run_id);
        return run.ok() && run->progress().env_steps() == 1234;
      },
      absl::Seconds(60)));

  learner.Finish(absl::OkStatus());
  EXPECT_TRUE(WaitForState(run_id, SUCCEEDED));
  // The run is over: both workloads are told to stop, and start nothing new.
  EXPECT_TRUE(
      WaitTicking([&] { return learner.stops() == 1 && actor.stops() == 1; }));
  EXPECT_EQ(learner.started().size(), 1u);
}

TEST_F(WorkerRuntimeTest, AFailedEndFailsTheRunWithItsMessage) {
  StartWorker(LEARNER, "learner-b", &learner);
  StartWorker(ACTOR, "actor-b", &actor);
  const std::string run_id = Submit();
  ASSERT_TRUE(WaitTicking([&] { return !learner.started().empty(); }));
  learner.Finish(absl::InternalError("loss is NaN at update 3"));
  ASSERT_TRUE(WaitForState(run_id, FAILED));
  ASSERT_OK_AND_ASSIGN(const rl::Run run, core_->GetRun(run_id));
  EXPECT_THAT(run.failure_reason(), HasSubstr("loss is NaN at update 3"));
}

// An end reported without progress (the workload had none to give) does not
// wipe what the run had: a FAILED run shows how far it got.
TEST_F(WorkerRuntimeTest, AFailedRunKeepsItsLastProgress) {
  StartWorker(LEARNER, "learner-e", &learner);
  StartWorker(ACTOR, "actor-e", &actor);
  const std::string run_id = Submit();
  ASSERT_TRUE(WaitTicking([&] { return !learner.started().empty(); }));
  learner.ReportProgress(5000);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto run = core_->GetRun(run_id);
        return run.ok() && run->progress().env_steps() == 5000;
      },
      absl::Seconds(60)));
  learner.Finish(absl::InternalError("disk gone"), /*with_progress=*/false);
  ASSERT_TRUE(WaitForState(run_id, FAILED));
  ASSERT_OK_AND_ASSIGN(const rl::Run run, core_->GetRun(run_id));
  EXPECT_EQ(run.progress().env_steps(), 5000);
}

TEST_F(WorkerRuntimeTest, AWorkloadThatCannotStartFailsTheRun) {
  learner.FailStarts(absl::FailedPreconditionError("no CUDA device"));
  StartWorker(LEARNER, "learner-c", &learner);
  StartWorker(ACTOR, "actor-c", &actor);
  const std::string run_id = Submit();
  ASSERT_TRUE(WaitForState(run_id, FAILED));
  ASSERT_OK_AND_ASSIGN(const rl::Run run, core_->GetRun(run_id));
  EXPECT_THAT(run.failure_reason(), HasSubstr("no CUDA device"));
}

TEST_F(WorkerRuntimeTest, StopEndsTheWorkload) {
  WorkerRuntime* runtime = StartWorker(LEARNER, "learner-d", &learner);
  StartWorker(ACTOR, "actor-d", &actor);
  const std::string run_id = Submit();
  ASSERT_TRUE(WaitTicking([&] { return learner.running(); }));
  EXPECT_EQ(runtime->assignments_started(), 1);
  runtime->Stop();
  EXPECT_FALSE(learner.running());
  EXPECT_EQ(learner.stops(), 1);
}

// A newer assignment that arrives while the worker stops its previous work
// (which can take a while: an update stuck in its collective) supersedes
// the one the worker took before stopping: that one is not started, or
// gives up at once, and the newest starts. The newer one's cancel came
// before that Start began, and was lost: the Start waited for peers who
// had moved on, up to its rendezvous deadline.
TEST_F(WorkerRuntimeTest, AnAssignmentReplacedWhileTheWorkStopsIsNotStarted) {
  StartWorker(LEARNER, "learner-f", &learner);
  StartWorker(ACTOR, "actor-f", &actor);
  const std::string run1 = Submit();
  ASSERT_TRUE(WaitTicking([&] { return learner.running(); }));
  const std::string run2 = Submit();  // queued behind run1
  learner.WaitForPeersIn(run2);
  // The loop waits in Poll while the worker hears of run1's end and then
  // of run2 (placed by the Tick): it takes run2 once let go.
  learner.HoldPolls(true);
  ASSERT_TRUE(
      WaitFor([&] { return learner.in_held_poll(); }, absl::Seconds(60)));
  const int64_t heard = learner.cancels();
  ASSERT_OK(core_->CancelRun(run1, "test").status());
  ASSERT_TRUE(WaitFor([&] { return learner.cancels() == heard + 1; },
                      absl::Seconds(60)));  // run1's end (no Tick yet)
  ASSERT_TRUE(WaitTicking([&] { return learner.cancels() == heard + 2; }));
  // It takes run2 and stops run1's work, which holds.
  learner.HoldStops(true);
  learner.HoldPolls(false);
  ASSERT_TRUE(
      WaitFor([&] { return learner.in_held_stop(); }, absl::Seconds(60)));
  // Meanwhile run2 ends and run3 comes.
  ASSERT_OK(core_->CancelRun(run2, "test").status());
  ASSERT_TRUE(WaitFor([&] { return learner.cancels() == heard + 3; },
                      absl::Seconds(60)));
  const std::string run3 = Submit();
  ASSERT_TRUE(WaitTicking([&] { return learner.cancels() == heard + 4; }));
  learner.HoldStops(false);
  ASSERT_TRUE(WaitTicking([&] {
    return !learner.started().empty() &&
           learner.started().back().run_id() == run3;
  }));
  for (const std::string& outcome : learner.outcomes()) {
    EXPECT_EQ(outcome, run2 + ": cancelled");
  }
  EXPECT_TRUE(WaitForState(run3, RUNNING));
}

// A process's device self-checks ride its heartbeats to ListWorkers
// (`rlctl workers`): what was checked, whether it passed, and why not.
TEST_F(WorkerRuntimeTest, DeviceChecksReachTheWorkerList) {
  StartWorker(LEARNER, "learner-0", &learner, [] {
    return DeviceChecksOf(
        {{"updating on cuda:0 mlp[64,64] float32", absl::OkStatus()},
         {"acting on cuda:0 mlp[64,64]",
          absl::FailedPreconditionError("values differ by 0.3")}});
  });
  std::vector<DeviceCheck> listed;
  ASSERT_TRUE(WaitTicking([&] {
    const ListWorkersResponse workers = core_->ListWorkers();
    for (const Worker& w : workers.workers()) {
      if (w.worker_id() == "learner-0") {
        listed.assign(w.device_checks().begin(), w.device_checks().end());
      }
    }
    return listed.size() == 2;
  }));
  EXPECT_EQ(listed[0].check(), "updating on cuda:0 mlp[64,64] float32");
  EXPECT_TRUE(listed[0].passed());
  EXPECT_EQ(listed[0].detail(), "");
  EXPECT_EQ(listed[1].check(), "acting on cuda:0 mlp[64,64]");
  EXPECT_FALSE(listed[1].passed());
  EXPECT_EQ(listed[1].detail(), "values differ by 0.3");
}

TEST(WorkerRuntimeOptionsTest, RefusesOptionsThatCannotWork) {
  FakeWorkload workload;
  WorkerRuntimeOptions options;
  options.agent.worker_name = "w";
  options.agent.role = ACTOR;
  EXPECT_THAT(WorkerRuntime::Create(options, &workload),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("coordinator address")));
  options.agent.coordinator = "127.0.0.1:1";
  options.agent.role = WORKER_ROLE_UNSPECIFIED;
  EXPECT_THAT(WorkerRuntime::Create(options, &workload),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("role")));
}

}  // namespace
}  // namespace rl
