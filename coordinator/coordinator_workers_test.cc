// CoordinatorCore's workers (coordinator_workers.cc): heartbeats (device
// checks, the assignment only when it changed), who holds a worker name
// (keys, operator-issued credentials), one worker unable to act for
// another, fatal reports of credentialed and uncredentialed workers, and
// the reason text they carry (reason_text.h). Fixture:
// coordinator_core_test_fixture.h.
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/secrets.h"
#include "coordinator/coordinator_core.h"
#include "coordinator/coordinator_core_test_fixture.h"
#include "coordinator/reason_text.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A heartbeat carries the whole assignment only when the worker does not
// run it yet: one that reports its current assignment gets just its id.
TEST_F(CoordinatorCoreTest, AHeartbeatsDeviceChecksAreBoundedAndListed) {
  const int64_t epoch = Register(*core_, "learner-0", LEARNER);
  HeartbeatRequest request;
  request.set_worker_id("learner-0");
  request.set_worker_key(keys_["learner-0"]);
  request.set_lease_epoch(epoch);
  for (int i = 0; i < 33; ++i) {
    request.add_device_checks()->set_check(absl::StrCat("check ", i));
  }
  EXPECT_THAT(core_->Heartbeat(request),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("device_checks: 33 checks, at most 32")));
  request.clear_device_checks();
  request.add_device_checks()->set_detail(std::string(2000, 'x'));
  EXPECT_THAT(core_->Heartbeat(request),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("device_checks[0]: check must be 1 to 1024")));
  // Refused heartbeats store nothing; an accepted one is listed.
  EXPECT_EQ(core_->ListWorkers().workers(0).device_checks_size(), 0);
  request.clear_device_checks();
  DeviceCheck* check = request.add_device_checks();
  check->set_check("updating on cuda:0 mlp[64,64] float32");
  check->set_passed(true);
  ASSERT_OK(core_->Heartbeat(request));
  const Worker listed = core_->ListWorkers().workers(0);
  ASSERT_EQ(listed.device_checks_size(), 1);
  EXPECT_EQ(listed.device_checks(0).check(),
            "updating on cuda:0 mlp[64,64] float32");
  EXPECT_TRUE(listed.device_checks(0).passed());
}

TEST_F(CoordinatorCoreTest, AHeartbeatCarriesTheAssignmentOnlyWhenItChanged) {
  ASSERT_OK_AND_ASSIGN(const SubmitRunResponse submitted,
                       core_->SubmitRun(Request()));
  const int64_t l = Register(*core_, "learner-0", LEARNER);
  Register(*core_, "actor-0", ACTOR);
  core_->Tick();
  auto beat = [&](int64_t running) {
    HeartbeatRequest request;
    request.set_worker_id("learner-0");
    request.set_worker_key(keys_["learner-0"]);
    request.set_lease_epoch(l);
    request.set_running_assignment_id(running);
    absl::StatusOr<HeartbeatResponse> response = core_->Heartbeat(request);
    EXPECT_OK(response);
    return response.ok() ? response->assignment() : Assignment();
  };
  const Assignment full = beat(0);
  ASSERT_EQ(full.run_id(), submitted.run().run_id());
  ASSERT_GT(full.assignment_id(), 0);
  EXPECT_EQ(full.spec().env().id(), "CartPole-v1");
  const Assignment same = beat(full.assignment_id());
  EXPECT_EQ(same.assignment_id(), full.assignment_id());
  EXPECT_FALSE(same.has_spec());
  Assignment only_id;
  only_id.set_assignment_id(full.assignment_id());
  EXPECT_EQ(same.SerializeAsString(), only_id.SerializeAsString());
  // A worker that reports another id (a stale one) gets it all again.
  EXPECT_EQ(beat(full.assignment_id() - 1).spec().env().id(), "CartPole-v1");
  // The run ends: the worker running it hears that at once.
  ASSERT_OK(core_->CancelRun(submitted.run().run_id()).status());
  core_->Tick();
  const Assignment ended = beat(full.assignment_id());
  EXPECT_EQ(ended.assignment_id(), 0);
  EXPECT_EQ(ended.run_id(), "");
  EXPECT_EQ(beat(0).assignment_id(), 0);
}

// Work is bound to the process that registered: another worker (same
// role, same token) cannot report, heartbeat or claim an assignment for it;
// a learner holds the run's key, an actor only its own.
TEST_F(CoordinatorCoreTest, OneWorkerCannotActForAnother) {
  ASSERT_OK_AND_ASSIGN(const SubmitRunResponse first,
                       core_->SubmitRun(Request("a")));
  const std::string id = first.run().run_id();
  const int64_t l = Register(*core_, "learner-0", LEARNER);
  const int64_t a = Register(*core_, "actor-0", ACTOR);
  Register(*core_, "actor-1", ACTOR);
  core_->Tick();
  const Assignment learner = Beat(*core_, "learner-0", l);
  const Assignment actor = Beat(*core_, "actor-0", a);
  ASSERT_EQ(learner.run_id(), id);
  EXPECT_EQ(learner.run_key().size(), 64u);
  // An actor holds its own key, not the run's (common/secrets.h).
  EXPECT_EQ(actor.run_key(), ActorKey(learner.run_key(), actor.rank()));
  EXPECT_NE(actor.run_key(), learner.run_key());

  // actor-1 forges a report for learner-0's assignment with its own key.
  ReportStatusRequest forged;
  forged.set_worker_id("learner-0");
  forged.set_worker_key(keys_["actor-1"]);
  forged.set_assignment_id(learner.assignment_id());
  forged.set_finished(true);
  forged.mutable_progress()->set_env_steps(1 << 30);
  EXPECT_THAT(core_->ReportStatus(forged),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("worker_key: not the key of worker "
                                 "learner-0")));
  forged.clear_worker_key();
  EXPECT_THAT(core_->ReportStatus(forged),
              StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_EQ(core_->GetRun(id)->state(), RUNNING);
  EXPECT_EQ(core_->GetRun(id)->progress().env_steps(), 0);
  HeartbeatRequest beat;
  beat.set_worker_id("learner-0");
  beat.set_worker_key(keys_["actor-1"]);
  beat.set_lease_epoch(l);
  EXPECT_THAT(core_->Heartbeat(beat),
              StatusIs(absl::StatusCode::kPermissionDenied));

  // Registering under learner-0's live name without its key is refused:
  // the key is not handed out, and the gang is not restarted.
  RegisterWorkerRequest stranger;
  stranger.set_worker_name("learner-0");
  stranger.mutable_capabilities()->set_role(LEARNER);
  stranger.set_address("127.0.0.1:6000");
  *stranger.mutable_current_assignment() = learner;
  EXPECT_THAT(core_->RegisterWorker(stranger),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("registered to another live process")));
  stranger.set_worker_key(keys_["actor-1"]);
  EXPECT_THAT(core_->RegisterWorker(stranger),
              StatusIs(absl::StatusCode::kPermissionDenied));
  stranger.set_worker_credential(core_->WorkerCredential("actor-1"));
  EXPECT_THAT(core_->RegisterWorker(stranger),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("worker_credential: not the credential")));
  core_->Tick();
  EXPECT_EQ(core_->GetRun(id)->state(), RUNNING);
  EXPECT_EQ(Beat(*core_, "learner-0", l).assignment_id(),
            learner.assignment_id());
  EXPECT_EQ(core_->ListWorkers().workers_size(), 3);
}

// A worker name is held by the process that registered it: re-registering
// needs its key (the same process) or the operator's credential (a
// restarted process: it takes the name over and the old key stops
// working); once the lease has expired the name is free.
TEST_F(CoordinatorCoreTest, AWorkerNameIsHeldByItsKeyOrTheOperatorsCredential) {
  const std::string id = core_->SubmitRun(Request())->run().run_id();
  const int64_t l = Register(*core_, "learner-0", LEARNER);
  const int64_t a = Register(*core_, "actor-0", ACTOR);
  core_->Tick();
  const Assignment learner = Beat(*core_, "learner-0", l);
  ASSERT_EQ(learner.run_id(), id);
  Beat(*core_, "actor-0", a);
  const std::string old_key = keys_["learner-0"];

  // The same process (its key) keeps its name, key and assignment.
  Register(*core_, "learner-0", LEARNER, learner);
  EXPECT_EQ(keys_["learner-0"], old_key);
  EXPECT_EQ(core_->GetRun(id)->state(), RUNNING);

  // A restarted process with the operator's credential takes the name over
  // at once: the gang restarts, the old key is revoked.
  RegisterWorkerRequest restarted;
  restarted.set_worker_name("learner-0");
  restarted.mutable_capabilities()->set_role(LEARNER);
  restarted.set_address("127.0.0.1:5000");
  restarted.set_worker_credential(core_->WorkerCredential("learner-0"));
  ASSERT_OK_AND_ASSIGN(const RegisterWorkerResponse taken,
                       core_->RegisterWorker(restarted));
  EXPECT_NE(taken.worker_key(), old_key);
  EXPECT_EQ(core_->GetRun(id)->state(), PLACING);
  HeartbeatRequest beat;
  beat.set_worker_id("learner-0");
  beat.set_worker_key(old_key);
  beat.set_lease_epoch(taken.lease().epoch());
  EXPECT_THAT(core_->Heartbeat(beat),
              StatusIs(absl::StatusCode::kPermissionDenied));
  beat.set_worker_key(taken.worker_key());
  EXPECT_OK(core_->Heartbeat(beat));

  // Past its lease, a name nobody renews is free for anyone.
  now_ += options_.lease_ttl * 2;
  core_->Tick();
  keys_["actor-0"] = "";
  EXPECT_GE(Register(*core_, "actor-0", ACTOR), 0);
}

TEST_F(CoordinatorCoreTest, CredentialsCanBeRequiredOfEveryWorker) {
  options_.require_worker_credentials = true;
  core_.reset();
  core_ = Make();
  RegisterWorkerRequest request;
  request.set_worker_name("actor-0");
  request.mutable_capabilities()->set_role(ACTOR);
  EXPECT_THAT(core_->RegisterWorker(request),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("requires an operator-issued")));
  request.set_worker_credential(core_->WorkerCredential("actor-1"));
  EXPECT_THAT(core_->RegisterWorker(request),
              StatusIs(absl::StatusCode::kPermissionDenied));
  request.set_worker_credential(core_->WorkerCredential("actor-0"));
  ASSERT_OK_AND_ASSIGN(const RegisterWorkerResponse registered,
                       core_->RegisterWorker(request));
  // Its key then serves for re-registration (e.g. after a coordinator
  // restart), without the credential.
  request.clear_worker_credential();
  request.set_worker_key(registered.worker_key());
  EXPECT_OK(core_->RegisterWorker(request));
  // The credential is the coordinator's (from its secret), the same from
  // the operator's tool.
  EXPECT_EQ(core_->WorkerCredential("actor-0"),
            WorkerCredentialFromSecret(*LoadKeySecret("", options_.store_path),
                                       "actor-0"));
}

// Issue 46 item 4: a worker token alone registers a fake actor; its fatal
// report is its own failure, not the run's. The credentialed actor's fatal
// report (an env error that would recur anywhere) fails the run at once.
// Reason text is cleaned at the boundary.
TEST_F(CoordinatorCoreTest, OnlyACredentialedWorkersFatalReportFailsTheRun) {
  options_.max_worker_failures = 3;
  options_.tokens_required = true;  // --require_worker_credentials=false
  core_.reset();
  core_ = Make();
  ASSERT_OK_AND_ASSIGN(const SubmitRunResponse submitted,
                       core_->SubmitRun(Request()));
  const std::string id = submitted.run().run_id();
  const int64_t l = Register(*core_, "learner-0", LEARNER);
  const int64_t fake = Register(*core_, "actor-0", ACTOR);  // no credential
  core_->Tick();
  ASSERT_EQ(core_->GetRun(id)->state(), RUNNING);
  Beat(*core_, "learner-0", l);
  const Assignment placed = Beat(*core_, "actor-0", fake);
  ASSERT_EQ(placed.run_id(), id);
  ReportStatusRequest report;
  report.set_worker_id("actor-0");
  report.set_worker_key(keys_["actor-0"]);
  report.set_assignment_id(placed.assignment_id());
  report.set_finished(true);
  report.set_fatal(true);
  report.set_error("\x1b[2J<b>env exploded</b>\r\xe2\x80\xae\xff");
  ASSERT_OK(core_->ReportStatus(report));
  ASSERT_OK_AND_ASSIGN(const rl::Run after, core_->GetRun(id));
  EXPECT_NE(after.state(), FAILED) << "one fake report failed it";
  EXPECT_EQ(after.failure_reason(), "");
  for (const std::string& reason : Reasons(id)) {
    EXPECT_THAT(reason, Not(HasSubstr("env exploded"))) << reason;
  }
}

TEST_F(CoordinatorCoreTest, ACredentialedActorsFatalReportFailsTheRunAtOnce) {
  options_.tokens_required = true;
  core_.reset();
  core_ = Make();
  ASSERT_OK_AND_ASSIGN(const SubmitRunResponse submitted,
                       core_->SubmitRun(Request()));
  const std::string id = submitted.run().run_id();
  const int64_t l = Register(*core_, "learner-0", LEARNER);
  Beat(*core_, "learner-0", l);
  // A credentialed actor: its env's error fails the run now.
  RegisterWorkerRequest trusted;
  trusted.set_worker_name("actor-1");
  trusted.mutable_capabilities()->set_role(ACTOR);
  trusted.set_worker_credential(core_->WorkerCredential("actor-1"));
  ASSERT_OK_AND_ASSIGN(const RegisterWorkerResponse registered,
                       core_->RegisterWorker(trusted));
  keys_["actor-1"] = registered.worker_key();
  core_->Tick();
  const Assignment given = Beat(*core_, "actor-1", registered.lease().epoch());
  ASSERT_EQ(given.run_id(), id);
  ReportStatusRequest report;
  report.set_finished(true);
  report.set_fatal(true);
  report.set_worker_id("actor-1");
  report.set_worker_key(keys_["actor-1"]);
  report.set_assignment_id(given.assignment_id());
  report.set_error("step failed: the probe broke\n\x1b]0;title\x07");
  ASSERT_OK(core_->ReportStatus(report));
  ASSERT_OK_AND_ASSIGN(const rl::Run failed, core_->GetRun(id));
  EXPECT_EQ(failed.state(), FAILED);
  EXPECT_EQ(failed.failure_reason(),
            "actor actor-1: step failed: the probe broke\n\\x1b]0;"
            "title\\x07");
}

TEST(SanitizeReasonTest, EscapesControlsAndBadBytesAndKeepsText) {
  EXPECT_EQ(SanitizeReason("plain text: ok (1/2)"), "plain text: ok (1/2)");
  // A traceback's lines stay lines (rlctl indents them).
  EXPECT_EQ(SanitizeReason("failed:\n  at f()"), "failed:\n  at f()");
  EXPECT_EQ(SanitizeReason("a\x1b[31mb\tc"), "a\\x1b[31mb\\x09c");
  EXPECT_EQ(SanitizeReason("\xc3\xa9t\xc3\xa9"), "\xc3\xa9t\xc3\xa9");  // été
  EXPECT_EQ(SanitizeReason("x\xe2\x80\xae"
                           "y"),
            "x\\u202ey");  // RLO
  EXPECT_EQ(SanitizeReason("\xc2\x9b"
                           "1m"),
            "\\u009b1m");  // C1 CSI
  EXPECT_EQ(SanitizeReason("\xff\xc3"), "\\xff\\xc3");
  // An overlong ESC and a surrogate are not UTF-8: their bytes escaped.
  EXPECT_EQ(SanitizeReason("\xe0\x80\x9b"), "\\xe0\\x80\\x9b");
  EXPECT_EQ(SanitizeReason("\xed\xa0\x80"), "\\xed\\xa0\\x80");
  const std::string longer(5000, 'a');
  const std::string cut = SanitizeReason(longer);
  EXPECT_EQ(cut.size(), 2048u + 3);
  EXPECT_TRUE(absl::EndsWith(cut, "..."));
}

}  // namespace
}  // namespace rl
