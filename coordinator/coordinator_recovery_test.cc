// CoordinatorCore after a loss (coordinator_core.cc,
// coordinator_failure_policy.cc): a lost learner's run requeued, a
// coordinator restart recovering runs and the workers that come back (or
// not), crash loops and failures within the window, a worker process's
// end, the run's one failure budget, and runs without progress. Fixture:
// coordinator_core_test_fixture.h.
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "coordinator/coordinator_core.h"
#include "coordinator/coordinator_core_test_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

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

// A coordinator restarted beside its own local workers (they died with it
// and come back fresh, without their assignments) requeues their runs as
// soon as the learner registers, not a lease later, with the true reason,
// and without counting it against the run.
TEST_F(CoordinatorCoreTest, ALearnerBackWithoutItsRunRequeuesItAtOnce) {
  options_.max_worker_failures = 0;  // any counted failure would fail it
  core_.reset();
  core_ = Make();
  const std::string id = core_->SubmitRun(Request())->run().run_id();
  const int64_t l = Register(*core_, "learner-0", LEARNER);
  const int64_t a = Register(*core_, "actor-0", ACTOR);
  core_->Tick();
  const Assignment first = Beat(*core_, "learner-0", l);
  ASSERT_EQ(first.run_id(), id);
  ASSERT_EQ(Beat(*core_, "actor-0", a).run_id(), id);
  core_.reset();
  core_ = Make();
  ASSERT_EQ(core_->GetRun(id)->state(), RUNNING);
  // No time passes: the fresh learner registers (its credential: a new
  // process) without the assignment.
  RegisterWorkerRequest fresh;
  fresh.set_worker_name("learner-0");
  fresh.mutable_capabilities()->set_role(LEARNER);
  fresh.set_address("127.0.0.1:5000");
  fresh.set_worker_credential(core_->WorkerCredential("learner-0"));
  ASSERT_OK_AND_ASSIGN(const RegisterWorkerResponse registered,
                       core_->RegisterWorker(fresh));
  keys_["learner-0"] = registered.worker_key();
  EXPECT_EQ(core_->GetRun(id)->state(), PLACING);
  EXPECT_THAT(Reasons(id).back(),
              HasSubstr("learner learner-0 came back without its assignment "
                        "after the coordinator restarted"));
  Register(*core_, "actor-0", ACTOR, Assignment());  // its key: same process
  core_->Tick();
  EXPECT_EQ(core_->GetRun(id)->state(), RUNNING);
  const Assignment again =
      Beat(*core_, "learner-0", registered.lease().epoch());
  EXPECT_EQ(again.run_id(), id);
  // The new gang's id is not the old one's, though both are the first
  // placement of their coordinator process: the old gang's keys and calls
  // are never taken for the new one's.
  EXPECT_THAT(first.gang_id(), StartsWith(id + "/"));
  EXPECT_THAT(again.gang_id(), StartsWith(id + "/"));
  EXPECT_NE(again.gang_id(), first.gang_id());
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

TEST_F(CoordinatorCoreTest, WorkersThatNeverComeBackAfterARestartAreForgotten) {
  const std::string id = core_->SubmitRun(Request())->run().run_id();
  const int64_t l = Register(*core_, "learner-0", LEARNER);
  const int64_t a = Register(*core_, "actor-0", ACTOR);
  core_->Tick();
  ASSERT_EQ(Beat(*core_, "learner-0", l).run_id(), id);
  ASSERT_EQ(Beat(*core_, "actor-0", a).run_id(), id);
  core_.reset();
  core_ = Make();
  EXPECT_EQ(core_->ListWorkers().workers_size(), 2);  // not alive, listed
  // Within a lease they may still come back.
  now_ += options_.lease_ttl / 2;
  core_->Tick();
  EXPECT_EQ(core_->ListWorkers().workers_size(), 2);
  // Past it they are lost: the run goes back to the queue, and the workers
  // are no longer listed, nor by a later coordinator on the same store.
  now_ += options_.lease_ttl;
  core_->Tick();
  EXPECT_EQ(core_->ListWorkers().workers_size(), 0);
  EXPECT_EQ(core_->GetRun(id)->state(), PLACING);
  core_.reset();
  core_ = Make();
  EXPECT_EQ(core_->ListWorkers().workers_size(), 0);
  // The actor, back at last, starts idle and is given the run again.
  const int64_t a2 = Register(*core_, "actor-0", ACTOR, Assignment());
  const int64_t l2 = Register(*core_, "learner-0", LEARNER);
  core_->Tick();
  EXPECT_EQ(Beat(*core_, "learner-0", l2).run_id(), id);
  EXPECT_EQ(Beat(*core_, "actor-0", a2).run_id(), id);
  EXPECT_EQ(core_->GetRun(id)->state(), RUNNING);
}

TEST_F(CoordinatorCoreTest, AnActorCrashLoopFailsTheRunWithTheLastError) {
  options_.max_worker_failures = 3;
  options_.worker_failure_window = absl::Minutes(10);
  core_ = Make();
  ASSERT_OK_AND_ASSIGN(const SubmitRunResponse submitted,
                       core_->SubmitRun(Request()));
  const std::string id = submitted.run().run_id();
  ASSERT_OK_AND_ASSIGN(const SubmitRunResponse other,
                       core_->SubmitRun(Request()));
  Register(*core_, "learner-0", LEARNER);
  const int64_t a = Register(*core_, "actor-0", ACTOR);
  core_->Tick();
  ASSERT_EQ(core_->GetRun(id)->state(), RUNNING);
  for (int failure = 1; failure <= 4; ++failure) {
    const Assignment assignment = Beat(*core_, "actor-0", a);
    ASSERT_EQ(assignment.run_id(), id) << "failure " << failure;
    ReportStatusRequest report;
    report.set_worker_id("actor-0");
    report.set_worker_key(keys_["actor-0"]);
    report.set_assignment_id(assignment.assignment_id());
    report.set_finished(true);
    report.set_error(absl::StrCat("cannot allocate ", failure));
    ASSERT_OK(core_->ReportStatus(report));
    // Freed, then topped up again with a new assignment (a restart).
    EXPECT_EQ(Beat(*core_, "actor-0", a).run_id(), "");
    core_->Tick();
  }
  ASSERT_OK_AND_ASSIGN(const rl::Run run, core_->GetRun(id));
  EXPECT_EQ(run.state(), FAILED);
  EXPECT_THAT(run.failure_reason(),
              HasSubstr("its workers failed 4 times within 10m (limit 3); "
                        "last: actor actor-0: cannot allocate 4"));
  // The failing run does not hold its workers: the next run is placed.
  EXPECT_EQ(core_->GetRun(other.run().run_id())->state(), RUNNING);
}

TEST_F(CoordinatorCoreTest, FailuresOutsideTheWindowAreForgotten) {
  options_.max_worker_failures = 1;
  options_.worker_failure_window = absl::Minutes(1);
  options_.lease_ttl = absl::Hours(1);
  core_ = Make();
  ASSERT_OK_AND_ASSIGN(const SubmitRunResponse submitted,
                       core_->SubmitRun(Request()));
  const std::string id = submitted.run().run_id();
  Register(*core_, "learner-0", LEARNER);
  Register(*core_, "actor-0", ACTOR);
  core_->Tick();
  for (int restart = 0; restart < 3; ++restart) {
    // The actor process died and came back without its assignment: one
    // failure a time, two minutes apart.
    const int64_t a = Register(*core_, "actor-0", ACTOR);
    core_->Tick();
    EXPECT_EQ(core_->GetRun(id)->state(), RUNNING) << "restart " << restart;
    EXPECT_EQ(Beat(*core_, "actor-0", a).run_id(), id);
    now_ += absl::Minutes(2);
  }
  // Two within the window are one too many.
  Register(*core_, "actor-0", ACTOR);
  core_->Tick();
  Register(*core_, "actor-0", ACTOR);
  ASSERT_OK_AND_ASSIGN(const rl::Run run, core_->GetRun(id));
  EXPECT_EQ(run.state(), FAILED);
  EXPECT_THAT(run.failure_reason(), HasSubstr("actor actor-0 restarted"));
}

// The embedded supervisor saw a local worker's process end: the worker is
// lost at once (no run is placed on it until its next process registers),
// its run charged one failure naming how it ended and its gang restarted;
// the other rank's late report of the same loss is not charged again. An
// actor's end is charged too; its run goes on.
TEST_F(CoordinatorCoreTest, AWorkerWhoseProcessEndedIsLostAtOnce) {
  options_.max_worker_failures = 2;
  options_.lease_ttl = absl::Hours(1);
  core_ = Make();
  SubmitRunRequest gang = Request();
  gang.mutable_spec()->mutable_resources()->set_num_learners(2);
  ASSERT_OK_AND_ASSIGN(const SubmitRunResponse submitted,
                       core_->SubmitRun(gang));
  const std::string id = submitted.run().run_id();
  const int64_t l0 = Register(*core_, "learner-0", LEARNER);
  Register(*core_, "learner-1", LEARNER);
  Register(*core_, "actor-0", ACTOR);
  core_->Tick();
  ASSERT_EQ(core_->GetRun(id)->state(), RUNNING);
  const int64_t old_assignment = Beat(*core_, "learner-0", l0).assignment_id();

  core_->NoteWorkerExit("learner-1", "killed by SIGKILL (signal 9)");
  EXPECT_EQ(core_->GetRun(id)->state(), PLACING);
  core_->Tick();
  EXPECT_EQ(core_->GetRun(id)->state(), PLACING);  // one learner of two
  // Rank 0 saw the lost peer too: its report is of a placement that is
  // gone, and charges nothing.
  ReportStatusRequest late;
  late.set_worker_id("learner-0");
  late.set_worker_key(keys_["learner-0"]);
  late.set_assignment_id(old_assignment);
  late.set_finished(true);
  late.set_error("gloo: connection reset by peer");
  late.set_retryable(true);
  EXPECT_THAT(core_->ReportStatus(late),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("is not current")));
  // A worker the coordinator does not know: nothing to lose.
  core_->NoteWorkerExit("learner-9", "exited with 1");
  ASSERT_EQ(core_->GetRun(id)->state(), PLACING);

  // Its next process registers and the gang is placed again: one failure
  // so far. Rank 0's report, still of the old placement (no heartbeat
  // since), is refused as well. An actor's end is the second failure; the
  // run goes on.
  Register(*core_, "learner-1", LEARNER);
  core_->Tick();
  ASSERT_EQ(core_->GetRun(id)->state(), RUNNING);
  EXPECT_THAT(core_->ReportStatus(late),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("is not current")));
  EXPECT_EQ(core_->GetRun(id)->state(), RUNNING);
  // (Listing the workers hands out ids: only after the late reports.)
  const ListWorkersResponse workers = core_->ListWorkers();
  int learners = 0;
  for (const Worker& w : workers.workers()) {
    learners += w.worker_name().rfind("learner-", 0) == 0;
  }
  EXPECT_EQ(learners, 2);
  core_->NoteWorkerExit("actor-0", "killed by SIGABRT (signal 6)");
  EXPECT_EQ(core_->GetRun(id)->state(), RUNNING);
  const int64_t a = Register(*core_, "actor-0", ACTOR);
  core_->Tick();
  EXPECT_EQ(Beat(*core_, "actor-0", a).run_id(), id);  // topped up again
  // The third is over the limit of 2.
  core_->NoteWorkerExit("learner-0", "killed by SIGKILL (signal 9)");
  ASSERT_OK_AND_ASSIGN(const rl::Run run, core_->GetRun(id));
  EXPECT_EQ(run.state(), FAILED);
  EXPECT_THAT(run.failure_reason(),
              HasSubstr("its workers failed 3 times within 10m (limit 2); "
                        "last: learner learner-0's process killed by SIGKILL "
                        "(signal 9)"));
}

// Gang restarts and lost or failed workers share one budget per run: a
// crash-looping learner ends its run after max_worker_failures restarts.
TEST_F(CoordinatorCoreTest, ACrashLoopingLearnerSpendsTheRunsOneFailureBudget) {
  options_.max_worker_failures = 3;
  core_.reset();
  core_ = Make();
  const std::string id = core_->SubmitRun(Request())->run().run_id();
  Register(*core_, "actor-0", ACTOR);
  RegisterWorkerRequest learner;
  learner.set_worker_name("learner-0");
  learner.mutable_capabilities()->set_role(LEARNER);
  learner.set_address("127.0.0.1:5000");
  learner.set_worker_credential(core_->WorkerCredential("learner-0"));
  int restarts = 0;
  for (; restarts < 10 && core_->GetRun(id)->state() != FAILED; ++restarts) {
    ASSERT_OK(core_->RegisterWorker(learner).status());  // a new process
    core_->Tick();
  }
  EXPECT_EQ(core_->GetRun(id)->state(), FAILED);
  // The first registration placed it; the next three restarted the gang
  // within the budget, the fourth went past it.
  EXPECT_EQ(restarts, 5);
  EXPECT_THAT(core_->GetRun(id)->failure_reason(),
              HasSubstr("its workers failed 4 times"));
}

// A placed run whose learner reports no new steps for
// max_time_without_progress is not left RUNNING: its gang restarts with
// the reason (and, past the budget, it fails).
TEST_F(CoordinatorCoreTest, ARunWithoutProgressIsRestartedWithTheReason) {
  options_.max_time_without_progress = absl::Minutes(1);
  options_.lease_ttl = absl::Hours(1);
  core_.reset();
  core_ = Make();
  const std::string id = core_->SubmitRun(Request())->run().run_id();
  int64_t l = Register(*core_, "learner-0", LEARNER);
  Register(*core_, "actor-0", ACTOR);
  core_->Tick();
  ASSERT_EQ(core_->GetRun(id)->state(), RUNNING);
  auto report = [&](int64_t steps) {
    ReportStatusRequest request;
    request.set_worker_id("learner-0");
    request.set_worker_key(keys_["learner-0"]);
    request.set_assignment_id(Beat(*core_, "learner-0", l).assignment_id());
    request.mutable_progress()->set_env_steps(steps);
    return core_->ReportStatus(request);
  };
  // Progress keeps it running however long it takes.
  for (int i = 1; i <= 3; ++i) {
    now_ += absl::Seconds(50);
    ASSERT_OK(report(1000 * i));
    core_->Tick();
    ASSERT_EQ(core_->GetRun(id)->state(), RUNNING);
  }
  // The same steps again are no progress.
  now_ += absl::Seconds(50);
  ASSERT_OK(report(3000));
  core_->Tick();
  EXPECT_EQ(core_->GetRun(id)->state(), RUNNING);
  now_ += absl::Seconds(20);
  core_->Tick();
  EXPECT_NE(core_->GetRun(id)->state(), RUNNING);
  bool said = false;
  for (const std::string& reason : Reasons(id)) {
    said |= absl::StrContains(reason, "no progress for 1m10s") &&
            absl::StrContains(reason, "after 3000");
  }
  EXPECT_TRUE(said);
}

}  // namespace
}  // namespace rl
