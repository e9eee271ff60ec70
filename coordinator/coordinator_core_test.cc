#include "coordinator/coordinator_core.h"

#include <filesystem>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rl {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class CoordinatorCoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const fs::path dir =
        fs::path(testing::TempDir()) /
        testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir);
    fs::create_directories(dir);
    options_.store_path = (dir / "coordinator.db").string();
    options_.runs_dir = (dir / "runs").string();
    options_.clock = [this] { return now_; };
    core_ = Make();
  }

  std::unique_ptr<CoordinatorCore> Make() {
    auto core = CoordinatorCore::Create(options_);
    EXPECT_TRUE(core.ok()) << core.status();
    return std::move(*core);
  }

  SubmitRunRequest Request(const std::string& key = "") {
    SubmitRunRequest request;
    request.mutable_spec()->mutable_env()->set_id("CartPole-v1");
    request.mutable_spec()->set_name("cartpole");
    request.set_idempotency_key(key);
    return request;
  }

  int64_t Register(CoordinatorCore& core, const std::string& name,
                   WorkerRole role, const Assignment& current = {}) {
    RegisterWorkerRequest request;
    request.set_worker_name(name);
    request.mutable_capabilities()->set_role(role);
    if (role == LEARNER) request.set_address("127.0.0.1:5000");
    *request.mutable_current_assignment() = current;
    auto response = core.RegisterWorker(request);
    EXPECT_TRUE(response.ok()) << response.status();
    return response->lease().epoch();
  }

  Assignment Beat(CoordinatorCore& core, const std::string& name,
                  int64_t epoch) {
    HeartbeatRequest request;
    request.set_worker_id(name);
    request.set_lease_epoch(epoch);
    auto response = core.Heartbeat(request);
    EXPECT_TRUE(response.ok()) << response.status();
    return response->assignment();
  }

  absl::Time now_ = absl::FromUnixSeconds(1000);
  CoordinatorOptions options_;
  std::unique_ptr<CoordinatorCore> core_;
};

TEST_F(CoordinatorCoreTest, SubmitPlaceRunSucceed) {
  auto submitted = core_->SubmitRun(Request());
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const std::string id = submitted->run().run_id();
  EXPECT_EQ(submitted->run().state(), QUEUED);
  EXPECT_EQ(submitted->run().spec().envs_per_actor(), 8);  // defaults applied
  const int64_t l = Register(*core_, "learner-0", LEARNER);
  const int64_t a = Register(*core_, "actor-0", ACTOR);
  core_->Tick();
  EXPECT_EQ(core_->GetRun(id)->state(), RUNNING);
  const Assignment learner = Beat(*core_, "learner-0", l);
  EXPECT_EQ(learner.run_id(), id);
  EXPECT_EQ(learner.role(), LEARNER);
  EXPECT_THAT(learner.checkpoint_dir(), HasSubstr(id));
  const Assignment actor = Beat(*core_, "actor-0", a);
  EXPECT_EQ(actor.learner_addresses(0), "127.0.0.1:5000");

  ReportStatusRequest report;
  report.set_worker_id("learner-0");
  report.set_assignment_id(learner.assignment_id());
  report.mutable_progress()->set_env_steps(500);
  ASSERT_TRUE(core_->ReportStatus(report).ok());
  EXPECT_EQ(core_->GetRun(id)->progress().env_steps(), 500);
  report.set_finished(true);
  ASSERT_TRUE(core_->ReportStatus(report).ok());
  EXPECT_EQ(core_->GetRun(id)->state(), SUCCEEDED);
  EXPECT_EQ(Beat(*core_, "actor-0", a).run_id(), "");  // freed
}

TEST_F(CoordinatorCoreTest, BadInputGetsTheRightCodes) {
  SubmitRunRequest bad = Request();
  bad.mutable_spec()->mutable_ppo()->set_num_minibatches(3);
  auto status = core_->SubmitRun(bad).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("ppo.num_minibatches"));
  EXPECT_EQ(core_->GetRun("run-404").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(core_->CancelRun("run-404").status().code(),
            absl::StatusCode::kNotFound);
  ListRunsRequest list;
  list.set_page_token("nonsense");
  EXPECT_EQ(core_->ListRuns(list).status().code(),
            absl::StatusCode::kInvalidArgument);
  RegisterWorkerRequest nameless;
  EXPECT_EQ(core_->RegisterWorker(nameless).status().code(),
            absl::StatusCode::kInvalidArgument);
  HeartbeatRequest stranger;
  stranger.set_worker_id("nobody");
  EXPECT_EQ(core_->Heartbeat(stranger).status().code(),
            absl::StatusCode::kNotFound);
  // Nothing was stored by the rejected submit.
  EXPECT_EQ(core_->ListRuns(ListRunsRequest())->runs_size(), 0);
}

TEST_F(CoordinatorCoreTest, IdempotentSubmitAndCancel) {
  auto a = core_->SubmitRun(Request("k"));
  auto b = core_->SubmitRun(Request("k"));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(a->created());
  EXPECT_FALSE(b->created());
  EXPECT_EQ(a->run().run_id(), b->run().run_id());
  auto cancelled = core_->CancelRun(a->run().run_id());
  ASSERT_TRUE(cancelled.ok());
  EXPECT_EQ(cancelled->state(), CANCELLED);
  EXPECT_EQ(core_->CancelRun(a->run().run_id())->state(), CANCELLED);
  Register(*core_, "learner-0", LEARNER);
  Register(*core_, "actor-0", ACTOR);
  core_->Tick();  // A cancelled run is never placed.
  EXPECT_EQ(core_->GetRun(a->run().run_id())->state(), CANCELLED);
}

TEST_F(CoordinatorCoreTest, LostLearnerSendsTheRunBackAndANewOneTakesIt) {
  const std::string id = core_->SubmitRun(Request())->run().run_id();
  Register(*core_, "learner-0", LEARNER);
  const int64_t a = Register(*core_, "actor-0", ACTOR);
  core_->Tick();
  ASSERT_EQ(core_->GetRun(id)->state(), RUNNING);
  now_ += absl::Seconds(8);
  Beat(*core_, "actor-0", a);
  now_ += absl::Seconds(5);  // learner-0 silent for 13 s > 10 s
  core_->Tick();
  EXPECT_EQ(core_->GetRun(id)->state(), PLACING);
  const int64_t l1 = Register(*core_, "learner-1", LEARNER);
  core_->Tick();
  EXPECT_EQ(core_->GetRun(id)->state(), RUNNING);
  EXPECT_EQ(Beat(*core_, "learner-1", l1).run_id(), id);
}

TEST_F(CoordinatorCoreTest, RestartRecoversRunsAndWorkersKeepTheirAssignments) {
  const std::string running = core_->SubmitRun(Request())->run().run_id();
  const std::string queued = core_->SubmitRun(Request())->run().run_id();
  const int64_t l = Register(*core_, "learner-0", LEARNER);
  const int64_t a = Register(*core_, "actor-0", ACTOR);
  core_->Tick();
  const Assignment learner = Beat(*core_, "learner-0", l);
  const Assignment actor = Beat(*core_, "actor-0", a);
  ASSERT_EQ(learner.run_id(), running);

  core_.reset();  // The coordinator goes away; its workers keep running.
  core_ = Make();
  EXPECT_EQ(core_->GetRun(running)->state(), RUNNING);
  EXPECT_EQ(core_->GetRun(queued)->state(), QUEUED);
  const int64_t l2 = Register(*core_, "learner-0", LEARNER, learner);
  const int64_t a2 = Register(*core_, "actor-0", ACTOR, actor);
  core_->Tick();
  // Same run, same assignment id: no needless restart.
  const Assignment kept = Beat(*core_, "learner-0", l2);
  EXPECT_EQ(kept.run_id(), running);
  EXPECT_EQ(kept.assignment_id(), learner.assignment_id());
  EXPECT_EQ(Beat(*core_, "actor-0", a2).assignment_id(), actor.assignment_id());
  EXPECT_EQ(core_->GetRun(queued)->state(), QUEUED);  // pool is busy
}

TEST_F(CoordinatorCoreTest, AWorkerReportingAnUnrecordedAssignmentStartsIdle) {
  const std::string id = core_->SubmitRun(Request())->run().run_id();
  const int64_t l = Register(*core_, "learner-0", LEARNER);
  Register(*core_, "actor-0", ACTOR);
  core_->Tick();
  Assignment learner = Beat(*core_, "learner-0", l);
  ASSERT_EQ(learner.run_id(), id);
  core_.reset();
  core_ = Make();
  // Before it re-registers, the stored assignment (the learner's: it is
  // the one that heartbeated) is listed as not alive.
  const ListWorkersResponse listed = core_->ListWorkers();
  ASSERT_EQ(listed.workers_size(), 1);
  EXPECT_EQ(listed.workers(0).worker_id(), "learner-0");
  EXPECT_EQ(listed.workers(0).assignment().run_id(), id);
  EXPECT_FALSE(listed.workers(0).alive());
  learner.set_assignment_id(learner.assignment_id() + 1000);  // not recorded
  const int64_t l2 = Register(*core_, "learner-0", LEARNER, learner);
  EXPECT_EQ(Beat(*core_, "learner-0", l2).run_id(), "");
}

}  // namespace
}  // namespace rl
