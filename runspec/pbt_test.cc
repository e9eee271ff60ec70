#include "runspec/pbt.h"

#include <cmath>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runspec/sweep_spec.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

constexpr char kPbt[] = R"(
name: pop
base:
  env: {id: CartPole-v1}
  total_env_steps: 100000
  seed: 5
metric: {series: learner/mean_return}
method: pbt
max_trials: 4
parameters:
  ppo.learning_rate: {distribution: log_uniform, min: 1.0e-4, max: 1.0e-2}
  ppo.num_epochs: {distribution: int, min: 1, max: 10}
  ppo.clip_coef: {values: [0.1, 0.2, 0.3]}
)";

absl::StatusOr<SweepSpec> Parse(const std::string& text) {
  return ParseSweepSpec(text, RunFileFormat::kYaml, "");
}

google::protobuf::Value Number(double x) {
  google::protobuf::Value v;
  v.set_number_value(x);
  return v;
}

TEST(PbtTest, DefaultsAndAPopulationOfSeeds) {
  ASSERT_OK_AND_ASSIGN(const SweepSpec spec, Parse(kPbt));
  EXPECT_EQ(spec.pbt().interval_steps(), 10000);  // a tenth of the budget
  EXPECT_DOUBLE_EQ(spec.pbt().fraction(), 0.25);
  ASSERT_EQ(spec.pbt().perturb_factors_size(), 2);
  EXPECT_DOUBLE_EQ(spec.pbt().resample_probability(), 0.25);
  ASSERT_OK_AND_ASSIGN(const std::vector<SweepTrial> trials, ExpandSweep(spec));
  ASSERT_EQ(trials.size(), 4u);
  std::set<uint64_t> seeds;
  for (const SweepTrial& t : trials) seeds.insert(t.spec.seed());
  EXPECT_EQ(seeds, (std::set<uint64_t>{5, 6, 7, 8}));
  EXPECT_EQ(PbtRoundSteps(spec, 0), 10000);
  EXPECT_EQ(PbtRoundSteps(spec, 9), 100000);
  EXPECT_EQ(PbtRoundSteps(spec, 12), 100000);  // never past the budget
  // A short budget: the default round still holds an update (1,024 steps).
  std::string short_budget(kPbt);
  short_budget.replace(short_budget.find("total_env_steps: 100000"), 23,
                       "total_env_steps: 5000");
  ASSERT_OK_AND_ASSIGN(const SweepSpec small, Parse(short_budget));
  EXPECT_EQ(small.pbt().interval_steps(),
            small.base().envs_per_actor() * small.base().segment_length());
}

TEST(PbtTest, RefusesWhatCannotBeCopiedNamingEachField) {
  const std::string bad = std::string(kPbt) + R"(
  policy.hidden_sizes: {values: [[32], [64]]}
  ppo.normalize_observations: {values: [true, false]}
seeds_per_config: 2
early_stopping: {kind: asha, first_rung_steps: 1000}
pbt: {interval_steps: 100000, fraction: 0.6, perturb_factors: [0, 1.2],
      resample_probability: 1.5}
)";
  const absl::Status status = Parse(bad).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  const std::string m(status.message());
  EXPECT_THAT(m, HasSubstr("parameters.policy.hidden_sizes: pbt copies"));
  EXPECT_THAT(m, HasSubstr("(not ppo.normalize_observations)"));
  EXPECT_THAT(m, HasSubstr("seeds_per_config: must be 1 for pbt"));
  EXPECT_THAT(m, HasSubstr("early_stopping.kind: must be none for pbt"));
  EXPECT_THAT(m, HasSubstr("pbt.interval_steps: must be in [1, "
                           "base.total_env_steps = 100000) (got 100000)"));
  EXPECT_THAT(m, HasSubstr("pbt.fraction: must be in (0, 0.5] (got 0.6)"));
  EXPECT_THAT(m, HasSubstr("pbt.perturb_factors[0]: must be a finite"));
  EXPECT_THAT(m, HasSubstr("pbt.resample_probability: must be in [0, 1]"));

  // A pbt block elsewhere would do nothing: refused.
  const absl::Status random = Parse(R"(
base: {env: {id: CartPole-v1}, total_env_steps: 1000}
metric: {series: learner/mean_return}
parameters: {ppo.learning_rate: {values: [0.001]}}
pbt: {fraction: 0.5}
)")
                                  .status();
  EXPECT_THAT(std::string(random.message()),
              HasSubstr("pbt: only a sweep of method pbt takes a pbt block"));
  // A population of one has no one to copy.
  std::string one(kPbt);
  one.replace(one.find("max_trials: 4"), 13, "max_trials: 1");
  EXPECT_THAT(std::string(Parse(one).status().message()),
              HasSubstr("max_trials: pbt needs a population of at least 2"));
}

// A normaliser written with its lowerCamelCase JSON name is the same field:
// refused as well, named by its field name.
TEST(PbtTest, RefusesWhatCannotBeCopiedUnderItsJsonNameToo) {
  for (const char* name :
       {"ppo.normalizeObservations", "ppo.normalizeRewards"}) {
    const absl::Status status =
        Parse(absl::StrCat(kPbt, "  ", name, ": {values: [true, false]}\n"))
            .status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << name;
    const std::string snake = name == std::string("ppo.normalizeRewards")
                                  ? "ppo.normalize_rewards"
                                  : "ppo.normalize_observations";
    EXPECT_THAT(std::string(status.message()),
                HasSubstr(absl::StrCat("parameters.", snake,
                                       ": pbt copies weights, optimiser and "
                                       "normalisers between members")))
        << name;
    EXPECT_THAT(std::string(status.message()),
                HasSubstr(absl::StrCat("(not ", snake, ")")))
        << name;
  }
  // Every other camelCase name is its field's too: trials carry the name.
  ASSERT_OK_AND_ASSIGN(
      const SweepSpec spec,
      Parse(std::string(kPbt).replace(std::string(kPbt).find("ppo.num_epochs"),
                                      14, "ppo.numEpochs")));
  EXPECT_EQ(spec.parameters().count("ppo.num_epochs"), 1u);
  EXPECT_EQ(spec.parameters().count("ppo.numEpochs"), 0u);
}

TEST(PbtTest, ExploreStaysInRangeAndMovesEveryKindOfParameter) {
  std::string text(kPbt);
  text += "pbt: {resample_probability: 0}\n";
  ASSERT_OK_AND_ASSIGN(const SweepSpec spec, Parse(text));
  PbtParameters from;
  from["ppo.learning_rate"] = Number(0.0099);
  from["ppo.num_epochs"] = Number(2);
  from["ppo.clip_coef"] = Number(0.1);
  std::mt19937_64 rng(3);
  std::set<double> epochs;
  for (int i = 0; i < 200; ++i) {
    std::vector<std::string> changes;
    const PbtParameters to = ExplorePbt(spec, from, &rng, &changes);
    ASSERT_EQ(changes.size(), 3u);
    const double lr = to.at("ppo.learning_rate").number_value();
    // 0.0099 x 0.8 or x 1.2 kept below max.
    EXPECT_TRUE(std::abs(lr - 0.0099 * 0.8) < 1e-12 || lr == 1.0e-2) << lr;
    const double e = to.at("ppo.num_epochs").number_value();
    EXPECT_TRUE(e == 1 || e == 3) << e;  // 2 x 0.8 and 2 x 1.2 round to 2
    epochs.insert(e);
    // 0.1 is the first value: its only neighbour is 0.2.
    EXPECT_DOUBLE_EQ(to.at("ppo.clip_coef").number_value(), 0.2);
    EXPECT_THAT(changes[0], HasSubstr("ppo.clip_coef 0.1 -> 0.2"));
  }
  EXPECT_EQ(epochs.size(), 2u);

  // Resampling always: drawn from the whole distribution.
  std::string always(kPbt);
  always += "pbt: {resample_probability: 1}\n";
  ASSERT_OK_AND_ASSIGN(const SweepSpec resampling, Parse(always));
  std::set<double> seen;
  for (int i = 0; i < 50; ++i) {
    const PbtParameters to = ExplorePbt(resampling, from, &rng);
    const double e = to.at("ppo.num_epochs").number_value();
    EXPECT_GE(e, 1);
    EXPECT_LE(e, 10);
    seen.insert(e);
  }
  EXPECT_GT(seen.size(), 4u);
}

TEST(PbtTest, AnIntegerAtItsBoundMovesInwardAndFactorsOfOneAreRefused) {
  std::string text(kPbt);
  text += "pbt: {resample_probability: 0, perturb_factors: [1.2]}\n";
  ASSERT_OK_AND_ASSIGN(const SweepSpec spec, Parse(text));
  PbtParameters from;
  from["ppo.learning_rate"] = Number(0.001);
  from["ppo.num_epochs"] = Number(10);  // the max: x1.2 moves it down
  from["ppo.clip_coef"] = Number(0.3);
  std::mt19937_64 rng(2);
  const PbtParameters to = ExplorePbt(spec, from, &rng);
  EXPECT_DOUBLE_EQ(to.at("ppo.num_epochs").number_value(), 9);
  EXPECT_DOUBLE_EQ(to.at("ppo.clip_coef").number_value(), 0.2);

  std::string one(kPbt);
  one += "pbt: {perturb_factors: [1.0]}\n";
  EXPECT_THAT(std::string(Parse(one).status().message()),
              HasSubstr("pbt.perturb_factors[0]: must be a finite number > 0 "
                        "other than 1"));
  // A round shorter than last_points updates would score the donor.
  std::string short_round(kPbt);
  short_round +=
      "pbt: {interval_steps: 1000}\nmetric: {series: "
      "learner/mean_return, last_points: 5}\n";
  short_round.replace(
      short_round.find("metric: {series: learner/mean_return}\n"), 38, "");
  EXPECT_THAT(std::string(Parse(short_round).status().message()),
              HasSubstr("pbt.interval_steps: must hold at least "
                        "metric.last_points (5) updates"));
}

TEST(PbtTest, TheWorstCopyTheBest) {
  std::string text(kPbt);
  text.replace(text.find("max_trials: 4"), 13, "max_trials: 8");
  text += "pbt: {resample_probability: 0}\n";
  ASSERT_OK_AND_ASSIGN(const SweepSpec spec, Parse(text));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<PbtMember> members;
  const double scores[] = {50, 400, nan, 10, 300, 200, 100, 60};
  for (int i = 0; i < 8; ++i) {
    PbtMember m;
    m.trial = i;
    m.score = scores[i];
    m.parameters["ppo.learning_rate"] = Number(0.001 * (i + 1));
    m.parameters["ppo.num_epochs"] = Number(4);
    m.parameters["ppo.clip_coef"] = Number(0.2);
    members.push_back(m);
  }
  std::mt19937_64 rng(1);
  for (int round = 0; round < 20; ++round) {
    const std::vector<PbtCopy> copies =
        PlanPbtRound(spec, /*maximize=*/true, members, &rng);
    // 8 x 0.25 = 2: the NaN (trial 2) and the worst (trial 3) copy trial
    // 1 or 4.
    ASSERT_EQ(copies.size(), 2u);
    std::set<int> losers;
    for (const PbtCopy& c : copies) {
      losers.insert(c.trial);
      EXPECT_TRUE(c.donor == 1 || c.donor == 4) << c.donor;
      const double donor_lr = 0.001 * (c.donor + 1);
      const double lr = c.parameters.at("ppo.learning_rate").number_value();
      // Perturbed, never resampled: x0.8 or x1.2 (below the max, 1e-2).
      EXPECT_TRUE(std::abs(lr - donor_lr * 0.8) < 1e-12 ||
                  std::abs(lr - donor_lr * 1.2) < 1e-12)
          << lr;
      EXPECT_THAT(c.description,
                  HasSubstr(absl::StrCat("copied trial ", c.donor)));
    }
    EXPECT_EQ(losers, (std::set<int>{2, 3}));
  }
  // Minimising, the order turns over: 400 and 300 copy 10 or 50.
  const std::vector<PbtCopy> min_copies =
      PlanPbtRound(spec, /*maximize=*/false, members, &rng);
  ASSERT_EQ(min_copies.size(), 2u);
  for (const PbtCopy& c : min_copies) {
    EXPECT_TRUE(c.trial == 2 || c.trial == 1) << c.trial;  // NaN, then 400
    EXPECT_TRUE(c.donor == 3 || c.donor == 0) << c.donor;
  }
  // Equal scores copy nothing; one member has no one to copy.
  for (PbtMember& m : members) m.score = 7;
  EXPECT_TRUE(PlanPbtRound(spec, true, members, &rng).empty());
  members.resize(1);
  EXPECT_TRUE(PlanPbtRound(spec, true, members, &rng).empty());
}

}  // namespace
}  // namespace rl
