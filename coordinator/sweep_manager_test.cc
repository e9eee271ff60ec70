// The coordinator's sweeps over a real CoordinatorCore and SQLite store,
// its workers registered and reporting by hand (no processes): trials as
// runs, ASHA's decisions at a rung, the best trial, a restart, cancelling
// and bad sweep files.
#include "coordinator/sweep_manager.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace rl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kSweep[] = R"(
name: lr
base: {env: {id: CartPole-v1}, total_env_steps: 4000, envs_per_actor: 8,
       segment_length: 32}
method: grid
parameters:
  ppo.learning_rate: {values: [0.001, 0.002, 0.003, 0.004]}
metric: {series: learner/mean_return, goal: max}
concurrency: 4
early_stopping: {kind: asha, first_rung_steps: 1000, reduction_factor: 2,
                 min_trials_at_rung: 2}
)";

class SweepManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = MakeTestDir();
    options_.store_path = dir + "/coordinator.db";
    options_.runs_dir = dir + "/runs";
    options_.lease_ttl = absl::Hours(1);
    Start();
  }

  void Start() {
    sweeps_.reset();
    core_.reset();
    auto core = CoordinatorCore::Create(options_);
    ASSERT_OK(core);
    core_ = *std::move(core);
    auto sweeps = SweepManager::Create(core_.get(), core_->store());
    ASSERT_OK(sweeps);
    sweeps_ = *std::move(sweeps);
  }

  absl::StatusOr<Sweep> Submit(const std::string& text,
                               const std::string& base = "") {
    SubmitSweepRequest request;
    request.set_sweep_file(text);
    request.set_sweep_file_name("lr.yaml");
    request.set_base_run_file(base);
    return sweeps_->Submit(request, "alice");
  }

  // Learner and actor pairs 0..n-1, registered once.
  void Workers(int n) {
    for (int i = 0; i < n; ++i) {
      for (const WorkerRole role : {LEARNER, ACTOR}) {
        const std::string name =
            absl::StrCat(role == LEARNER ? "learner-" : "actor-", i);
        RegisterWorkerRequest request;
        request.set_worker_name(name);
        request.mutable_capabilities()->set_role(role);
        if (role == LEARNER) request.set_address("127.0.0.1:5000");
        request.set_worker_key(keys_[name]);  // again after a restart
        auto response = core_->RegisterWorker(request);
        ASSERT_OK(response);
        keys_[name] = response->worker_key();
        epochs_[name] = response->lease().epoch();
      }
    }
  }

  // Run id -> the learner holding it (from the heartbeats).
  std::map<std::string, std::pair<std::string, int64_t>> Learners(int n) {
    std::map<std::string, std::pair<std::string, int64_t>> held;
    for (int i = 0; i < n; ++i) {
      const std::string name = absl::StrCat("learner-", i);
      HeartbeatRequest beat;
      beat.set_worker_id(name);
      beat.set_worker_key(keys_[name]);
      beat.set_lease_epoch(epochs_[name]);
      auto response = core_->Heartbeat(beat);
      EXPECT_OK(response);
      if (response.ok() && !response->assignment().run_id().empty()) {
        held[response->assignment().run_id()] = {
            name, response->assignment().assignment_id()};
        assignments_[response->assignment().run_id()] = response->assignment();
      }
    }
    return held;
  }

  void Report(const std::pair<std::string, int64_t>& learner, int64_t steps,
              double mean_return, int64_t version, bool finished = false) {
    ReportStatusRequest report;
    report.set_worker_id(learner.first);
    report.set_worker_key(keys_[learner.first]);
    report.set_assignment_id(learner.second);
    report.mutable_progress()->set_env_steps(steps);
    report.mutable_progress()->set_mean_return(mean_return);
    report.mutable_progress()->set_policy_version(version);
    report.set_finished(finished);
    ASSERT_OK(core_->ReportStatus(report));
  }

  void Tick() {
    core_->Tick();
    sweeps_->Tick();
  }

  CoordinatorOptions options_;
  std::unique_ptr<CoordinatorCore> core_;
  std::unique_ptr<SweepManager> sweeps_;
  std::map<std::string, std::string> keys_;
  std::map<std::string, int64_t> epochs_;
  // Run id -> its learner's last assignment (from Learners).
  std::map<std::string, Assignment> assignments_;
};

TEST_F(SweepManagerTest, AshaStopsLosersAtTheirRungAndTheBestTrialWins) {
  Workers(4);
  ASSERT_OK_AND_ASSIGN(const Sweep submitted, Submit(kSweep));
  EXPECT_EQ(submitted.state(), RUNNING);
  EXPECT_EQ(submitted.owner(), "alice");
  ASSERT_EQ(submitted.trials_size(), 4);
  for (const Trial& trial : submitted.trials()) {
    EXPECT_FALSE(trial.run_id().empty()) << "concurrency 4: all started";
    ASSERT_OK_AND_ASSIGN(const rl::Run run, core_->GetRun(trial.run_id()));
    EXPECT_EQ(run.owner(), "alice");
    EXPECT_EQ(run.spec().name(), absl::StrCat("lr-", trial.index()));
  }
  Tick();
  const auto learners = Learners(4);
  ASSERT_EQ(learners.size(), 4u);
  // Trial k reaches the first rung (1000 steps) with return 30 - 10k: in
  // index order, trial 0 is alone there (goes on), then each later one is
  // outside the best half of those there so far.
  for (const Trial& trial : submitted.trials()) {
    Report(learners.at(trial.run_id()), 1200, 30 - 10 * trial.index(), 1);
  }
  sweeps_->Tick();
  ASSERT_OK_AND_ASSIGN(Sweep sweep, sweeps_->Get(submitted.sweep_id()));
  EXPECT_EQ(sweep.trials(0).state(), RUNNING);
  EXPECT_EQ(sweep.trials(0).rung_scores_size(), 1);
  for (int k = 1; k < 4; ++k) {
    const Trial& trial = sweep.trials(k);
    EXPECT_EQ(trial.state(), CANCELLED) << k;
    EXPECT_THAT(
        trial.reason(),
        AllOf(HasSubstr("stopped early at rung 1 (1000 env steps)"),
              HasSubstr(absl::StrCat("learner/mean_return ", 30 - 10 * k)),
              HasSubstr("not in the best 1/2 of the")))
        << k;
    ASSERT_OK_AND_ASSIGN(const rl::Run run, core_->GetRun(trial.run_id()));
    EXPECT_EQ(run.state(), CANCELLED);
    EXPECT_EQ(run.failure_reason(), trial.reason());
  }
  // The winner goes on to its budget; its score is the last report's.
  Report(learners.at(sweep.trials(0).run_id()), 4000, 45, 2,
         /*finished=*/true);
  Tick();
  ASSERT_OK_AND_ASSIGN(sweep, sweeps_->Get(submitted.sweep_id()));
  EXPECT_EQ(sweep.state(), SUCCEEDED);
  EXPECT_EQ(sweep.best_run_id(), sweep.trials(0).run_id());
  EXPECT_EQ(sweep.trials(0).score(), 45);
  EXPECT_EQ(sweep.trials(0).env_steps(), 4000);
  // Stored: a new manager over the same store reads it back as it ended.
  Start();
  ASSERT_OK_AND_ASSIGN(const Sweep stored, sweeps_->Get(submitted.sweep_id()));
  EXPECT_EQ(stored.state(), SUCCEEDED);
  EXPECT_EQ(stored.best_run_id(), sweep.best_run_id());
  ASSERT_OK_AND_ASSIGN(const ListSweepsResponse list, sweeps_->List());
  ASSERT_EQ(list.sweeps_size(), 1);
  EXPECT_EQ(list.sweeps(0).sweep_id(), submitted.sweep_id());
}

// Method pbt (issue 50): each member's round is a run that starts from
// the newest checkpoint of its last round's run, or of the better member's
// it copied, and stops at the round's env steps; the worst member copies
// the best one and explores; the lineage is kept; a restart between rounds
// submits nothing twice; the last round runs to the budget.
TEST_F(SweepManagerTest, PbtRoundsCopyTheBestMembersCheckpoint) {
  constexpr char kPbt[] = R"(
name: pbt
base: {env: {id: CartPole-v1}, total_env_steps: 3000, envs_per_actor: 8,
       segment_length: 32, seed: 5}
method: pbt
max_trials: 4
seed: 1
parameters:
  ppo.learning_rate: {distribution: log_uniform, min: 1.0e-4, max: 1.0e-2}
metric: {series: learner/mean_return, goal: max, last_points: 3}
concurrency: 4
pbt: {interval_steps: 1000, fraction: 0.25, resample_probability: 0}
)";
  Workers(4);
  ASSERT_OK_AND_ASSIGN(const Sweep submitted, Submit(kPbt));
  ASSERT_EQ(submitted.trials_size(), 4);
  EXPECT_EQ(submitted.pbt_round(), 0);
  std::vector<std::string> first_runs;
  for (const Trial& trial : submitted.trials()) {
    ASSERT_EQ(trial.round_run_ids_size(), 1) << trial.index();
    EXPECT_EQ(trial.round_run_ids(0), trial.run_id());
    ASSERT_OK_AND_ASSIGN(const rl::Run run, core_->GetRun(trial.run_id()));
    EXPECT_EQ(run.stop_env_steps(), 1000);
    EXPECT_TRUE(run.start_from_run().empty());
    first_runs.push_back(trial.run_id());
  }
  Tick();
  auto learners = Learners(4);
  ASSERT_EQ(learners.size(), 4u);
  // Round 1 ends: trial k scores 10 (k + 1), so trial 0 (the worst of 4,
  // fraction 0.25) copies trial 3 (the best).
  for (const Trial& trial : submitted.trials()) {
    if (trial.index() == 3) continue;
    Report(learners.at(trial.run_id()), 1024, 10.0 * (trial.index() + 1), 4,
           /*finished=*/true);
  }
  Tick();
  ASSERT_OK_AND_ASSIGN(Sweep sweep, sweeps_->Get(submitted.sweep_id()));
  // Those that reached the round's end wait for trial 3: not done.
  EXPECT_EQ(sweep.pbt_round(), 0);
  EXPECT_EQ(sweep.trials_ended(), 0);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(sweep.trials(k).state(), QUEUED) << k;
    EXPECT_EQ(sweep.trials(k).rounds_done(), 1) << k;
    EXPECT_THAT(sweep.trials(k).reason(),
                HasSubstr("round 1 ended at 1024 env steps; waits for the "
                          "others"));
  }
  EXPECT_EQ(sweep.trials(3).rounds_done(), 0);
  ASSERT_OK_AND_ASSIGN(
      const rl::Run ended,
      core_->GetRun(submitted.trials(0).run_id(), /*with_history=*/true));
  EXPECT_EQ(ended.state(), SUCCEEDED);
  ASSERT_GT(ended.history_size(), 0);
  EXPECT_EQ(ended.history(ended.history_size() - 1).reason(),
            "its round's end reached (1000 env steps)");
  Report(learners.at(submitted.trials(3).run_id()), 1024, 40.0, 4,
         /*finished=*/true);
  Tick();
  ASSERT_OK_AND_ASSIGN(sweep, sweeps_->Get(submitted.sweep_id()));
  EXPECT_EQ(sweep.state(), RUNNING);
  EXPECT_EQ(sweep.pbt_round(), 1);
  for (const Trial& trial : sweep.trials()) {
    ASSERT_EQ(trial.round_run_ids_size(), 2) << trial.index();
    EXPECT_EQ(trial.round_run_ids(0), first_runs[trial.index()]);
    EXPECT_EQ(trial.run_id(), trial.round_run_ids(1));
    EXPECT_NE(trial.state(), SUCCEEDED) << "its round-2 run is not done";
    ASSERT_OK_AND_ASSIGN(const rl::Run run, core_->GetRun(trial.run_id()));
    EXPECT_EQ(run.stop_env_steps(), 2000);
    EXPECT_EQ(run.spec().seed(),
              submitted.trials(trial.index()).seed_offset() + 5 + 7919);
    const std::string from =
        trial.index() == 0 ? first_runs[3] : first_runs[trial.index()];
    EXPECT_EQ(trial.start_from_run(), from) << trial.index();
    EXPECT_EQ(run.start_from_run(), from) << trial.index();
  }
  const Trial& copier = sweep.trials(0);
  ASSERT_EQ(copier.lineage_size(), 1);
  EXPECT_THAT(copier.lineage(0),
              AllOf(HasSubstr("trial 0 at 1024 env steps: copied trial 3"),
                    HasSubstr("ppo.learning_rate")));
  EXPECT_EQ(copier.score(), 40);  // the donor's window, until its own
  EXPECT_EQ(copier.round_start_env_steps(), 1024);
  EXPECT_NE(
      copier.parameters().at("ppo.learning_rate").number_value(),
      submitted.trials(0).parameters().at("ppo.learning_rate").number_value());
  ASSERT_OK_AND_ASSIGN(const rl::Run copier_run,
                       core_->GetRun(copier.run_id()));
  EXPECT_FLOAT_EQ(copier_run.spec().ppo().learning_rate(),
                  copier.parameters().at("ppo.learning_rate").number_value());
  for (int k = 1; k < 4; ++k) EXPECT_EQ(sweep.trials(k).lineage_size(), 0);
  // The coordinator restarts between the round's submits and its runs'
  // placement: nothing is lost or submitted twice.
  Start();
  Workers(4);
  Tick();
  ASSERT_OK_AND_ASSIGN(sweep, sweeps_->Get(submitted.sweep_id()));
  EXPECT_EQ(sweep.pbt_round(), 1);
  EXPECT_EQ(sweep.trials(0).lineage_size(), 1);
  ListRunsRequest all;
  EXPECT_EQ(core_->ListRuns(all)->runs_size(), 8);
  learners.clear();
  for (int tries = 0; tries < 5 && learners.size() < 4; ++tries) {
    learners = Learners(4);
    if (learners.size() < 4) core_->Tick();
  }
  ASSERT_EQ(learners.size(), 4u);
  // Each learner is told where its run starts and stops.
  for (const Trial& trial : sweep.trials()) {
    const Assignment& a = assignments_.at(trial.run_id());
    EXPECT_EQ(a.stop_env_steps(), 2000);
    EXPECT_EQ(a.start_from(), options_.runs_dir + "/" + trial.start_from_run());
  }
  // Round 2: trial 1 now leads; the last round runs to the budget. Trial
  // 0 scores 20, the worst: the 40 it took over with its copy of trial 3
  // is not its own (with last_points 3 it would otherwise count).
  for (const Trial& trial : sweep.trials()) {
    Report(learners.at(trial.run_id()), 2048,
           trial.index() == 1 ? 90.0 : 20.0 + trial.index(), 8,
           /*finished=*/true);
  }
  Tick();
  ASSERT_OK_AND_ASSIGN(sweep, sweeps_->Get(submitted.sweep_id()));
  EXPECT_EQ(sweep.pbt_round(), 2);
  for (const Trial& trial : sweep.trials()) {
    ASSERT_EQ(trial.round_run_ids_size(), 3) << trial.index();
    ASSERT_OK_AND_ASSIGN(const rl::Run run, core_->GetRun(trial.run_id()));
    EXPECT_EQ(run.stop_env_steps(), 0) << "the last round: the budget";
  }
  // Trial 0 (worst, 20) copied trial 1: its lineage is trial 1's (none)
  // and this copy.
  EXPECT_EQ(sweep.trials(2).score(), 22) << "this round's point only";
  ASSERT_EQ(sweep.trials(0).lineage_size(), 1);
  EXPECT_THAT(sweep.trials(0).lineage(0),
              HasSubstr("trial 0 at 2048 env steps: copied trial 1"));
  EXPECT_EQ(sweep.trials(0).start_from_run(), sweep.trials(1).round_run_ids(1));
  core_->Tick();
  learners = Learners(4);
  ASSERT_EQ(learners.size(), 4u);
  for (const Trial& trial : sweep.trials()) {
    Report(learners.at(trial.run_id()), 3072,
           trial.index() == 2 ? 150.0 : 100.0, 12, /*finished=*/true);
  }
  Tick();
  ASSERT_OK_AND_ASSIGN(sweep, sweeps_->Get(submitted.sweep_id()));
  EXPECT_EQ(sweep.state(), SUCCEEDED);
  EXPECT_EQ(sweep.best_run_id(), sweep.trials(2).run_id());
  EXPECT_EQ(sweep.best_score(), 150);
  EXPECT_EQ(core_->ListRuns(all)->runs_size(), 12);
}

// Issue 46: a rung is scored from the points at or before its env steps;
// a report that arrives well past it (return 415 at 1900 steps) does not
// score the rung at 1000 steps (214 at 900 steps does).
TEST_F(SweepManagerTest, ARungIsScoredFromThePointsAtOrBeforeIt) {
  Workers(4);
  ASSERT_OK_AND_ASSIGN(const Sweep submitted, Submit(kSweep));
  Tick();
  const auto learners = Learners(4);
  ASSERT_EQ(learners.size(), 4u);
  const std::string first = submitted.trials(0).run_id();
  Report(learners.at(first), 900, 214, 1);
  sweeps_->Tick();
  ASSERT_OK_AND_ASSIGN(Sweep sweep, sweeps_->Get(submitted.sweep_id()));
  EXPECT_EQ(sweep.trials(0).rung_scores_size(), 0);
  Report(learners.at(first), 1900, 415, 2);
  sweeps_->Tick();
  ASSERT_OK_AND_ASSIGN(sweep, sweeps_->Get(submitted.sweep_id()));
  ASSERT_EQ(sweep.trials(0).rung_scores_size(), 1);
  EXPECT_EQ(sweep.trials(0).rung_scores(0), 214);
  EXPECT_EQ(sweep.trials(0).score(), 415);  // its score is its latest
}

TEST_F(SweepManagerTest, ARestartLosesNothingAndSubmitsNothingTwice) {
  const std::string one_at_a_time =
      absl::StrCat(kSweep, "\nconcurrency: 1\n")
          .replace(std::string(kSweep).find("concurrency: 4"), 14,
                   "max_trials: 9");
  ASSERT_OK_AND_ASSIGN(const Sweep submitted, Submit(one_at_a_time));
  ASSERT_EQ(submitted.trials_size(), 4);
  const std::string first = submitted.trials(0).run_id();
  EXPECT_FALSE(first.empty());
  EXPECT_TRUE(submitted.trials(1).run_id().empty());
  // The coordinator restarts: the sweep comes back with its trials.
  Start();
  Workers(1);
  Tick();
  ASSERT_OK_AND_ASSIGN(Sweep sweep, sweeps_->Get(submitted.sweep_id()));
  EXPECT_EQ(sweep.state(), RUNNING);
  EXPECT_EQ(sweep.trials(0).run_id(), first);
  EXPECT_TRUE(sweep.trials(1).run_id().empty());
  ListRunsRequest all;
  EXPECT_EQ(core_->ListRuns(all)->runs_size(), 1);
  // Its first trial ends: the second starts.
  Report(Learners(1).at(first), 4000, 100, 5, /*finished=*/true);
  Tick();
  ASSERT_OK_AND_ASSIGN(sweep, sweeps_->Get(submitted.sweep_id()));
  EXPECT_EQ(sweep.trials(0).state(), SUCCEEDED);
  EXPECT_FALSE(sweep.trials(1).run_id().empty());
  EXPECT_EQ(core_->ListRuns(all)->runs_size(), 2);
}

TEST_F(SweepManagerTest, CancellingASweepCancelsItsTrials) {
  const std::string two_at_a_time = std::string(kSweep).replace(
      std::string(kSweep).find("concurrency: 4"), 14, "concurrency: 2");
  ASSERT_OK_AND_ASSIGN(const Sweep submitted, Submit(two_at_a_time));
  ASSERT_OK_AND_ASSIGN(const Sweep cancelled,
                       sweeps_->Cancel(submitted.sweep_id()));
  EXPECT_EQ(cancelled.state(), CANCELLED);
  for (const Trial& trial : cancelled.trials()) {
    EXPECT_EQ(trial.state(), CANCELLED) << trial.index();
    if (trial.index() < 2) {
      ASSERT_OK_AND_ASSIGN(const rl::Run run, core_->GetRun(trial.run_id()));
      EXPECT_EQ(run.state(), CANCELLED);
      EXPECT_THAT(run.failure_reason(),
                  HasSubstr(absl::StrCat("its sweep ", submitted.sweep_id(),
                                         " was cancelled")));
    } else {
      EXPECT_TRUE(trial.run_id().empty());
      EXPECT_THAT(trial.reason(), HasSubstr("not started"));
    }
  }
  // Idempotent, and nothing starts afterwards.
  ASSERT_OK_AND_ASSIGN(const Sweep again,
                       sweeps_->Cancel(submitted.sweep_id()));
  EXPECT_EQ(again.state(), CANCELLED);
  Tick();
  ListRunsRequest all;
  EXPECT_EQ(core_->ListRuns(all)->runs_size(), 2);
}

// Method external: the caller (the Python client's Optuna sampler) picks
// each configuration; the coordinator checks it against the sweep's
// space and runs it like any trial.
TEST_F(SweepManagerTest, AnExternalSweepRunsTheCallersConfigurations) {
  constexpr char kExternal[] = R"(
name: tpe
base: {env: {id: CartPole-v1}, total_env_steps: 4000}
method: external
max_trials: 2
concurrency: 1
parameters:
  ppo.learning_rate: {distribution: log_uniform, min: 1.0e-4, max: 1.0e-2}
  policy.activation: {values: [tanh, relu]}
metric: {series: learner/mean_return, goal: max}
)";
  Workers(1);
  ASSERT_OK_AND_ASSIGN(const Sweep submitted, Submit(kExternal));
  EXPECT_EQ(submitted.trials_size(), 0);
  EXPECT_EQ(submitted.state(), RUNNING);
  auto add = [&](double lr, const std::string& activation) {
    AddSweepTrialRequest request;
    request.set_sweep_id(submitted.sweep_id());
    (*request.mutable_parameters())["ppo.learning_rate"].set_number_value(lr);
    (*request.mutable_parameters())["policy.activation"].set_string_value(
        activation);
    return sweeps_->AddTrial(request);
  };
  EXPECT_THAT(add(0.5, "gelu").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("parameters.policy.activation: not one "
                                       "of its values (got \"gelu\")"),
                             HasSubstr("parameters.ppo.learning_rate: must "
                                       "be in [0.0001, 0.01] (got 0.5)"))));
  ASSERT_OK_AND_ASSIGN(Sweep sweep, add(1e-3, "relu"));
  ASSERT_EQ(sweep.trials_size(), 1);
  const std::string first = sweep.trials(0).run_id();
  ASSERT_FALSE(first.empty());
  ASSERT_OK_AND_ASSIGN(const rl::Run run, core_->GetRun(first));
  EXPECT_FLOAT_EQ(run.spec().ppo().learning_rate(), 1e-3f);
  EXPECT_EQ(run.spec().policy().activation(), "relu");
  ASSERT_OK_AND_ASSIGN(sweep, add(2e-3, "tanh"));
  EXPECT_TRUE(sweep.trials(1).run_id().empty());  // concurrency 1
  EXPECT_THAT(add(3e-3, "tanh").status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("max_trials (2)")));
  // Its configurations survive a restart.
  Start();
  Workers(1);
  Tick();
  ASSERT_OK_AND_ASSIGN(sweep, sweeps_->Get(submitted.sweep_id()));
  ASSERT_EQ(sweep.trials_size(), 2);
  EXPECT_EQ(sweep.trials(0).run_id(), first);
  Report(Learners(1).at(first), 4000, 200, 3, /*finished=*/true);
  Tick();
  ASSERT_OK_AND_ASSIGN(sweep, sweeps_->Get(submitted.sweep_id()));
  const std::string second = sweep.trials(1).run_id();
  ASSERT_FALSE(second.empty());
  ASSERT_OK_AND_ASSIGN(const rl::Run second_run, core_->GetRun(second));
  EXPECT_EQ(second_run.spec().policy().activation(), "tanh");
  core_->Tick();  // places it
  Report(Learners(1).at(second), 4000, 300, 3, /*finished=*/true);
  Tick();
  ASSERT_OK_AND_ASSIGN(sweep, sweeps_->Get(submitted.sweep_id()));
  EXPECT_EQ(sweep.state(), SUCCEEDED);
  EXPECT_EQ(sweep.best_run_id(), second);
  // A sweep that draws its own takes none.
  ASSERT_OK_AND_ASSIGN(const Sweep grid, Submit(kSweep));
  AddSweepTrialRequest request;
  request.set_sweep_id(grid.sweep_id());
  EXPECT_THAT(sweeps_->AddTrial(request).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("draws its own trials (method grid)")));
}

// Issue 46: another user can neither add a trial to alice's sweep nor
// cancel it; alice and an admin can, and the reason names who.
TEST_F(SweepManagerTest, OnlyItsOwnerOrAnAdminChangesASweep) {
  const std::string external = R"(
name: ext
base: {env: {id: CartPole-v1}, total_env_steps: 4000}
method: external
max_trials: 4
concurrency: 1
parameters:
  ppo.learning_rate: {distribution: log_uniform, min: 1.0e-4, max: 1.0e-2}
metric: {series: learner/mean_return, goal: max}
)";
  Workers(1);
  ASSERT_OK_AND_ASSIGN(const Sweep submitted, Submit(external));
  ASSERT_EQ(submitted.owner(), "alice");
  AddSweepTrialRequest request;
  request.set_sweep_id(submitted.sweep_id());
  (*request.mutable_parameters())["ppo.learning_rate"].set_number_value(1e-3);
  const Requester mallory{"mallory", false};
  EXPECT_THAT(sweeps_->AddTrial(request, mallory).status(),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       AllOf(HasSubstr("belongs to alice"),
                             HasSubstr("mallory may not change it"))));
  EXPECT_THAT(sweeps_->Cancel(submitted.sweep_id(), mallory).status(),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("belongs to alice")));
  ASSERT_OK_AND_ASSIGN(Sweep sweep, sweeps_->Get(submitted.sweep_id()));
  EXPECT_EQ(sweep.trials_size(), 0);
  EXPECT_EQ(sweep.state(), RUNNING);
  // Nor a trial's run.
  ASSERT_OK_AND_ASSIGN(sweep,
                       sweeps_->AddTrial(request, Requester{"alice", false}));
  ASSERT_EQ(sweep.trials_size(), 1);
  const std::string run_id = sweep.trials(0).run_id();
  EXPECT_THAT(core_->CancelRunFor(run_id, mallory),
              StatusIs(absl::StatusCode::kPermissionDenied));
  ASSERT_OK_AND_ASSIGN(const rl::Run running, core_->GetRun(run_id));
  EXPECT_NE(running.state(), CANCELLED);
  // An admin may; the reason names the admin.
  ASSERT_OK_AND_ASSIGN(
      const Sweep cancelled,
      sweeps_->Cancel(submitted.sweep_id(), Requester{"ops", true}));
  EXPECT_EQ(cancelled.state(), CANCELLED);
  EXPECT_EQ(cancelled.reason(), "cancelled by ops");
  ASSERT_OK_AND_ASSIGN(const rl::Run ended, core_->GetRun(run_id));
  EXPECT_THAT(ended.failure_reason(), HasSubstr("was cancelled by ops"));
}

TEST_F(SweepManagerTest, BadSweepFilesAreRefusedNamingTheField) {
  const std::string typo = std::string(kSweep).replace(
      std::string(kSweep).find("ppo.learning_rate"), 17, "ppo.learnin_rate");
  EXPECT_THAT(Submit(typo).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("lr.yaml: "),
                             HasSubstr("parameters.ppo.learnin_rate: no such "
                                       "run-file field"))));
  // A base run file must come with the sweep file.
  constexpr char kByFile[] = R"(
base_run_file: ../cartpole.yaml
metric: {series: learner/mean_return}
method: grid
parameters:
  ppo.learning_rate: {values: [0.001, 0.002]}
)";
  EXPECT_THAT(Submit(kByFile).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("base_run_file: the sweep names "
                                 "\"../cartpole.yaml\": send that file's "
                                 "text")));
  ASSERT_OK_AND_ASSIGN(
      const Sweep by_file,
      Submit(kByFile, "env: {id: CartPole-v1}\ntotal_env_steps: 5000\n"));
  EXPECT_EQ(by_file.spec().base().total_env_steps(), 5000);
  EXPECT_EQ(by_file.trials_size(), 2);
  // The coordinator scores the runs' mean return only.
  EXPECT_THAT(Submit(std::string(kSweep).replace(
                         std::string(kSweep).find("learner/mean_return"), 19,
                         "actor/env_seconds"))
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("metric.series: the coordinator scores "
                                 "learner/mean_return")));
  // Population-based training's own fields are checked as rl_local's.
  std::string pbt(kByFile);
  pbt.replace(pbt.find("method: grid"), 12,
              "method: pbt\nmax_trials: 4\npbt: {fraction: 0.9}");
  EXPECT_THAT(
      Submit(pbt, "env: {id: CartPole-v1}\ntotal_env_steps: 5000\n").status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("pbt.fraction: must be in (0, 0.5]")));
  // The coordinator keeps every round's run: at most 100 rounds.
  std::string many(kByFile);
  many.replace(many.find("method: grid"), 12,
               "method: pbt\nmax_trials: 4\npbt: {interval_steps: 40}");
  EXPECT_THAT(
      Submit(many,
             "env: {id: CartPole-v1}\ntotal_env_steps: 5000\n"
             "envs_per_actor: 1\nsegment_length: 8\n")
          .status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("pbt.interval_steps: 40 makes more than 100 rounds")));
  EXPECT_THAT(sweeps_->Get("sweep-999999").status(),
              StatusIs(absl::StatusCode::kNotFound));
}

// An owner's running sweeps are bounded; ListSweeps has their summaries.
TEST_F(SweepManagerTest, AnOwnersRunningSweepsAreBounded) {
  auto made = SweepManager::Create(core_.get(), core_->store(), 2);
  ASSERT_OK(made);
  sweeps_ = *std::move(made);
  SubmitSweepRequest keyed;
  keyed.set_sweep_file(kSweep);
  keyed.set_idempotency_key("first");
  ASSERT_OK_AND_ASSIGN(const Sweep first, sweeps_->Submit(keyed, "alice"));
  ASSERT_OK(Submit(kSweep).status());
  // At the limit, a retry of a submit that went through still gets its
  // sweep.
  ASSERT_OK_AND_ASSIGN(const Sweep again, sweeps_->Submit(keyed, "alice"));
  EXPECT_EQ(again.sweep_id(), first.sweep_id());
  EXPECT_THAT(Submit(kSweep).status(),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("alice has 2 sweeps running, at most 2 "
                                 "(--max_sweeps_per_user)")));
  ASSERT_OK_AND_ASSIGN(const ListSweepsResponse list, sweeps_->List());
  ASSERT_EQ(list.sweeps_size(), 2);
  EXPECT_EQ(list.sweeps(0).trials_total(), 4);
  EXPECT_EQ(list.sweeps(0).trials_ended(), 0);
  // Cancelling one makes room.
  ASSERT_OK(sweeps_->Cancel(list.sweeps(0).sweep_id()).status());
  ASSERT_OK(Submit(kSweep).status());
}

}  // namespace
}  // namespace rl
