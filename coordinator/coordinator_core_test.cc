#include "coordinator/coordinator_core.h"

#include <sqlite3.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/secrets.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace rl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

class CoordinatorCoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = MakeTestDir();
    options_.store_path = dir + "/coordinator.db";
    options_.runs_dir = dir + "/runs";
    options_.clock = [this] { return now_; };
    core_ = Make();
  }

  std::unique_ptr<CoordinatorCore> Make() {
    auto core = CoordinatorCore::Create(options_);
    EXPECT_OK(core);
    return core.ok() ? std::move(*core) : nullptr;
  }

  SubmitRunRequest Request(const std::string& key = "") {
    SubmitRunRequest request;
    request.mutable_spec()->mutable_env()->set_id("CartPole-v1");
    request.mutable_spec()->set_name("cartpole");
    request.set_idempotency_key(key);
    return request;
  }

  int64_t Register(CoordinatorCore& core, const std::string& name,
                   WorkerRole role, const Assignment& current = {},
                   int64_t memory_bytes = 0) {
    RegisterWorkerRequest request;
    request.set_worker_name(name);
    request.mutable_capabilities()->set_role(role);
    request.mutable_capabilities()->set_memory_bytes(memory_bytes);
    if (role == LEARNER) request.set_address("127.0.0.1:5000");
    *request.mutable_current_assignment() = current;
    request.set_worker_key(keys_[name]);
    auto response = core.RegisterWorker(request);
    EXPECT_OK(response);
    if (response.ok()) keys_[name] = response->worker_key();
    return response.ok() ? response->lease().epoch() : -1;
  }

  Assignment Beat(CoordinatorCore& core, const std::string& name,
                  int64_t epoch) {
    HeartbeatRequest request;
    request.set_worker_id(name);
    request.set_worker_key(keys_[name]);
    request.set_lease_epoch(epoch);
    auto response = core.Heartbeat(request);
    EXPECT_OK(response);
    return response.ok() ? response->assignment() : Assignment();
  }

  // The reasons of run `id`'s transitions, oldest first (read from the
  // store beside the core, as an operator would).
  std::vector<std::string> Reasons(const std::string& id) {
    std::vector<std::string> reasons;
    auto store = RunStore::Open(options_.store_path, 0);
    EXPECT_OK(store);
    if (!store.ok()) return reasons;
    auto events = (*store)->Events(id);
    EXPECT_OK(events);
    if (!events.ok()) return reasons;
    for (const RunEventRecord& e : *events) reasons.push_back(e.reason);
    return reasons;
  }

  // Each worker's key, as a worker process keeps it.
  std::map<std::string, std::string> keys_;
  absl::Time now_ = absl::FromUnixSeconds(1000);
  CoordinatorOptions options_;
  std::unique_ptr<CoordinatorCore> core_;
};

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
