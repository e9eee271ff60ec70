#include "runspec/sweep_spec.h"

#include <fstream>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace rl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kBase[] = R"(
base:
  env: {id: CartPole-v1}
  total_env_steps: 100000
  seed: 5
metric: {series: learner/mean_return}
)";

absl::StatusOr<SweepSpec> Parse(const std::string& text) {
  return ParseSweepSpec(text, RunFileFormat::kYaml, "");
}

TEST(SweepSpecTest, AGridOfEveryCombinationInPathOrder) {
  ASSERT_OK_AND_ASSIGN(const SweepSpec spec, Parse(std::string(kBase) + R"(
name: lr-grid
method: grid
parameters:
  ppo.learning_rate: {values: [0.001, 0.0003]}
  policy.hidden_sizes: {values: [[32, 32], [64]]}
  ppo.num_epochs: {values: [4]}
seeds_per_config: 2
)"));
  EXPECT_EQ(spec.concurrency(), 2);  // defaults
  EXPECT_EQ(spec.metric().goal(), "max");
  EXPECT_EQ(spec.early_stopping().kind(), "none");
  ASSERT_OK_AND_ASSIGN(const std::vector<SweepTrial> trials, ExpandSweep(spec));
  ASSERT_EQ(trials.size(), 8u);  // 2 x 2 x 1 configurations x 2 seeds
  // The first path varies slowest: policy.hidden_sizes, then ppo.*.
  EXPECT_EQ(DescribeParameters(trials[0].parameters),
            "policy.hidden_sizes=[32,32], ppo.learning_rate=0.001, "
            "ppo.num_epochs=4");
  EXPECT_EQ(trials[0].spec.policy().hidden_sizes_size(), 2);
  EXPECT_FLOAT_EQ(trials[0].spec.ppo().learning_rate(), 0.001f);
  EXPECT_EQ(trials[0].spec.ppo().num_epochs(), 4);
  EXPECT_EQ(trials[0].spec.seed(), 5u);
  EXPECT_EQ(trials[1].spec.seed(), 6u);  // the second seed of config 0
  EXPECT_EQ(trials[1].config, 0);
  EXPECT_EQ(trials[1].spec.name(), "lr-grid-1");
  EXPECT_FLOAT_EQ(trials[2].spec.ppo().learning_rate(), 0.0003f);
  EXPECT_EQ(trials[7].spec.policy().hidden_sizes_size(), 1);
  // Everything the sweep did not vary is the base's, resolved.
  EXPECT_EQ(trials[7].spec.total_env_steps(), 100000);
  EXPECT_EQ(trials[7].spec.env().observation_size(), 4);
}

TEST(SweepSpecTest, RandomDrawsStayInTheirRangesAndRepeatWithTheSeed) {
  const std::string text = std::string(kBase) + R"(
name: lr-random
max_trials: 20
parameters:
  ppo.learning_rate: {distribution: log_uniform, min: 0.0001, max: 0.01}
  ppo.clip_coef: {distribution: uniform, min: 0.1, max: 0.3}
  envs_per_actor: {distribution: int, min: 2, max: 6}
  policy.activation: {values: [tanh, relu]}
seed: 11
)";
  ASSERT_OK_AND_ASSIGN(const SweepSpec spec, Parse(text));
  ASSERT_OK_AND_ASSIGN(const std::vector<SweepTrial> trials, ExpandSweep(spec));
  ASSERT_EQ(trials.size(), 20u);
  std::set<int> envs;
  std::set<std::string> activations;
  for (const SweepTrial& t : trials) {
    EXPECT_GE(t.spec.ppo().learning_rate(), 0.0001f);
    EXPECT_LE(t.spec.ppo().learning_rate(), 0.01f);
    EXPECT_GE(t.spec.ppo().clip_coef(), 0.1f);
    EXPECT_LE(t.spec.ppo().clip_coef(), 0.3f);
    envs.insert(t.spec.envs_per_actor());
    activations.insert(t.spec.policy().activation());
  }
  EXPECT_EQ(*envs.begin(), 2);
  EXPECT_EQ(*envs.rbegin(), 6);
  EXPECT_EQ(activations.size(), 2u);
  ASSERT_OK_AND_ASSIGN(const std::vector<SweepTrial> again,
                       ExpandSweep(*Parse(text)));
  EXPECT_EQ(DescribeParameters(again[13].parameters),
            DescribeParameters(trials[13].parameters));
}

TEST(SweepSpecTest, ABadSweepFileIsRefusedNamingEveryField) {
  EXPECT_THAT(
      Parse(std::string(kBase) + R"(
method: anneal
max_trials: 0
concurrency: 100
parameters:
  ppo.learnin_rate: {values: [0.1]}
  ppo.num_epochs: {distribution: uniform, min: 1, max: 10}
  ppo.clip_coef: {distribution: log_uniform, min: 0, max: 0.3}
  ppo.gamma: {values: [0.9], distribution: uniform, min: 0, max: 1}
  policy.activation: {distribution: uniform, min: 0, max: 1}
  ppo.num_minibatches: {values: [four]}
early_stopping: {kind: asha, first_rung_steps: 200000}
)"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("method: must be grid, random, external or pbt"),
                     HasSubstr("parameters.ppo.learnin_rate: no such "
                               "run-file field"),
                     HasSubstr("parameters.ppo.num_epochs.distribution"
                               ": ppo.num_epochs is an integer; use "
                               "int"),
                     HasSubstr("parameters.ppo.clip_coef.min: must be "
                               "> 0 for log_uniform"),
                     HasSubstr("parameters.ppo.gamma: give either "
                               "values or a distribution"),
                     HasSubstr("policy.activation is not a number"),
                     HasSubstr("parameters.ppo.num_minibatches."
                               "values[0]: ppo.num_minibatches: the "
                               "value \"four\" does not fit"),
                     HasSubstr("early_stopping.first_rung_steps: must "
                               "be in [1, base.total_env_steps = "
                               "100000)"),
                     HasSubstr("concurrency: must be in [1, 64]"))));
  EXPECT_THAT(
      Parse(std::string(kBase) + "parameterz: {}\n"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("parameterz")));
  EXPECT_THAT(Parse("metric: {series: x}\nparameters: {seed: {values: [1]}}\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("base: the sweep needs a base run"),
                             HasSubstr("parameters.seed: set by the sweep"))));
  // A value every field accepts, but a run the base cannot be: named with
  // its configuration.
  ASSERT_OK_AND_ASSIGN(const SweepSpec odd, Parse(std::string(kBase) + R"(
parameters: {ppo.num_minibatches: {values: [7]}}
max_trials: 1
)"));
  EXPECT_THAT(ExpandSweep(odd),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("trial 0 (ppo.num_minibatches=7) is not a "
                                 "valid run")));
}

// Over a base of several policies, a swept field one of them sets itself
// was accepted, and every trial trained that policy with its own value: the
// sweep changed nothing there. It is refused, naming the policy; a field
// no policy sets is swept for all of them.
TEST(SweepSpecTest, AFieldAPolicySetsItselfIsNotSwept) {
  const std::string base = R"(
base:
  env: {id: Walkers-v0, plugin: libwalkers.so, agents_per_env: 2,
        observation_size: 8, num_discrete_actions: 2}
  envs_per_actor: 4
  total_env_steps: 100000
  ppo: {num_minibatches: 1}
  policies:
    - {name: red, agents: [0]}
    - {name: blue, agents: [1], ppo: {learning_rate: 0.0005},
       policy: {hidden_sizes: [32]}}
metric: {series: learner/mean_return}
)";
  EXPECT_THAT(
      Parse(base + "parameters: {ppo.learning_rate: {values: [0.001, 0.002]},\n"
                   "             policy.hidden_sizes: {values: [[64]]}}\n"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("parameters.ppo.learning_rate: policies[1] "
                               "(blue) sets ppo.learning_rate itself"),
                     HasSubstr("parameters.policy.hidden_sizes: policies[1] "
                               "(blue) sets policy.hidden_sizes itself"))));
  EXPECT_OK(Parse(base + "parameters: {ppo.gamma: {values: [0.9, 0.99]}}\n"));
}

// A parameter may be written with its lowerCamelCase JSON names; it is
// kept (and its trials carry it) under its field names, so one field has
// one name; two names of one field are refused naming both.
TEST(SweepSpecTest, ParametersAreKeptUnderTheirFieldNames) {
  ASSERT_OK_AND_ASSIGN(const SweepSpec spec, Parse(std::string(kBase) + R"(
method: grid
parameters:
  ppo.learningRate: {values: [0.001, 0.002]}
  policy.hiddenSizes: {values: [[32], [64, 64]]}
)"));
  EXPECT_EQ(spec.parameters().count("ppo.learning_rate"), 1u);
  EXPECT_EQ(spec.parameters().count("policy.hidden_sizes"), 1u);
  EXPECT_EQ(spec.parameters_size(), 2);
  ASSERT_OK_AND_ASSIGN(const std::vector<SweepTrial> trials, ExpandSweep(spec));
  ASSERT_EQ(trials.size(), 4u);
  EXPECT_EQ(DescribeParameters(trials[3].parameters),
            "policy.hidden_sizes=[64,64], ppo.learning_rate=0.002");
  EXPECT_FLOAT_EQ(trials[3].spec.ppo().learning_rate(), 0.002f);
  EXPECT_THAT(
      Parse(std::string(kBase) + R"(
parameters:
  ppo.learning_rate: {values: [0.001]}
  ppo.learningRate: {values: [0.002]}
  envsPerActor: {values: [4]}
  envs_per_actor: {values: [8]}
)"),
      StatusIs(
          absl::StatusCode::kInvalidArgument,
          AllOf(HasSubstr("parameters.ppo.learningRate and "
                          "parameters.ppo.learning_rate: both name the "
                          "run-file field ppo.learning_rate; give it once"),
                HasSubstr("parameters.envsPerActor and "
                          "parameters.envs_per_actor: both name the "
                          "run-file field envs_per_actor"))));
}

TEST(SweepSpecTest, TheBaseRunFileIsReadBesideTheSweepFile) {
  const std::string dir = MakeTestDir("sweep");
  std::ofstream(dir + "/base.yaml") << "env: {id: Pendulum-v1}\nseed: 3\n";
  std::ofstream(dir + "/sweep.yaml")
      << "base_run_file: base.yaml\nmetric: {series: learner/mean_return}\n"
         "parameters: {ppo.learning_rate: {values: [0.001]}}\n";
  ASSERT_OK_AND_ASSIGN(const SweepSpec spec,
                       LoadSweepSpecFile(dir + "/sweep.yaml"));
  EXPECT_EQ(spec.base().env().id(), "Pendulum-v1");
  EXPECT_EQ(spec.base().seed(), 3u);
  std::ofstream(dir + "/bad.yaml")
      << "base_run_file: missing.yaml\nmetric: {series: x}\n";
  EXPECT_THAT(
      LoadSweepSpecFile(dir + "/bad.yaml"),
      StatusIs(absl::StatusCode::kNotFound, HasSubstr("base_run_file: ")));
}

TEST(SweepSpecTest, AshaKeepsTheTopThirdAndMedianTheBetterHalf) {
  EarlyStopping asha;
  asha.set_kind("asha");
  asha.set_first_rung_steps(1000);
  asha.set_reduction_factor(3);
  asha.set_min_trials_at_rung(3);
  EXPECT_EQ(RungSteps(asha, 0), 1000);
  EXPECT_EQ(RungSteps(asha, 2), 9000);
  const std::vector<double> six = {10, 50, 20, 40, 30, 60};
  // Top ceil(6 / 3) = 2: 60 and 50.
  EXPECT_TRUE(KeepsGoing(asha, true, 60, six));
  EXPECT_TRUE(KeepsGoing(asha, true, 50, six));
  EXPECT_FALSE(KeepsGoing(asha, true, 40, six));
  // Minimising, the two lowest.
  EXPECT_TRUE(KeepsGoing(asha, false, 20, six));
  EXPECT_FALSE(KeepsGoing(asha, false, 30, six));
  // Too few at the rung yet: everyone goes on.
  EXPECT_TRUE(KeepsGoing(asha, true, 10, {10, 50}));
  // No points (NaN) is the worst.
  EXPECT_FALSE(KeepsGoing(asha, true, std::nan(""), six));

  EarlyStopping median = asha;
  median.set_kind("median");
  EXPECT_EQ(RungSteps(median, 2), 3000);
  EXPECT_TRUE(KeepsGoing(median, true, 40, six));  // best-first: 60 50 40
  EXPECT_FALSE(KeepsGoing(median, true, 30, six));
  EarlyStopping none;
  EXPECT_TRUE(KeepsGoing(none, true, -1e9, six));
}

}  // namespace
}  // namespace rl
