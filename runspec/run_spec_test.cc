#include "runspec/run_spec.h"

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace rl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

absl::Status LoadYaml(const std::string& yaml) {
  return LoadRunSpec(yaml, RunFileFormat::kYaml).status();
}

TEST(RunSpecTest, ExampleRunFilesLoad) {
  auto cartpole = LoadRunSpecFile("examples/cartpole.yaml");
  ASSERT_OK(cartpole);
  EXPECT_EQ(cartpole->env().id(), "CartPole-v1");
  EXPECT_EQ(cartpole->envs_per_actor(), 8);
  EXPECT_FLOAT_EQ(cartpole->ppo().learning_rate(), 1e-3f);
  EXPECT_EQ(cartpole->policy().hidden_sizes_size(), 2);
  EXPECT_EQ(cartpole->sync_mode(), SYNC);
  EXPECT_DOUBLE_EQ(cartpole->target_return(), 475);

  // JSON, with lowerCamelCase names.
  auto pendulum = LoadRunSpecFile("examples/pendulum.json");
  ASSERT_OK(pendulum);
  EXPECT_EQ(pendulum->env().id(), "Pendulum-v1");
  EXPECT_EQ(pendulum->segment_length(), 1024);
  EXPECT_TRUE(pendulum->ppo().normalize_observations());
  EXPECT_DOUBLE_EQ(pendulum->target_return(), -250);
  // An explicit zero is kept for the fields whose default is not zero.
  EXPECT_TRUE(pendulum->ppo().has_entropy_coef());
  EXPECT_EQ(pendulum->ppo().entropy_coef(), 0.0f);
}

// examples/pendulum.json is pendulum.yaml written as JSON: the two load to
// the same RunSpec (a run file is changed in both or the test fails).
TEST(RunSpecTest, PendulumJsonIsTheYamlAsJson) {
  auto yaml = LoadRunSpecFile("examples/pendulum.yaml");
  auto json = LoadRunSpecFile("examples/pendulum.json");
  ASSERT_OK(yaml);
  ASSERT_OK(json);
  std::string differences;
  google::protobuf::util::MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&differences);
  EXPECT_TRUE(differencer.Compare(*yaml, *json)) << differences;
}

TEST(RunSpecTest, DefaultsFillWhatIsLeftOut) {
  auto spec = LoadRunSpec("env: {id: CartPole-v1}", RunFileFormat::kYaml);
  ASSERT_OK(spec);
  EXPECT_EQ(spec->envs_per_actor(), 8);
  EXPECT_EQ(spec->segment_length(), 128);
  EXPECT_FLOAT_EQ(spec->ppo().gamma(), 0.99f);
  EXPECT_FLOAT_EQ(spec->ppo().entropy_coef(), 0.01f);
  EXPECT_TRUE(spec->ppo().normalize_advantages());
  EXPECT_EQ(spec->resources().num_learners(), 1);
  EXPECT_EQ(spec->resources().min_actors(), 1);
  EXPECT_EQ(spec->resources().learner_device(), "cpu");
  EXPECT_EQ(spec->sync_mode(), SYNC);
}

TEST(RunSpecTest, DivisibilityErrorNamesTheField) {
  const absl::Status status = LoadYaml(R"(
env: {id: CartPole-v1}
envs_per_actor: 8
segment_length: 64
ppo: {num_minibatches: 3}
)");
  EXPECT_THAT(
      status,
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("ppo.num_minibatches: must divide "
                         "envs_per_actor*segment_length = 512 (got 3)")));
}

TEST(RunSpecTest, AgentsLeaveNeedsSeveralAgents) {
  EXPECT_THAT(LoadYaml(R"(
env: {id: CartPole-v1, agents_leave: true}
)"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("env.agents_leave: needs several agents per "
                                 "environment (env.agents_per_env >= 2)")));
  // A row whose agent left is paid 0: the declared range must hold it.
  EXPECT_THAT(LoadYaml(R"(
env: {id: Walkers-v0, plugin: libwalkers.so, agents_per_env: 3,
      agents_leave: true, observation_size: 8, num_discrete_actions: 2,
      reward_low: 0.5, reward_high: 1}
envs_per_actor: 3
ppo: {num_minibatches: 1}
)"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("env.agents_leave: needs a reward range that "
                                 "holds 0 (env.reward_low 0.5")));
  // A gang weighs its ranks' gradients by their alive rows.
  EXPECT_OK(LoadYaml(R"(
env: {id: Walkers-v0, plugin: libwalkers.so, agents_per_env: 3,
      agents_leave: true, observation_size: 8, num_discrete_actions: 2}
envs_per_actor: 3
resources: {num_learners: 2}
ppo: {num_minibatches: 1}
)"));
}

// A policy's field given at its default (false, 0) was parsed, then lost
// when the policy was put over the run (only fields other than their
// default are), so the policy trained with the run's value. Refused where
// the run's differs, naming each; a field that keeps its presence is seen
// at any value.
TEST(RunSpecTest, APolicyCannotGiveAFieldItsDefault) {
  const std::string run = R"(
env: {id: Walkers-v0, plugin: libwalkers.so, agents_per_env: 2,
      observation_size: 8, num_discrete_actions: 2}
envs_per_actor: 4
ppo: {num_minibatches: 1, normalize_observations: true, target_kl: 0.02}
policy: {shared_trunk: true}
)";
  EXPECT_THAT(
      LoadYaml(run + R"(policies:
  - {name: red, agents: [0]}
  - name: blue
    agents: [1]
    ppo: {normalizeObservations: false, target_kl: 0, gae_lambda: 0.9}
    policy: {shared_trunk: false, hidden_sizes: [32]}
)"),
      StatusIs(
          absl::StatusCode::kInvalidArgument,
          AllOf(HasSubstr("policies[1].ppo.normalize_observations: the "
                          "field's default"),
                HasSubstr("policies[1].ppo.target_kl: the field's "
                          "default"),
                HasSubstr("policies[1].policy.shared_trunk: the field's "
                          "default"),
                Not(HasSubstr("gae_lambda")), Not(HasSubstr("hidden_sizes")))));
  // The run's at its default too (normalize_rewards is false): the
  // policy's value is what it gets.
  EXPECT_OK(LoadYaml(run + R"(policies:
  - {name: red, agents: [0]}
  - name: blue
    agents: [1]
    ppo: {anneal_learning_rate: false, normalize_rewards: false}
)"));
}

TEST(RunSpecTest, RangeErrorsAreAllListedWithPaths) {
  const absl::Status status = LoadYaml(R"(
env: {id: CartPole-v1}
ppo: {gamma: 1.5, learning_rate: -1}
policy: {hidden_sizes: [64, 0]}
resources: {num_actors: 2, min_actors: 5, learner_device: tpu}
)");
  EXPECT_THAT(
      status,
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("ppo.gamma: must be in (0, 1] (got 1.5)"),
                     HasSubstr("ppo.learning_rate: must be in (0, 1) (got -1)"),
                     HasSubstr("policy.hidden_sizes[1]: must be in [1, 65536] "
                               "(got 0)"),
                     HasSubstr("resources.min_actors"),
                     HasSubstr("resources.learner_device"))));
}

// A count written out as 0 (or less) is an error, not the default that
// leaving it out gives; in JSON's camelCase names too.
TEST(RunSpecTest, ExplicitZeroCountsAreErrorsNotDefaults) {
  EXPECT_THAT(
      LoadYaml(R"(
env: {id: CartPole-v1}
total_env_steps: 0
segment_length: -5
ppo: {num_epochs: 0}
resources: {num_actors: 0}
)"),
      StatusIs(
          absl::StatusCode::kInvalidArgument,
          AllOf(HasSubstr("total_env_steps: must be >= 1 (leave it out for "
                          "the default) (got 0)"),
                HasSubstr("segment_length: must be >= 1"),
                HasSubstr("ppo.num_epochs: must be >= 1"),
                HasSubstr("resources.num_actors: must be >= 1"))));
  EXPECT_THAT(
      LoadRunSpec(R"({"env": {"id": "CartPole-v1"}, "envsPerActor": "0"})",
                  RunFileFormat::kJson),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("envs_per_actor: must be >= 1")));
  // Left out, they take their defaults.
  ASSERT_OK_AND_ASSIGN(
      const RunSpec spec,
      LoadRunSpec("env: {id: CartPole-v1}\n", RunFileFormat::kYaml));
  EXPECT_EQ(spec.total_env_steps(), 1000000);
}

TEST(RunSpecTest, NanIsOutOfRange) {
  EXPECT_THAT(
      LoadYaml("env: {id: CartPole-v1}\nppo: {gamma: .nan}"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("ppo.gamma")));
}

TEST(RunSpecTest, UnknownEnvironment) {
  const absl::Status status = LoadYaml("env: {id: Breakout-v5}");
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                               AllOf(HasSubstr("env.id: unknown environment"),
                                     HasSubstr("\"Breakout-v5\""))));
  EXPECT_THAT(LoadYaml("seed: 3"), StatusIs(absl::StatusCode::kInvalidArgument,
                                            HasSubstr("env.id: required")));
}

TEST(RunSpecTest, UnknownFieldIsNamed) {
  const absl::Status status =
      LoadYaml("env: {id: CartPole-v1}\nppo: {learning_rat: 0.1}");
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("learning_rat")));
}

TEST(RunSpecTest, WrongTypeIsNamed) {
  const absl::Status status =
      LoadYaml("env: {id: CartPole-v1}\nenvs_per_actor: many");
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("envs_per_actor")));

  const absl::Status enum_status =
      LoadYaml("env: {id: CartPole-v1}\nsync_mode: SOMETIMES");
  EXPECT_THAT(enum_status, StatusIs(absl::StatusCode::kInvalidArgument,
                                    HasSubstr("sync_mode")));
}

TEST(RunSpecTest, SyntaxErrorsAndMissingFiles) {
  const absl::Status yaml = LoadYaml("env: {id: CartPole-v1\nseed: [");
  EXPECT_THAT(yaml, StatusIs(absl::StatusCode::kInvalidArgument,
                             HasSubstr("not valid YAML: line")));

  EXPECT_THAT(LoadYaml("- a list"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(LoadRunSpec("{\"env\": ", RunFileFormat::kJson),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(LoadRunSpecFile("/nonexistent/run.yaml"),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST(RunSpecTest, SyncModeRejectsPolicyLag) {
  EXPECT_THAT(
      LoadYaml("env: {id: CartPole-v1}\nsync_mode: SYNC\nmax_policy_lag: 2"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("max_policy_lag: must be 0 in SYNC mode")));
  EXPECT_OK(
      LoadYaml("env: {id: CartPole-v1}\nsync_mode: ASYNC\nmax_policy_lag: 2"));
}

TEST(RunSpecTest, QuotedNumbersStayStrings) {
  // A quoted YAML scalar is a string; the proto JSON mapping still accepts
  // numeric strings for numeric fields.
  auto spec = LoadRunSpec("env: {id: \"CartPole-v1\"}\nseed: \"42\"",
                          RunFileFormat::kYaml);
  ASSERT_OK(spec);
  EXPECT_EQ(spec->seed(), 42u);
}

// Resolved once, here: learners and actors receive the derived fields.
TEST(RunSpecTest, LoadResolvesTheEnvironmentFromTheRegistry) {
  auto spec = LoadRunSpec("env: {id: Acrobot-v1, observation_size: 99}\n",
                          RunFileFormat::kYaml);
  ASSERT_OK(spec);
  EXPECT_EQ(spec->env().observation_size(), 6);  // the file's 99 is ignored
  EXPECT_EQ(spec->env().num_discrete_actions(), 3);
  EXPECT_EQ(spec->env().continuous_action_size(), 0);
  EXPECT_EQ(spec->env().max_episode_steps(), 500);

  RunSpec submitted;
  submitted.mutable_env()->set_id("Pendulum-v1");
  submitted.mutable_env()->set_max_episode_steps(50);
  ASSERT_OK(ResolveRunSpec(&submitted));
  EXPECT_EQ(submitted.env().continuous_action_size(), 1);
  EXPECT_EQ(submitted.env().max_episode_steps(), 50);
  EXPECT_EQ(submitted.envs_per_actor(), 8);  // defaults applied too
}

TEST(RunSpecTest, ResolveReportsValidationProblemsFirst) {
  RunSpec spec;
  spec.mutable_env()->set_id("Breakout-v5");
  const absl::Status status = ResolveRunSpec(&spec);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("env.id: unknown environment")));
}

// --- Hostile run files: every one a quick INVALID_ARGUMENT naming the problem.

// `depth` nested flow sequences as the value of env.
std::string NestedYaml(int depth) {
  return absl::StrCat("env: ", std::string(depth, '['), std::string(depth, ']'),
                      "\n");
}

TEST(RunSpecLimitsTest, DeepNestingIsNamed) {
  // The root mapping is level 1, so env's 63 sequences reach level 64.
  EXPECT_THAT(
      LoadYaml(NestedYaml(63)),
      StatusIs(absl::StatusCode::kInvalidArgument, Not(HasSubstr("nesting"))));
  EXPECT_THAT(LoadYaml(NestedYaml(64)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("nesting deeper than 64 levels")));
  // Deeper than yaml-cpp's own recursion guard (2000) too.
  EXPECT_THAT(LoadYaml(NestedYaml(100000)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("nesting deeper than 64 levels")));
  // Block style.
  std::string block;
  for (int i = 0; i < 70; ++i) {
    absl::StrAppend(&block, std::string(2 * i, ' '), "k", i, ":\n");
  }
  EXPECT_THAT(LoadYaml(block),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("nesting deeper than 64 levels")));
  // JSON, where brackets inside strings do not count.
  const std::string json =
      absl::StrCat(R"({"name": "[[[[", "env": )", std::string(100000, '['),
                   std::string(100000, ']'), "}");
  EXPECT_THAT(LoadRunSpec(json, RunFileFormat::kJson),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("nesting deeper than 64 levels at line 1, "
                                 "column 88")));
}

TEST(RunSpecLimitsTest, RecursiveAliasIsRefused) {
  EXPECT_THAT(LoadYaml("env: &a [*a]\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("nesting deeper than 64 levels")));
}

// The "billion laughs": 342 bytes that expand to 9^9 strings.
TEST(RunSpecLimitsTest, AliasExpansionIsBounded) {
  std::string yaml = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  char prev = 'a';
  for (char c = 'b'; c <= 'i'; ++c) {
    absl::StrAppend(&yaml, std::string(1, c), ": &", std::string(1, c), " [");
    for (int i = 0; i < 9; ++i) {
      absl::StrAppend(&yaml, i ? ", " : "", "*", std::string(1, prev));
    }
    absl::StrAppend(&yaml, "]\n");
    prev = c;
  }
  EXPECT_THAT(LoadYaml(yaml),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("expands to more than 100000 values")));

  // Few values but a long one repeated: bounded by the expanded size.
  const std::string big = absl::StrCat(
      "name: &n ", std::string(500000, 'x'), "\nenv: [", "*n, *n, *n, *n, *n,",
      " *n, *n, *n, *n, *n, *n, *n, *n, *n, *n, *n, *n, *n, *n, *n]\n");
  EXPECT_THAT(LoadYaml(big),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("expands to more than 8388608 bytes")));
}

TEST(RunSpecLimitsTest, BinaryAndNonUtf8TextIsNamed) {
  EXPECT_THAT(
      LoadYaml(std::string("env: {id: Cart\0Pole-v1}\n", 23)),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("not a text file: byte 0x00 at line 1, column 15")));
  EXPECT_THAT(
      LoadYaml("env: {id: CartPole-v1}\nname: caf\xe9\n"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("not UTF-8 text: byte 0xe9 at line 2, column 10")));
  EXPECT_THAT(LoadRunSpec("{\"name\": \"\xff\"}", RunFileFormat::kJson),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("not UTF-8 text: byte 0xff")));
  // UTF-8 is fine.
  EXPECT_OK(
      LoadYaml("env: {id: CartPole-v1}\nname: caf\xc3\xa9 \xe2\x9c\x93\n"));
}

TEST(RunSpecLimitsTest, SizeIsLimited) {
  const std::string yaml = absl::StrCat("env: {id: CartPole-v1}\n# ",
                                        std::string(1 << 20, 'x'), "\n");
  EXPECT_THAT(LoadYaml(yaml), StatusIs(absl::StatusCode::kInvalidArgument,
                                       HasSubstr("larger than 1048576 bytes")));
  // The file reader stops at the limit: an endless file ends quickly.
  EXPECT_THAT(LoadRunSpecFile("/dev/zero"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("/dev/zero: run file is larger than")));
}

TEST(RunSpecLimitsTest, FileErrorsNameTheFile) {
  const std::string dir = MakeTestDir();
  const std::string path = dir + "/binary.yaml";
  std::ofstream(path, std::ios::binary) << std::string(
      "\x7f"
      "ELF\x02\x01",
      6);
  EXPECT_THAT(LoadRunSpecFile(dir),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("cannot read run file " + dir)));
  EXPECT_THAT(LoadRunSpecFile(path),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(absl::StrCat(path,
                                              ": run file is not a text "
                                              "file: byte 0x7f"))));
}

TEST(RunSpecLimitsTest, NameIsLimited) {
  EXPECT_OK(LoadYaml(
      absl::StrCat("env: {id: CartPole-v1}\nname: ", std::string(128, 'n'))));
  // 128 characters of two bytes each are fine too.
  std::string accents;
  for (int i = 0; i < 128; ++i) accents += "\xc3\xa9";
  EXPECT_OK(LoadYaml(absl::StrCat("env: {id: CartPole-v1}\nname: ", accents)));
  EXPECT_THAT(LoadYaml(absl::StrCat("env: {id: CartPole-v1}\nname: ",
                                    std::string(129, 'n'))),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("name: at most 128 characters (got 129)")));
  EXPECT_THAT(LoadYaml("env: {id: CartPole-v1}\nname: \"two\\nlines\""),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("name: no control characters")));
  // Submitted specs (the coordinator) go through the same validation.
  RunSpec spec;
  spec.mutable_env()->set_id("CartPole-v1");
  spec.set_name(std::string(1 << 20, 'n'));
  EXPECT_THAT(
      ResolveRunSpec(&spec),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("name: at most 128 characters (got 1048576)")));
}

TEST(ActorPlacementTest, EachActorStreamsToOneRankAndTheCountsAgree) {
  for (int learners : {1, 2, 3}) {
    for (int actors : {1, 2, 5, 8}) {
      std::vector<int> counted(learners, 0);
      for (int a = 0; a < actors; ++a) {
        const int rank = LearnerRankOfActor(a, learners);
        ASSERT_GE(rank, 0);
        ASSERT_LT(rank, learners);
        ++counted[rank];
      }
      for (int r = 0; r < learners; ++r) {
        EXPECT_EQ(ActorsOfLearnerRank(r, learners, actors), counted[r])
            << r << " of " << learners << ", " << actors << " actors";
      }
    }
  }
}

// The network has its own block; a run file that still names it under ppo
// is told where it moved.
TEST(RunSpecTest, TheNetworkIsThePolicyBlock) {
  ASSERT_OK_AND_ASSIGN(
      const RunSpec spec,
      LoadRunSpec("env: {id: CartPole-v1}\n"
                  "policy: {hidden_sizes: [32], activation: relu, "
                  "shared_trunk: true}\n",
                  RunFileFormat::kYaml));
  EXPECT_EQ(spec.policy().hidden_sizes_size(), 1);
  EXPECT_EQ(spec.policy().activation(), "relu");
  EXPECT_TRUE(spec.policy().shared_trunk());
  ASSERT_OK_AND_ASSIGN(
      const RunSpec defaults,
      LoadRunSpec("env: {id: CartPole-v1}\n", RunFileFormat::kYaml));
  EXPECT_EQ(defaults.policy().hidden_sizes_size(), 2);
  EXPECT_EQ(defaults.policy().activation(), "tanh");

  EXPECT_THAT(LoadRunSpec("env: {id: CartPole-v1}\nppo: {hidden_sizes: [32], "
                          "initialLogStd: 1}\n",
                          RunFileFormat::kYaml),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("ppo.hidden_sizes: moved to "
                                       "policy.hidden_sizes"),
                             HasSubstr("ppo.initial_log_std: moved to "
                                       "policy.initial_log_std"))));
  // A program's spec too.
  RunSpec legacy = defaults;
  legacy.mutable_ppo()->add_hidden_sizes(8);
  EXPECT_THAT(ResolveRunSpec(&legacy),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("ppo.hidden_sizes: moved to")));
  EXPECT_THAT(LoadRunSpec("env: {id: CartPole-v1}\n"
                          "policy: {activation: gelu}\n",
                          RunFileFormat::kYaml),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("policy.activation: must be tanh or relu")));
  EXPECT_THAT(
      LoadRunSpec("env: {id: CartPole-v1}\nexecution: {cpu_kernels: fused}\n"
                  "policy: {activation: relu}\n",
                  RunFileFormat::kYaml),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("fused runs tanh networks only")));
}

// How a run executes left ppo: for execution:; the old names are refused,
// naming where they went, in a run file and in a program's spec.
TEST(RunSpecTest, ExecutionSettingsMovedOutOfPpo) {
  EXPECT_THAT(
      LoadRunSpec("env: {id: CartPole-v1}\n"
                  "ppo: {cpu_kernels: fused, precision: float32, "
                  "cuda_graphs: off}\n",
                  RunFileFormat::kYaml),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("ppo.cpu_kernels: moved to "
                               "execution.cpu_kernels"),
                     HasSubstr("ppo.precision: moved to execution.precision"),
                     HasSubstr("ppo.cuda_graphs: moved to "
                               "execution.cuda_graphs"))));
  ASSERT_OK_AND_ASSIGN(
      const RunSpec spec,
      LoadRunSpec("env: {id: CartPole-v1}\n"
                  "execution: {cpu_kernels: libtorch, precision: float32}\n",
                  RunFileFormat::kYaml));
  EXPECT_EQ(spec.execution().cpu_kernels(), "libtorch");
  EXPECT_EQ(spec.execution().precision(), "float32");
  EXPECT_EQ(spec.execution().cuda_graphs(), "auto");
  RunSpec legacy = spec;
  legacy.mutable_ppo()->set_precision("bfloat16");
  EXPECT_THAT(ResolveRunSpec(&legacy),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("ppo.precision: moved to "
                                 "execution.precision")));
}

// execution.cuda_graphs: auto by default; on (plain YAML `on` too) where one
// CUDA learner can capture its step, refused elsewhere naming why.
TEST(RunSpecTest, CudaGraphsAreAutoOnOrOff) {
  ASSERT_OK_AND_ASSIGN(
      const RunSpec plain,
      LoadRunSpec("env: {id: CartPole-v1}\n", RunFileFormat::kYaml));
  EXPECT_EQ(plain.execution().cuda_graphs(), "auto");
  const std::string cuda =
      "env: {id: CartPole-v1}\nresources: {learner_device: cuda}\n";
  for (const std::string on : {"on", "\"on\""}) {
    ASSERT_OK_AND_ASSIGN(
        const RunSpec graphed,
        LoadRunSpec(cuda + "execution: {cuda_graphs: " + on + "}\n",
                    RunFileFormat::kYaml));
    EXPECT_EQ(graphed.execution().cuda_graphs(), "on") << on;
  }
  ASSERT_OK_AND_ASSIGN(
      const RunSpec off,
      LoadRunSpec("env: {id: CartPole-v1}\nexecution: {cuda_graphs: off}\n",
                  RunFileFormat::kYaml));
  EXPECT_EQ(off.execution().cuda_graphs(), "off");
  EXPECT_THAT(
      LoadRunSpec("env: {id: CartPole-v1}\nexecution: {cuda_graphs: on}\n",
                  RunFileFormat::kYaml),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("execution.cuda_graphs: on captures one CUDA "
                         "learner's minibatch step, but the "
                         "learner_device is not cuda")));
  EXPECT_THAT(
      LoadRunSpec(cuda + "execution: {cuda_graphs: on}\npolicy: {core: lstm}\n",
                  RunFileFormat::kYaml),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("a recurrent update runs its sequences")));
  EXPECT_THAT(
      LoadRunSpec("env: {id: CartPole-v1}\nexecution: {cuda_graphs: always}\n",
                  RunFileFormat::kYaml),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("execution.cuda_graphs: must be auto, on or off")));
}

// execution.collective_backend: auto by default; gloo anywhere (several CUDA
// ranks on one device); nccl only for CUDA learners.
TEST(RunSpecTest, CollectiveBackendIsAutoGlooOrNccl) {
  ASSERT_OK_AND_ASSIGN(
      const RunSpec plain,
      LoadRunSpec("env: {id: CartPole-v1}\n", RunFileFormat::kYaml));
  EXPECT_EQ(plain.execution().collective_backend(), "auto");
  const std::string cuda_gang =
      "env: {id: CartPole-v1}\n"
      "resources: {learner_device: cuda, num_learners: 2}\n";
  for (const std::string backend : {"gloo", "nccl"}) {
    ASSERT_OK_AND_ASSIGN(
        const RunSpec spec,
        LoadRunSpec(
            cuda_gang + "execution: {collective_backend: " + backend + "}\n",
            RunFileFormat::kYaml));
    EXPECT_EQ(spec.execution().collective_backend(), backend);
    EXPECT_EQ(GangCollectiveBackend(spec), backend);
  }
  // auto: NCCL for CUDA learners, gloo for CPU ones.
  EXPECT_EQ(GangCollectiveBackend(plain), "gloo");
  ASSERT_OK_AND_ASSIGN(const RunSpec cuda,
                       LoadRunSpec(cuda_gang, RunFileFormat::kYaml));
  EXPECT_EQ(GangCollectiveBackend(cuda), "nccl");
  EXPECT_THAT(
      LoadRunSpec("env: {id: CartPole-v1}\n"
                  "execution: {collective_backend: nccl}\n",
                  RunFileFormat::kYaml),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("execution.collective_backend: nccl all-reduces on "
                         "CUDA devices, but the learner_device is not cuda")));
  EXPECT_THAT(
      LoadRunSpec("env: {id: CartPole-v1}\n"
                  "execution: {collective_backend: mpi}\n",
                  RunFileFormat::kYaml),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("execution.collective_backend: must be auto, gloo "
                         "or nccl (got \"mpi\")")));
}

TEST(RunSpecTest, PrecisionIsAutoFloat32OrBfloat16) {
  ASSERT_OK_AND_ASSIGN(
      const RunSpec plain,
      LoadRunSpec("env: {id: CartPole-v1}\n", RunFileFormat::kYaml));
  EXPECT_EQ(plain.execution().precision(), "auto");
  ASSERT_OK_AND_ASSIGN(
      const RunSpec bf16,
      LoadRunSpec("env: {id: CartPole-v1}\nexecution: {precision: bfloat16}\n",
                  RunFileFormat::kYaml));
  EXPECT_EQ(bf16.execution().precision(), "bfloat16");
  EXPECT_THAT(
      LoadRunSpec("env: {id: CartPole-v1}\nexecution: {precision: fp16}\n",
                  RunFileFormat::kYaml),
      StatusIs(
          absl::StatusCode::kInvalidArgument,
          HasSubstr("execution.precision: must be auto, float32 or bfloat16 "
                    "(got \"fp16\")")));
  EXPECT_THAT(
      LoadRunSpec("env: {id: CartPole-v1}\n"
                  "execution: {precision: bfloat16, cpu_kernels: fused}\n",
                  RunFileFormat::kYaml),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("fused computes in float32; this run's "
                         "execution.precision is bfloat16")));
}

// A plugin env observing uint8 images of `shape` ("[84, 84, 4]").
std::string ImageRun(const std::string& shape, const std::string& policy = "") {
  return "env: {id: Pixels-v0, plugin: libpixel_plugin.so, "
         "observation_shape: " +
         shape + ", observation_dtype: uint8, num_discrete_actions: 4}\n" +
         (policy.empty() ? "" : "policy: " + policy + "\n");
}

// The encoder follows the space: images get a CNN (Nature where it fits,
// IMPALA below 36x36) reading their layout, with no hidden layers after
// it; vectors and float32 observations the MLP.
TEST(RunSpecTest, TheEncoderFollowsTheObservationSpace) {
  ASSERT_OK_AND_ASSIGN(const RunSpec atari, LoadRunSpec(ImageRun("[84, 84, 4]"),
                                                        RunFileFormat::kYaml));
  EXPECT_EQ(atari.policy().encoder(), "nature_cnn");
  EXPECT_EQ(atari.policy().image_layout(), "hwc");
  EXPECT_EQ(atari.policy().hidden_sizes_size(), 0);
  ASSERT_OK_AND_ASSIGN(const RunSpec stack, LoadRunSpec(ImageRun("[4, 84, 84]"),
                                                        RunFileFormat::kYaml));
  EXPECT_EQ(stack.policy().encoder(), "nature_cnn");
  EXPECT_EQ(stack.policy().image_layout(), "chw");
  ASSERT_OK_AND_ASSIGN(const RunSpec small, LoadRunSpec(ImageRun("[12, 12, 3]"),
                                                        RunFileFormat::kYaml));
  EXPECT_EQ(small.policy().encoder(), "impala_cnn");
  ASSERT_OK_AND_ASSIGN(const RunSpec ram,
                       LoadRunSpec(ImageRun("[128]"), RunFileFormat::kYaml));
  EXPECT_EQ(ram.policy().encoder(), "mlp");
  EXPECT_EQ(ram.policy().hidden_sizes_size(), 2);
  ASSERT_OK_AND_ASSIGN(const RunSpec chosen,
                       LoadRunSpec(ImageRun("[84, 84, 4]", "{encoder: mlp}"),
                                   RunFileFormat::kYaml));
  EXPECT_EQ(chosen.policy().encoder(), "mlp");
  EXPECT_TRUE(chosen.policy().image_layout().empty());
  ASSERT_OK_AND_ASSIGN(
      const RunSpec after,
      LoadRunSpec(ImageRun("[84, 84, 4]", "{hidden_sizes: [256]}"),
                  RunFileFormat::kYaml));
  EXPECT_EQ(after.policy().hidden_sizes_size(), 1);
  ASSERT_OK_AND_ASSIGN(
      const RunSpec cartpole,
      LoadRunSpec("env: {id: CartPole-v1}\n", RunFileFormat::kYaml));
  EXPECT_EQ(cartpole.policy().encoder(), "mlp");
  // A layout given says which sides are height and width: 84x84x12 HWC is
  // 84x84 (Nature), not 84x12.
  ASSERT_OK_AND_ASSIGN(
      const RunSpec twelve,
      LoadRunSpec(ImageRun("[84, 84, 12]", "{image_layout: hwc}"),
                  RunFileFormat::kYaml));
  EXPECT_EQ(twelve.policy().encoder(), "nature_cnn");
}

TEST(RunSpecTest, EncoderErrorsNameTheField) {
  EXPECT_THAT(LoadYaml(ImageRun("[84, 84, 4]", "{encoder: resnet}")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("policy.encoder: must be mlp, nature_cnn or "
                                 "impala_cnn (got \"resnet\")")));
  EXPECT_THAT(LoadYaml(ImageRun("[128]", "{encoder: impala_cnn}")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("impala_cnn reads images: "
                                 "env.observation_shape must have 3 "
                                 "dimensions")));
  EXPECT_THAT(LoadYaml(ImageRun("[12, 12, 3]", "{encoder: nature_cnn}")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("nature_cnn needs images of at least 36x36; "
                                 "this one is 12x12")));
  EXPECT_THAT(LoadYaml(ImageRun("[84, 84, 4]", "{image_layout: nhwc}")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("policy.image_layout: must be hwc or chw")));
  EXPECT_THAT(LoadYaml("env: {id: CartPole-v1}\npolicy: {image_layout: hwc}\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("policy.image_layout: is for a CNN encoder")));
  EXPECT_THAT(
      LoadYaml("env: {id: P-v0, plugin: p.so, observation_shape: [84, 84, 4], "
               "num_discrete_actions: 4}\npolicy: {encoder: nature_cnn}\n"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("nature_cnn reads uint8 images (scaled to [0, 1] "
                         "inside); this run's env.observation_dtype is "
                         "float32")));
  // A misspelt encoder is the one error (no image_layout filled for it).
  const absl::Status typo = LoadYaml(ImageRun("[84, 84, 4]", "{encoder: cnn}"));
  EXPECT_THAT(typo, StatusIs(absl::StatusCode::kInvalidArgument,
                             Not(HasSubstr("image_layout"))));
  EXPECT_THAT(
      LoadYaml(ImageRun("[84, 84, 4]") + "execution: {cpu_kernels: fused}\n"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("fused runs MLPs only")));
}

}  // namespace
}  // namespace rl
