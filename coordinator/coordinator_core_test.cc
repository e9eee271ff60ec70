// CoordinatorCore's runs (coordinator_core.cc): submit, place, succeed;
// run files and bad input refused with the right codes; idempotent submits
// and cancels; runs too big, unplaceable or only waiting for busy workers;
// no bookkeeping left by ended runs; a full store; per-user queue limits and
// who may cancel. Restarts and failures are coordinator_recovery_test.cc,
// workers' identity and reports coordinator_workers_test.cc; the fixture
// coordinator_core_test_fixture.h.
#include "coordinator/coordinator_core.h"

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "coordinator/coordinator_core_test_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST_F(CoordinatorCoreTest, SubmitPlaceRunSucceed) {
  ASSERT_OK_AND_ASSIGN(const SubmitRunResponse submitted,
                       core_->SubmitRun(Request()));
  const std::string id = submitted.run().run_id();
  EXPECT_EQ(submitted.run().state(), QUEUED);
  EXPECT_EQ(submitted.run().spec().envs_per_actor(), 8);  // defaults applied
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
  report.set_worker_key(keys_["learner-0"]);
  report.set_assignment_id(learner.assignment_id());
  report.mutable_progress()->set_env_steps(500);
  ASSERT_OK(core_->ReportStatus(report));
  EXPECT_EQ(core_->GetRun(id)->progress().env_steps(), 500);
  report.set_finished(true);
  ASSERT_OK(core_->ReportStatus(report));
  EXPECT_EQ(core_->GetRun(id)->state(), SUCCEEDED);
  EXPECT_EQ(Reasons(id).back(), "step budget reached");
  EXPECT_EQ(Beat(*core_, "actor-0", a).run_id(), "");  // freed
  // What `rlctl get` shows: where its checkpoints are, how it went.
  EXPECT_EQ(core_->GetRun(id)->history_size(), 0);  // only when asked
  ASSERT_OK_AND_ASSIGN(const rl::Run got, core_->GetRun(id, true));
  EXPECT_EQ(got.checkpoint_dir(), options_.runs_dir + "/" + id);
  ASSERT_GE(got.history_size(), 2);
  EXPECT_EQ(got.history(got.history_size() - 1).to_state(), SUCCEEDED);
  EXPECT_EQ(got.history(got.history_size() - 1).reason(),
            "step budget reached");
  EXPECT_GT(got.history(0).time().seconds(), 0);

  // A run ended by its target says so, with where it got there.
  const std::string second = core_->SubmitRun(Request("b"))->run().run_id();
  core_->Tick();
  report.set_assignment_id(Beat(*core_, "learner-0", l).assignment_id());
  report.mutable_progress()->set_env_steps(3072);
  report.mutable_progress()->set_mean_return(480.5);
  report.mutable_progress()->set_target_reached_at_steps(3072);
  ASSERT_OK(core_->ReportStatus(report));
  EXPECT_EQ(core_->GetRun(second)->state(), SUCCEEDED);
  EXPECT_EQ(Reasons(second).back(),
            "target return reached at 3072 steps (mean return 480.5)");
}

// On a fixed pool (the embedded system's local workers) a run no worker
// could ever hold is refused at submit, or fails as soon as the workers
// show they lack its device, instead of waiting unplaceable_timeout.
TEST_F(CoordinatorCoreTest, AFixedPoolRefusesWhatItCanNeverHold) {
  core_.reset();
  options_.fixed_pool = {{"local-learner-0", LEARNER},
                         {"local-actor-0", ACTOR}};
  core_ = Make();
  SubmitRunRequest two_learners = Request();
  two_learners.mutable_spec()->mutable_resources()->set_num_learners(2);
  EXPECT_THAT(
      core_->SubmitRun(two_learners),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               AllOf(HasSubstr("--local_workers"),
                     HasSubstr("needs 2 learners (cpu): 1 registered or "
                               "expected in all"))));
  // The workers' devices are not known before they register: a CUDA run
  // waits for them, then fails at once with the reason.
  SubmitRunRequest cuda = Request();
  cuda.mutable_spec()->mutable_resources()->set_learner_device("cuda");
  ASSERT_OK_AND_ASSIGN(const SubmitRunResponse waiting, core_->SubmitRun(cuda));
  core_->Tick();
  EXPECT_EQ(core_->GetRun(waiting.run().run_id())->state(), QUEUED);
  ASSERT_OK_AND_ASSIGN(const SubmitRunResponse fits,
                       core_->SubmitRun(Request()));
  Register(*core_, "local-learner-0", LEARNER);
  Register(*core_, "local-actor-0", ACTOR);
  core_->Tick();
  ASSERT_OK_AND_ASSIGN(const rl::Run failed,
                       core_->GetRun(waiting.run().run_id()));
  EXPECT_EQ(failed.state(), FAILED);
  EXPECT_THAT(failed.failure_reason(),
              HasSubstr("needs 1 learners with cuda: 0 of 1 registered or "
                        "expected have it"));
  EXPECT_EQ(core_->GetRun(fits.run().run_id())->state(), RUNNING);
  // Once registered, the workers' devices refuse such runs at submit.
  EXPECT_THAT(core_->SubmitRun(cuda),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

// A run file's text is parsed here, by the loader rl_local uses: errors
// start with the file's name and name the field or the line and column.
TEST_F(CoordinatorCoreTest, ARunFileIsParsedWithTheOneLoader) {
  SubmitRunRequest file;
  file.set_run_file("env: {id: CartPole-v1}\nname: from-text\n");
  file.set_run_file_name("examples/x.yaml");
  ASSERT_OK_AND_ASSIGN(SubmitRunResponse submitted, core_->SubmitRun(file));
  EXPECT_EQ(submitted.run().spec().name(), "from-text");
  EXPECT_GT(submitted.run().spec().env().observation_size(), 0);  // resolved

  file.set_run_file(R"({"env": {"id": "CartPole-v1"}, "name": "json"})");
  file.set_run_file_name("x.json");
  ASSERT_OK_AND_ASSIGN(submitted, core_->SubmitRun(file));
  EXPECT_EQ(submitted.run().spec().name(), "json");

  file.set_run_file("env: {id: CartPole-v1}\nppo: {num_minibatches: 3}\n");
  file.set_run_file_name("bad.yaml");
  EXPECT_THAT(core_->SubmitRun(file),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(StartsWith("bad.yaml: "),
                             HasSubstr("ppo.num_minibatches"))));
  file.set_run_file(std::string("env: {id: Cart\0Pole}\n", 20));
  EXPECT_THAT(core_->SubmitRun(file),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(StartsWith("bad.yaml: "),
                             HasSubstr("line 1, column 15"))));
  file.set_run_file(
      "env: {id: CartPole-v1}\nenvs_per_actor: 1048576\n"
      "segment_length: 65536\nppo: {num_minibatches: 1}\n");
  EXPECT_THAT(
      core_->SubmitRun(file),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(StartsWith("bad.yaml: "), HasSubstr("message limit"))));
  // A policies block is checked whole (each agent played by one policy);
  // a good one trains through the service, each policy on its agents.
  file.set_run_file_name("policies.yaml");
  const std::string env =
      "env: {id: LightCycles-v0, plugin: light_cycles, agents_per_env: 2,\n"
      "  observation_size: 450, num_discrete_actions: 3}\n"
      "envs_per_actor: 8\n";
  file.set_run_file(env +
                    "policies: [{name: a, agents: [0, 1]},\n"
                    "  {name: b, agents: [1]}]\n");
  EXPECT_THAT(core_->SubmitRun(file),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(StartsWith("policies.yaml: "),
                             HasSubstr("policies[1].agents"))));
  file.set_run_file(env +
                    "policies: [{name: a, agents: [0]},\n"
                    "  {name: b, agents: [1]}]\n");
  ASSERT_OK(core_->SubmitRun(file).status());
  SubmitRunRequest both = Request();
  both.set_run_file("env: {id: CartPole-v1}\n");
  EXPECT_THAT(
      core_->SubmitRun(both),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not both")));
  EXPECT_EQ(core_->ListRuns({})->runs_size(), 3);  // the good ones
}

TEST_F(CoordinatorCoreTest, BadInputGetsTheRightCodes) {
  SubmitRunRequest bad = Request();
  bad.mutable_spec()->mutable_ppo()->set_num_minibatches(3);
  EXPECT_THAT(core_->SubmitRun(bad),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("ppo.num_minibatches")));
  EXPECT_THAT(core_->GetRun("run-404"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(core_->CancelRun("run-404"),
              StatusIs(absl::StatusCode::kNotFound));
  ListRunsRequest list;
  list.set_page_token("nonsense");
  EXPECT_THAT(core_->ListRuns(list),
              StatusIs(absl::StatusCode::kInvalidArgument));
  RegisterWorkerRequest nameless;
  EXPECT_THAT(core_->RegisterWorker(nameless),
              StatusIs(absl::StatusCode::kInvalidArgument));
  HeartbeatRequest stranger;
  stranger.set_worker_id("nobody");
  stranger.set_worker_key(keys_["nobody"]);
  EXPECT_THAT(core_->Heartbeat(stranger),
              StatusIs(absl::StatusCode::kPermissionDenied));
  // What a worker registers is shown to operators: names, addresses and
  // devices are checked, and the error quotes them cut short and escaped.
  RegisterWorkerRequest ok;
  ok.set_worker_name("learner-[::1]:5000");
  ok.mutable_capabilities()->set_role(LEARNER);
  ok.set_address("learner-0.learners.svc:50052");
  ok.set_rendezvous_address("[fe80::1%eth0]:29500");
  ok.mutable_capabilities()->add_devices("cuda:0");
  EXPECT_OK(core_->RegisterWorker(ok).status());
  struct Bad {
    std::function<void(RegisterWorkerRequest*)> spoil;
    std::string field;
  };
  const std::vector<Bad> spoiled = {
      {[](auto* r) { r->set_worker_name("evil\x1b[2J"); }, "worker_name: "},
      {[](auto* r) { r->set_worker_name(std::string(1 << 20, 'w')); },
       "(1048576 bytes)"},
      {[](auto* r) { r->set_worker_name("a\u202eb"); }, "worker_name: "},
      {[](auto* r) { r->set_address("10.0.0.1:1 \r\nFAKE LOG LINE"); },
       "address: "},
      {[](auto* r) { r->set_rendezvous_address(std::string(300, 'h')); },
       "rendezvous_address: "},
      {[](auto* r) { r->mutable_capabilities()->add_devices("cuda:0;rm"); },
       "capabilities.devices: "},
  };
  for (const Bad& b : spoiled) {
    RegisterWorkerRequest request = ok;
    request.set_worker_name("learner-9");
    b.spoil(&request);
    const absl::Status refused = core_->RegisterWorker(request).status();
    EXPECT_THAT(refused, StatusIs(absl::StatusCode::kInvalidArgument,
                                  HasSubstr(b.field)))
        << b.field;
    EXPECT_LT(refused.message().size(), 300u);
    EXPECT_EQ(refused.message().find('\x1b'), absl::string_view::npos);
    EXPECT_EQ(refused.message().find('\r'), absl::string_view::npos);
  }
  EXPECT_EQ(core_->ListWorkers().workers_size(), 1);
  // A run id is quoted short too.
  EXPECT_THAT(
      core_->GetRun(std::string(1 << 20, 'r')),
      StatusIs(absl::StatusCode::kNotFound, HasSubstr("... (1048576 bytes)")));
  // Nothing was stored by the rejected submit.
  EXPECT_EQ(core_->ListRuns(ListRunsRequest())->runs_size(), 0);
}

TEST_F(CoordinatorCoreTest, IdempotentSubmitAndCancel) {
  auto a = core_->SubmitRun(Request("k"));
  auto b = core_->SubmitRun(Request("k"));
  ASSERT_OK(a);
  ASSERT_OK(b);
  EXPECT_TRUE(a->created());
  EXPECT_FALSE(b->created());
  EXPECT_EQ(a->run().run_id(), b->run().run_id());
  ASSERT_OK_AND_ASSIGN(const rl::Run cancelled,
                       core_->CancelRun(a->run().run_id()));
  EXPECT_EQ(cancelled.state(), CANCELLED);
  EXPECT_EQ(core_->CancelRun(a->run().run_id())->state(), CANCELLED);
  Register(*core_, "learner-0", LEARNER);
  Register(*core_, "actor-0", ACTOR);
  core_->Tick();  // A cancelled run is never placed.
  EXPECT_EQ(core_->GetRun(a->run().run_id())->state(), CANCELLED);
}

TEST_F(CoordinatorCoreTest, ARunTooBigForTheWireIsRefusedAtSubmit) {
  // Each field in range, the product not: 2^20 envs x 2^16 steps.
  SubmitRunRequest huge = Request();
  huge.mutable_spec()->set_envs_per_actor(1 << 20);
  huge.mutable_spec()->set_segment_length(1 << 16);
  huge.mutable_spec()->mutable_ppo()->set_num_minibatches(1);
  EXPECT_THAT(core_->SubmitRun(huge),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("envs_per_actor x segment_length: one "
                                 "rollout segment")));
  SubmitRunRequest wide = Request();
  for (int i = 0; i < 4; ++i) {
    wide.mutable_spec()->mutable_policy()->add_hidden_sizes(65536);
  }
  EXPECT_THAT(core_->SubmitRun(wide),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("policy.hidden_sizes: the policy has about")));
  EXPECT_EQ(core_->ListRuns(ListRunsRequest())->runs_size(), 0);
}

TEST_F(CoordinatorCoreTest, ARunNoWorkerCanHoldWaitsWithAReasonThenFails) {
  options_.unplaceable_timeout = absl::Minutes(5);
  options_.lease_ttl = absl::Hours(1);
  core_ = Make();
  SubmitRunRequest big = Request();
  big.mutable_spec()->set_envs_per_actor(4096);
  big.mutable_spec()->set_segment_length(1024);
  big.mutable_spec()->mutable_ppo()->set_num_minibatches(1);
  ASSERT_OK_AND_ASSIGN(const SubmitRunResponse submitted,
                       core_->SubmitRun(big));
  const std::string id = submitted.run().run_id();
  ASSERT_OK_AND_ASSIGN(const SubmitRunResponse small_run,
                       core_->SubmitRun(Request()));
  // Workers with 64 MiB: enough for CartPole's default, not for 4M rows.
  Register(*core_, "learner-0", LEARNER, {}, 64 << 20);
  Register(*core_, "actor-0", ACTOR, {}, 64 << 20);
  core_->Tick();
  ASSERT_OK_AND_ASSIGN(rl::Run waiting, core_->GetRun(id));
  EXPECT_EQ(waiting.state(), QUEUED);
  EXPECT_THAT(waiting.waiting_reason(),
              HasSubstr("of memory each: 0 of 1 registered have enough "
                        "(the largest has 64 MiB)"));
  // The run behind it is not blocked.
  EXPECT_EQ(core_->GetRun(small_run.run().run_id())->state(), RUNNING);
  now_ += absl::Minutes(4);
  core_->Tick();
  EXPECT_EQ(core_->GetRun(id)->state(), QUEUED);
  now_ += absl::Minutes(2);
  core_->Tick();
  ASSERT_OK_AND_ASSIGN(const rl::Run failed, core_->GetRun(id));
  EXPECT_EQ(failed.state(), FAILED);
  EXPECT_THAT(failed.failure_reason(),
              HasSubstr("cannot be placed on the registered workers"));
  EXPECT_THAT(failed.failure_reason(), HasSubstr("the largest has 64 MiB"));
}

TEST_F(CoordinatorCoreTest, ARunThatIsOnlyBusyWaitsForEver) {
  options_.unplaceable_timeout = absl::Minutes(5);
  options_.lease_ttl = absl::Hours(1);
  options_.max_time_without_progress = absl::ZeroDuration();  // not tested
  core_ = Make();
  ASSERT_OK_AND_ASSIGN(const SubmitRunResponse first,
                       core_->SubmitRun(Request()));
  ASSERT_OK_AND_ASSIGN(const SubmitRunResponse second,
                       core_->SubmitRun(Request()));
  Register(*core_, "learner-0", LEARNER);
  Register(*core_, "actor-0", ACTOR);
  core_->Tick();
  EXPECT_EQ(core_->GetRun(first.run().run_id())->state(), RUNNING);
  now_ += absl::Minutes(30);
  core_->Tick();
  ASSERT_OK_AND_ASSIGN(const rl::Run waiting,
                       core_->GetRun(second.run().run_id()));
  EXPECT_EQ(waiting.state(), QUEUED);
  EXPECT_THAT(waiting.waiting_reason(), HasSubstr("0 idle of 1 registered"));
}

TEST_F(CoordinatorCoreTest, RunsThatEndedLeaveNoBookkeepingBehind) {
  options_.lease_ttl = absl::Hours(1);
  core_ = Make();
  int64_t l = Register(*core_, "learner-0", LEARNER);
  int64_t a = Register(*core_, "actor-0", ACTOR);
  auto report = [&](const std::string& worker, int64_t epoch, bool finished,
                    const std::string& error) {
    ReportStatusRequest request;
    request.set_worker_id(worker);
    request.set_worker_key(keys_[worker]);
    request.set_assignment_id(Beat(*core_, worker, epoch).assignment_id());
    request.set_finished(finished);
    request.set_error(error);
    return core_->ReportStatus(request);
  };
  for (int i = 0; i < 6; ++i) {
    ASSERT_OK_AND_ASSIGN(const SubmitRunResponse submitted,
                         core_->SubmitRun(Request()));
    const std::string id = submitted.run().run_id();
    core_->Tick();
    ASSERT_EQ(core_->GetRun(id)->state(), RUNNING) << "run " << i;
    // An actor failure and a gang restart, each within its limit.
    ASSERT_OK(report("actor-0", a, /*finished=*/true, "cannot allocate"));
    l = Register(*core_, "learner-0", LEARNER);  // restarted, no assignment
    ASSERT_EQ(core_->GetRun(id)->state(), PLACING) << "run " << i;
    core_->Tick();
    ASSERT_EQ(core_->GetRun(id)->state(), RUNNING) << "run " << i;
    EXPECT_EQ(core_->runs_with_bookkeeping(), 1) << "run " << i;
    // The run ends in each of the three ways.
    switch (i % 3) {
      case 0:
        ASSERT_OK(report("learner-0", l, /*finished=*/true, ""));
        EXPECT_EQ(core_->GetRun(id)->state(), SUCCEEDED);
        break;
      case 1:
        ASSERT_OK(report("learner-0", l, /*finished=*/true, "diverged"));
        EXPECT_EQ(core_->GetRun(id)->state(), FAILED);
        break;
      case 2:
        ASSERT_OK(core_->CancelRun(id));
        EXPECT_EQ(core_->GetRun(id)->state(), CANCELLED);
        break;
    }
    EXPECT_EQ(core_->runs_with_bookkeeping(), 0) << "run " << i;
  }
  // A queued run that could never be placed, then cancelled, is forgotten
  // too.
  SubmitRunRequest cuda = Request();
  cuda.mutable_spec()->mutable_resources()->set_learner_device("cuda");
  ASSERT_OK_AND_ASSIGN(const SubmitRunResponse waiting, core_->SubmitRun(cuda));
  core_->Tick();
  ASSERT_EQ(core_->GetRun(waiting.run().run_id())->state(), QUEUED);
  EXPECT_EQ(core_->runs_with_bookkeeping(), 1);
  ASSERT_OK(core_->CancelRun(waiting.run().run_id()));
  EXPECT_EQ(core_->runs_with_bookkeeping(), 0);
}

TEST_F(CoordinatorCoreTest, AFullStoreFailsSubmitsClearlyButWorkersRegister) {
  options_.max_store_bytes = 96 << 10;
  core_ = Make();
  std::vector<std::string> accepted;
  absl::Status error;
  for (int i = 0; i < 10000 && error.ok(); ++i) {
    auto submitted = core_->SubmitRun(Request());
    if (submitted.ok()) {
      accepted.push_back(submitted->run().run_id());
    } else {
      error = submitted.status();
    }
  }
  EXPECT_THAT(error, StatusIs(absl::StatusCode::kResourceExhausted,
                              HasSubstr("coordinator.db")));
  ASSERT_FALSE(accepted.empty());
  // Registration does not need the store; accepted runs stay readable.
  Register(*core_, "learner-0", LEARNER);
  for (const std::string& id : accepted) ASSERT_OK(core_->GetRun(id));
}

// With the store full, a run's end is still seen at once (GetRun, ListRuns,
// its workers freed) and written once there is room again.
TEST_F(CoordinatorCoreTest, ARunsEndIsSeenWithAFullStoreAndWrittenLater) {
  options_.max_store_bytes = 256 << 10;
  core_ = Make();
  const std::string id = core_->SubmitRun(Request())->run().run_id();
  const int64_t l = Register(*core_, "learner-0", LEARNER);
  const int64_t a = Register(*core_, "actor-0", ACTOR);
  core_->Tick();
  const Assignment learner = Beat(*core_, "learner-0", l);
  ASSERT_EQ(learner.run_id(), id);
  // Queued runs fill the store.
  absl::Status full;
  for (int i = 0; i < 100000 && full.ok(); ++i) {
    full = core_->SubmitRun(Request()).status();
  }
  ASSERT_THAT(full, StatusIs(absl::StatusCode::kResourceExhausted));

  ReportStatusRequest report;
  report.set_worker_id("learner-0");
  report.set_worker_key(keys_["learner-0"]);
  report.set_assignment_id(learner.assignment_id());
  report.mutable_progress()->set_env_steps(4096);
  report.set_finished(true);
  ASSERT_OK(core_->ReportStatus(report));
  EXPECT_EQ(core_->GetRun(id)->state(), SUCCEEDED);
  ListRunsRequest succeeded;
  succeeded.add_states(SUCCEEDED);
  ASSERT_EQ(core_->ListRuns(succeeded)->runs_size(), 1);
  ListRunsRequest running;
  running.add_states(RUNNING);
  EXPECT_EQ(core_->ListRuns(running)->runs_size(), 0);
  EXPECT_EQ(Beat(*core_, "actor-0", a).run_id(), "");  // freed
  core_->Tick();                                       // still full: kept
  EXPECT_EQ(core_->GetRun(id)->state(), SUCCEEDED);

  // Room again (another writer deletes the other runs' event logs; their
  // pages are free for reuse): written.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(options_.store_path.c_str(), &db), SQLITE_OK);
  const std::string room =
      "DELETE FROM run_events WHERE run_id != '" + id + "';";
  ASSERT_EQ(sqlite3_exec(db, room.c_str(), nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  core_->Tick();
  core_.reset();
  core_ = Make();  // what the store holds
  EXPECT_EQ(core_->GetRun(id)->state(), SUCCEEDED);
  EXPECT_EQ(Reasons(id).back(), "step budget reached");
}

TEST_F(CoordinatorCoreTest, QueuedRunsPerUserAreLimited) {
  options_.max_queued_runs_per_user = 2;
  core_.reset();
  core_ = Make();
  ASSERT_OK_AND_ASSIGN(const SubmitRunResponse first,
                       core_->SubmitRun(Request("a1"), "alice"));
  EXPECT_EQ(first.run().owner(), "alice");
  ASSERT_OK(core_->SubmitRun(Request("a2"), "alice").status());
  EXPECT_THAT(core_->SubmitRun(Request("a3"), "alice"),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("alice already has 2 runs waiting")));
  EXPECT_EQ(core_->refused_by_user_quota(), 1);
  // A resubmit of an accepted run is not a new run: it is answered.
  ASSERT_OK_AND_ASSIGN(const SubmitRunResponse again,
                       core_->SubmitRun(Request("a1"), "alice"));
  EXPECT_FALSE(again.created());
  // Others are not held back by alice; nothing of the refusal was stored.
  ASSERT_OK(core_->SubmitRun(Request("b1"), "bob").status());
  EXPECT_EQ(core_->ListRuns(ListRunsRequest())->runs_size(), 3);
  // Once one of alice's runs ends, she may submit again.
  ASSERT_OK(core_->CancelRun(first.run().run_id()).status());
  EXPECT_OK(core_->SubmitRun(Request("a3"), "alice").status());
}

// Issue 46: a user cancels only their own runs; an admin any; the reason
// names who; a refused cancel changes nothing.
TEST_F(CoordinatorCoreTest, OnlyItsOwnerOrAnAdminCancelsARun) {
  ASSERT_OK_AND_ASSIGN(const SubmitRunResponse a,
                       core_->SubmitRun(Request("a1"), "alice"));
  ASSERT_OK_AND_ASSIGN(const SubmitRunResponse b,
                       core_->SubmitRun(Request("b1"), "bob"));
  EXPECT_THAT(
      core_->CancelRunFor(a.run().run_id(), Requester{"bob", false}),
      StatusIs(absl::StatusCode::kPermissionDenied,
               AllOf(HasSubstr("run " + a.run().run_id() + " belongs to alice"),
                     HasSubstr("bob may not change it"))));
  EXPECT_NE(core_->GetRun(a.run().run_id())->state(), CANCELLED);
  ASSERT_OK_AND_ASSIGN(
      const rl::Run own,
      core_->CancelRunFor(a.run().run_id(), Requester{"alice", false}));
  EXPECT_EQ(own.state(), CANCELLED);
  EXPECT_EQ(own.failure_reason(), "cancelled by alice");
  ASSERT_OK_AND_ASSIGN(
      const rl::Run by_admin,
      core_->CancelRunFor(b.run().run_id(), Requester{"ops", true}));
  EXPECT_EQ(by_admin.failure_reason(), "cancelled by ops");
  EXPECT_THAT(core_->CancelRunFor("run-404", Requester{"bob", false}),
              StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace rl
