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
#include "coordinator/sweep_test_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/file_size_limit.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

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
  ASSERT_OK_AND_ASSIGN(const Sweep submitted, Submit(OneAtATime()));
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

// A stored sweep that no longer expands (written by a coordinator whose run
// files meant something else) fails when the coordinator recovers it; its
// trial's run goes on as a run of its own (not cancelled: a newer build's
// stricter rules must not end hours of training), and the sweep's reason
// names it for its owner.
TEST_F(SweepManagerTest, ASweepThatCannotBeRecoveredNamesItsTrialsRuns) {
  ASSERT_OK_AND_ASSIGN(const Sweep submitted, Submit(OneAtATime()));
  const std::string first = submitted.trials(0).run_id();
  ASSERT_FALSE(first.empty());
  ASSERT_OK_AND_ASSIGN(Sweep stored,
                       core_->store()->GetSweep(submitted.sweep_id()));
  stored.mutable_spec()->mutable_base()->mutable_env()->set_id("NoSuchEnv-v0");
  ASSERT_OK(core_->store()->PutSweep(stored));
  Start();
  ASSERT_OK_AND_ASSIGN(const Sweep sweep, sweeps_->Get(submitted.sweep_id()));
  EXPECT_EQ(sweep.state(), FAILED);
  EXPECT_THAT(
      sweep.reason(),
      AllOf(HasSubstr("cannot be recovered"),
            HasSubstr(absl::StrCat(
                "its trials' runs go on as runs of their own: ", first))));
  ListRunsRequest all;
  ASSERT_OK_AND_ASSIGN(const ListRunsResponse runs, core_->ListRuns(all));
  ASSERT_EQ(runs.runs_size(), 1);
  EXPECT_EQ(runs.runs(0).run_id(), first);
  EXPECT_EQ(runs.runs(0).state(), QUEUED);
}

// Idempotency keys are per owner: bob's run with the key of alice's next
// trial ("<sweep>/1", guessable) is not taken as her trial, and her cancel
// leaves it alone.
TEST_F(SweepManagerTest, AnotherOwnersRunWithATrialsKeyIsNotTheTrial) {
  Workers(2);
  ASSERT_OK_AND_ASSIGN(const Sweep submitted, Submit(OneAtATime()));
  const std::string first = submitted.trials(0).run_id();
  SubmitRunRequest guess;
  guess.mutable_spec()->mutable_env()->set_id("CartPole-v1");
  guess.mutable_spec()->set_name("bobs");
  guess.set_idempotency_key(absl::StrCat(submitted.sweep_id(), "/1"));
  ASSERT_OK_AND_ASSIGN(const SubmitRunResponse bobs,
                       core_->SubmitRun(guess, "bob"));
  Tick();  // both placed
  const auto learners = Learners(2);
  ASSERT_EQ(learners.size(), 2u);
  Report(learners.at(first), 4000, 100, 5, /*finished=*/true);
  Tick();
  ASSERT_OK_AND_ASSIGN(const Sweep sweep, sweeps_->Get(submitted.sweep_id()));
  const std::string second = sweep.trials(1).run_id();
  ASSERT_FALSE(second.empty());
  EXPECT_NE(second, bobs.run().run_id());
  ASSERT_OK_AND_ASSIGN(const rl::Run trial_run, core_->GetRun(second));
  EXPECT_EQ(trial_run.owner(), "alice");
  EXPECT_EQ(trial_run.spec().name(), "lr-1");
  ASSERT_OK_AND_ASSIGN(const rl::Run before,
                       core_->GetRun(bobs.run().run_id()));
  ASSERT_OK(sweeps_->Cancel(submitted.sweep_id(), Requester{"alice", false})
                .status());
  EXPECT_EQ(core_->GetRun(second)->state(), CANCELLED);
  ASSERT_OK_AND_ASSIGN(const rl::Run after, core_->GetRun(bobs.run().run_id()));
  EXPECT_EQ(after.owner(), "bob");
  EXPECT_EQ(after.spec().name(), "bobs");
  EXPECT_EQ(after.state(), before.state());
  EXPECT_EQ(after.state(), RUNNING);
}

// A restart does not count a report again: with last_points 3 and reports
// 100, 20, 25 the score stays 100 (a second 25 would push 100 out).
TEST_F(SweepManagerTest, ARestartDoesNotScoreAReportTwice) {
  const std::string three_points = std::string(kSweep).replace(
      std::string(kSweep).find("goal: max}"), 10, "goal: max, last_points: 3}");
  Workers(4);
  ASSERT_OK_AND_ASSIGN(const Sweep submitted, Submit(three_points));
  Tick();
  const auto learners = Learners(4);
  ASSERT_EQ(learners.size(), 4u);
  const std::string first = submitted.trials(0).run_id();
  int64_t version = 0;
  for (const double mean_return : {100.0, 20.0, 25.0}) {
    ++version;
    Report(learners.at(first), 100 * version, mean_return, version);
    Tick();
  }
  ASSERT_OK_AND_ASSIGN(Sweep sweep, sweeps_->Get(submitted.sweep_id()));
  EXPECT_EQ(sweep.trials(0).score(), 100);
  Start();
  Tick();
  ASSERT_OK_AND_ASSIGN(sweep, sweeps_->Get(submitted.sweep_id()));
  EXPECT_EQ(sweep.trials(0).recent_size(), 3);
  EXPECT_EQ(sweep.trials(0).score(), 100);
  // A newer report is a point as before (written as the learner's report
  // would be: its workers have not registered again).
  RunProgress newer;
  newer.set_env_steps(400);
  newer.set_mean_return(30);
  newer.set_policy_version(4);
  ASSERT_OK(core_->store()->UpdateProgress(first, newer));
  sweeps_->Tick();
  ASSERT_OK_AND_ASSIGN(sweep, sweeps_->Get(submitted.sweep_id()));
  EXPECT_EQ(sweep.trials(0).score(), 30);  // the best of 20, 25, 30
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
// A configuration is stored before its run is submitted. Before, a
// restart between the two lost it, and the next configuration took its
// index, whose key returned the lost one's run (of other parameters). A
// configuration the store cannot take is refused now, nothing of it kept.
TEST_F(SweepManagerTest, AConfigurationThatIsNotStoredIsNotRun) {
  constexpr char kExternal[] = R"(
name: tpe
base: {env: {id: CartPole-v1}, total_env_steps: 4000}
method: external
max_trials: 2
parameters:
  ppo.learning_rate: {distribution: log_uniform, min: 1.0e-4, max: 1.0e-2}
metric: {series: learner/mean_return, goal: max}
)";
  Workers(1);
  ASSERT_OK_AND_ASSIGN(const Sweep submitted, Submit(kExternal));
  AddSweepTrialRequest request;
  request.set_sweep_id(submitted.sweep_id());
  (*request.mutable_parameters())["ppo.learning_rate"].set_number_value(1e-3);
  ListRunsRequest all;
  const int runs = core_->ListRuns(all)->runs_size();
  absl::Status refused;
  {
    FileSizeLimit full(1);  // no file of this process grows: a full disk
    refused = sweeps_->AddTrial(request).status();
  }
  EXPECT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.message()), HasSubstr("was not stored"));
  ASSERT_OK_AND_ASSIGN(Sweep sweep, sweeps_->Get(submitted.sweep_id()));
  EXPECT_EQ(sweep.trials_size(), 0);
  EXPECT_EQ(core_->ListRuns(all)->runs_size(), runs);
  // Added again, it goes in, at index 0.
  ASSERT_OK_AND_ASSIGN(sweep, sweeps_->AddTrial(request));
  ASSERT_EQ(sweep.trials_size(), 1);
  EXPECT_EQ(sweep.trials(0).index(), 0);
  EXPECT_FALSE(sweep.trials(0).run_id().empty());
}

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
  // A driver may name the parameters in lowerCamelCase, as a file may.
  AddSweepTrialRequest camel;
  camel.set_sweep_id(submitted.sweep_id());
  (*camel.mutable_parameters())["ppo.learningRate"].set_number_value(2e-3);
  (*camel.mutable_parameters())["policy.activation"].set_string_value("tanh");
  ASSERT_OK_AND_ASSIGN(sweep, sweeps_->AddTrial(camel));
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
