#include "trainer/local_sweep.h"

#include <cmath>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace rl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

SweepSpec Sweep(const std::string& extra, const std::string& method = "grid") {
  auto spec = ParseSweepSpec(std::string(R"(
name: lr
base:
  env: {id: CartPole-v1}
  envs_per_actor: 8
  segment_length: 32
  total_env_steps: 8192
  seed: 1
  ppo: {learning_rate: 0.001, num_epochs: 10, num_minibatches: 1, gamma: 0.98, gae_lambda: 0.8, entropy_coef: 0}
metric: {series: learner/mean_return, last_points: 2}
)") + "method: " + method + "\n" +
                                 extra,
                             RunFileFormat::kYaml, "");
  EXPECT_OK(spec.status());
  return *spec;
}

// ASHA over four learning rates, two of them too small to learn anything in
// 4,096 steps: they stop at the first rung with the reason; the others
// train to their budget, and the table puts the best first.
TEST(LocalSweepTest, AshaStopsTheLosersAtTheirRung) {
  const SweepSpec spec = Sweep(R"(
parameters: {ppo.learning_rate: {values: [0.003, 1.0e-7, 0.001, 1.0e-8]}}
concurrency: 2
early_stopping: {kind: asha, first_rung_steps: 4096, reduction_factor: 2, min_trials_at_rung: 4}
)");
  LocalSweepOptions options;
  options.sweep_dir = MakeTestDir("sweep");
  std::vector<std::string> lines;
  options.log = [&](const std::string& line) { lines.push_back(line); };
  ASSERT_OK_AND_ASSIGN(const std::vector<TrialOutcome> outcomes,
                       RunLocalSweep(spec, options));
  ASSERT_EQ(outcomes.size(), 4u);
  for (int i : {1, 3}) {
    SCOPED_TRACE(i);
    EXPECT_EQ(outcomes[i].state, "STOPPED");
    EXPECT_EQ(outcomes[i].env_steps, 4096);
    EXPECT_THAT(outcomes[i].reason,
                AllOf(HasSubstr("stopped early at rung 1 (4096 env steps) by "
                                "asha"),
                      HasSubstr("is not in the best 1/2 of the 4 trials "
                                "that reached it")));
    EXPECT_FALSE(outcomes[i].checkpoint.empty());
  }
  for (int i : {0, 2}) {
    SCOPED_TRACE(i);
    EXPECT_EQ(outcomes[i].state, "DONE");
    EXPECT_EQ(outcomes[i].env_steps, 8192);
    EXPECT_GT(outcomes[i].score, outcomes[1].score);
    EXPECT_GT(outcomes[i].score, outcomes[3].score);
  }
  const std::string table = SweepTable(spec, outcomes);
  // Best first: a DONE trial heads the table, and the last line names it.
  const size_t first_row = table.find('\n') + 1;
  EXPECT_THAT(table.substr(first_row, 20), HasSubstr("DONE"));
  EXPECT_THAT(table, HasSubstr("best: ppo.learning_rate="));
  EXPECT_THAT(table, HasSubstr("ppo.learning_rate"));
}

TEST(LocalSweepTest, WithoutEarlyStoppingEveryTrialRunsItsBudget) {
  const SweepSpec spec = Sweep(R"(
parameters: {ppo.num_epochs: {values: [2, 4]}}
seeds_per_config: 2
)");
  ASSERT_OK_AND_ASSIGN(const std::vector<TrialOutcome> outcomes,
                       RunLocalSweep(spec, {}));
  ASSERT_EQ(outcomes.size(), 4u);
  for (const TrialOutcome& o : outcomes) {
    EXPECT_EQ(o.state, "DONE");
    EXPECT_EQ(o.env_steps, 8192);
    EXPECT_FALSE(std::isnan(o.score));
  }
  // Two seeds of one configuration differ.
  EXPECT_NE(outcomes[0].score, outcomes[1].score);
  EXPECT_THAT(SweepTable(spec, outcomes), HasSubstr("(mean of its seeds)"));
}

// Population-based training: four learning rates drawn from a range whose
// low end learns nothing; every 2,048 env steps the worst member goes on
// from the best one's checkpoint with its learning rate x0.8 or x1.2.
TEST(LocalSweepTest, PbtTheWorstGoOnFromTheBestWithPerturbedParameters) {
  const SweepSpec spec = Sweep(R"(
parameters: {ppo.learning_rate: {distribution: log_uniform, min: 1.0e-8, max: 3.0e-3}}
max_trials: 4
seed: 3
pbt: {interval_steps: 2048, resample_probability: 0}
)",
                               "pbt");
  EXPECT_THAT(RunLocalSweep(spec, {}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("give the sweep a directory")));
  LocalSweepOptions options;
  options.sweep_dir = MakeTestDir("pbt");
  std::vector<std::string> lines;
  options.log = [&](const std::string& line) { lines.push_back(line); };
  ASSERT_OK_AND_ASSIGN(const std::vector<TrialOutcome> outcomes,
                       RunLocalSweep(spec, options));
  ASSERT_EQ(outcomes.size(), 4u);
  int copies = 0;
  for (const TrialOutcome& o : outcomes) {
    SCOPED_TRACE(o.trial.index);
    EXPECT_EQ(o.state, "DONE");
    EXPECT_EQ(o.env_steps, 8192);
    EXPECT_THAT(o.checkpoint, HasSubstr(o.trial.spec.name()));
    const double lr = o.trial.parameters.at("ppo.learning_rate").number_value();
    EXPECT_FLOAT_EQ(o.trial.spec.ppo().learning_rate(), static_cast<float>(lr));
    // Its lineage: its donors' copies, then its own.
    for (const std::string& step : o.lineage) {
      copies +=
          absl::StartsWith(step, absl::StrCat("trial ", o.trial.index, " at "));
      EXPECT_THAT(step, HasSubstr(" env steps: copied trial "));
      EXPECT_THAT(step, HasSubstr("ppo.learning_rate "));
      EXPECT_THAT(step,
                  testing::AnyOf(HasSubstr("(x0.8)"), HasSubstr("(x1.2)")));
    }
  }
  // Three rounds end before the budget; each copies unless the scores tie.
  // A copy overwritten by a later one leaves the final lineages, so the
  // log has every copy and the lineages hold some of them.
  int logged = 0;
  for (const std::string& line : lines) {
    logged += line.find("copied trial") != std::string::npos;
  }
  EXPECT_GE(logged, 1);
  EXPECT_LE(logged, 3);
  EXPECT_GE(copies, 1);
  EXPECT_LE(copies, logged);
  for (const TrialOutcome& o : outcomes) {
    for (const std::string& step : o.lineage) {
      EXPECT_THAT(lines, testing::Contains(step));
    }
  }
  EXPECT_THAT(lines, testing::Contains(
                         HasSubstr("round 4: training 4 trial(s) to 8192")));
  EXPECT_THAT(SweepTable(spec, outcomes), HasSubstr("lineage of trial "));
}

TEST(LocalSweepTest, OnlyTheMeanReturnCanBeScoredHere) {
  SweepSpec spec = Sweep("parameters: {ppo.num_epochs: {values: [2]}}\n");
  spec.mutable_metric()->set_series("learner/entropy");
  EXPECT_THAT(RunLocalSweep(spec, {}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("metric.series: rl_local scores "
                                 "learner/mean_return")));
}

}  // namespace
}  // namespace rl
