// PBT through the coordinator (sweep_test_fixture.h): rounds, copies of the
// best member's checkpoint, lineage.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/sweep_test_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

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

}  // namespace
}  // namespace rl
