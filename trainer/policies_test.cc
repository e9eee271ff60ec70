// Several policies in one run (RunSpec.policies): the run file's rules,
// each policy trained on its own agents' rows with its own network and
// settings, its own series, and checkpoints that bring every one back.
#include <sys/resource.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "learner/checkpoint.h"
#include "runspec/named_policies.h"
#include "runspec/run_spec.h"
#include "testing/file_size_limit.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"
#include "trainer/local_run.h"
#include "trainer/local_trainer.h"

namespace rl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::string TwoPoliciesText(
    const std::string& policies,
    const std::string& ppo =
        "{num_minibatches: 2, num_epochs: 1, learning_rate: 0.001}",
    const std::string& policy = "{hidden_sizes: [16]}") {
  return R"(
env:
  id: LightCycles-v0
  plugin: light_cycles
  kwargs: {size: 6, opponent: self}
  agents_per_env: 2
  observation_size: 242
  num_discrete_actions: 3
envs_per_actor: 8
segment_length: 16
total_env_steps: 100000
seed: 3
policy: )" +
         policy + "\nppo: " + ppo + "\npolicies: " + policies + "\n";
}

absl::StatusOr<RunSpec> TwoPolicies(
    const std::string& policies,
    const std::string& ppo =
        "{num_minibatches: 2, num_epochs: 1, learning_rate: 0.001}",
    const std::string& policy = "{hidden_sizes: [16]}") {
  return LoadRunSpec(TwoPoliciesText(policies, ppo, policy),
                     RunFileFormat::kYaml);
}

constexpr char kRedBlue[] = R"(
  - {name: red, agents: [0]}
  - name: blue
    agents: [1]
    policy: {hidden_sizes: [8, 8]}
    ppo: {learning_rate: 0.003}
)";

TEST(PoliciesRulesTest, EachPolicyIsItsRunsSettingsWithItsOwnOnTop) {
  ASSERT_OK_AND_ASSIGN(const RunSpec spec, TwoPolicies(kRedBlue));
  const RunSpec red = NamedPolicyRun(spec, 0);
  const RunSpec blue = NamedPolicyRun(spec, 1);
  EXPECT_THAT(red.policy().hidden_sizes(), ::testing::ElementsAre(16));
  EXPECT_THAT(blue.policy().hidden_sizes(), ::testing::ElementsAre(8, 8));
  EXPECT_FLOAT_EQ(red.ppo().learning_rate(), 0.001f);
  EXPECT_FLOAT_EQ(blue.ppo().learning_rate(), 0.003f);
  EXPECT_EQ(blue.ppo().num_minibatches(), 2);
  EXPECT_EQ(blue.policies_size(), 0);
  EXPECT_THAT(PolicyOfAgent(spec), ::testing::ElementsAre(0, 1));
}

TEST(PoliciesRulesTest, ARunFileNamesWhatIsWrong) {
  EXPECT_THAT(TwoPolicies(R"(
  - {name: Red, agents: [0, 2]}
  - {name: blue, agents: [0], ppo: {learning_rate: 5}}
)")
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("policies[0].name: 1-32 characters"),
                             HasSubstr("policies[0].agents: agent indices are "
                                       "0 to 1 (env.agents_per_env 2) (got 2)"),
                             HasSubstr("policies[1].agents: agent 0 is already "
                                       "played by policies[0]"),
                             HasSubstr("policies[1].ppo.learning_rate: "
                                       "must be in (0, 1) (got 5)"),
                             HasSubstr("not played: agents 1"))));
  // The rewards are scaled once, for every row, with the run's gamma.
  EXPECT_THAT(
      TwoPolicies("[{name: a, agents: [0], ppo: {normalize_rewards: true}},"
                  " {name: b, agents: [1]}]")
          .status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("policies[0].ppo.normalize_rewards: the rewards are "
                         "scaled once for every row")));
  EXPECT_THAT(TwoPolicies("[{name: a, agents: [0]},"
                          " {name: b, agents: [1], ppo: {gamma: 0.9}}]",
                          "{normalize_rewards: true, num_minibatches: 2}")
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("policies[1].ppo.gamma: must be the run's "
                                 "ppo.gamma")));
  // A recurrent core: the run's, carried by every policy; each policy's
  // minibatches are whole sequences of its own rows (4 of the 8 here).
  ASSERT_OK(TwoPolicies("[{name: a, agents: [0]}, {name: b, agents: [1], "
                        "policy: {hidden_sizes: [8]}}]",
                        "{num_minibatches: 2}",
                        "{hidden_sizes: [16], core: lstm, core_size: 8}")
                .status());
  EXPECT_THAT(
      TwoPolicies("[{name: a, agents: [0], policy: {core: gru}},"
                  " {name: b, agents: [1], policy: {core_size: 4}}]",
                  "{num_minibatches: 2}",
                  "{hidden_sizes: [16], core: lstm, core_size: 8}")
          .status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("policies[0].policy.core: every policy carries "
                               "the run's recurrent core in this version "
                               "(policy.core \"lstm\", core_size 8)"),
                     HasSubstr("policies[1].policy.core: every policy carries "
                               "the run's recurrent core"))));
  EXPECT_THAT(
      TwoPolicies("[{name: a, agents: [0], policy: {core: lstm}},"
                  " {name: b, agents: [1]}]")
          .status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("policies[0].policy.core: every policy carries the "
                         "run's recurrent core in this version (policy.core "
                         "\"none\"")));
  // The run's own num_minibatches (16) divides neither envs_per_actor (8)
  // nor a policy's rows, but no policy takes it: each divides its own 4.
  ASSERT_OK(TwoPolicies("[{name: a, agents: [0], ppo: {num_minibatches: 2}},"
                        " {name: b, agents: [1], ppo: {num_minibatches: 4}}]",
                        "{num_minibatches: 16}",
                        "{hidden_sizes: [16], core: gru}")
                .status());
  // 8 divides envs_per_actor (8) but not a policy's 4 rows.
  EXPECT_THAT(
      TwoPolicies("[{name: a, agents: [0]},"
                  " {name: b, agents: [1], ppo: {num_minibatches: 8}}]",
                  "{num_minibatches: 2}", "{hidden_sizes: [16], core: gru}")
          .status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("policies[1].ppo.num_minibatches: a recurrent "
                               "policy learns from whole env sequences: "
                               "num_minibatches must divide the 4 rows"),
                     ::testing::Not(HasSubstr("must divide envs_per_actor")))));
  // A central critic reads every agent's rows; a policy acts for some.
  EXPECT_THAT(
      TwoPolicies("[{name: a, agents: [0]}, {name: b, agents: [1]}]",
                  "{num_minibatches: 2}",
                  "{hidden_sizes: [16], central_value: true}")
          .status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("policy.central_value: not with several policies")));
  EXPECT_THAT(TwoPolicies("[{name: a, agents: [0]}, {name: b, agents: [1], "
                          "policy: {central_value: true}}]")
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("policies[1].policy.central_value: not with "
                                 "several policies")));
  EXPECT_THAT(TwoPolicies("[{name: solo, agents: [0, 1]}]").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("policies: name two or more")));
}

// resources.learner_per_policy: num_learners learner processes per policy
// (ranks k * N .. k * N + N - 1 train policy k), for a policies block.
TEST(PoliciesRulesTest, ALearnerPerPolicyPlacesOneLearnerForEach) {
  const std::string per_policy =
      "[{name: a, agents: [0]}, {name: b, agents: [1]}]\n"
      "resources: {learner_per_policy: true}";
  ASSERT_OK_AND_ASSIGN(const RunSpec spec, TwoPolicies(per_policy));
  EXPECT_EQ(LearnerProcesses(spec), 2);
  RunSpec shared = spec;
  shared.mutable_resources()->set_learner_per_policy(false);
  EXPECT_EQ(LearnerProcesses(shared), 1);
  EXPECT_EQ(LearnerRoleOf(spec, 1).policy, 1);
  EXPECT_EQ(LearnerRoleOf(spec, 1).member, 0);
  // A gang of 2 per policy: ranks 0-1 train a (the run's own gang), 2-3 b.
  ASSERT_OK_AND_ASSIGN(
      const RunSpec gangs,
      TwoPolicies("[{name: a, agents: [0]}, {name: b, agents: [1]}]\n"
                  "resources: {learner_per_policy: true, num_learners: 2}"));
  EXPECT_EQ(LearnerProcesses(gangs), 4);
  const std::vector<std::pair<int, int>> roles = {
      {0, 0}, {0, 1}, {1, 0}, {1, 1}};
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(LearnerRoleOf(gangs, rank).policy, roles[rank].first) << rank;
    EXPECT_EQ(LearnerRoleOf(gangs, rank).member, roles[rank].second) << rank;
  }
  EXPECT_EQ(PolicyLearnerRanks(gangs, 0), std::vector<int>({2}));
  EXPECT_EQ(PolicyLearnerRanks(gangs, 1), std::vector<int>({3}));
  EXPECT_EQ(PolicyLearnerRanks(spec, 0), std::vector<int>({1}));
  RunSpec shared_gang = gangs;
  shared_gang.mutable_resources()->set_learner_per_policy(false);
  EXPECT_EQ(LearnerProcesses(shared_gang), 2);
  EXPECT_EQ(LearnerRoleOf(shared_gang, 1).policy, 0);
  EXPECT_EQ(LearnerRoleOf(shared_gang, 1).member, 1);
  EXPECT_TRUE(PolicyLearnerRanks(shared_gang, 1).empty());
  EXPECT_THAT(
      LoadRunSpec("env: {id: CartPole-v1}\n"
                  "resources: {learner_per_policy: true}\n",
                  RunFileFormat::kYaml)
          .status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("resources.learner_per_policy: needs a policies: "
                         "block (two or more policies, each on a learner of "
                         "its own) (got 0 policies)")));
}

// Each policy learns from its own agents' rows: a run's policies end apart
// from where they began and from each other, each with its own episodes;
// a checkpoint brings every one of them back.
TEST(PoliciesTest, EachPolicyTrainsOnItsAgentsAndComesBackFromACheckpoint) {
  ASSERT_OK_AND_ASSIGN(const RunSpec spec, TwoPolicies(kRedBlue));
  const std::string dir = MakeTestDir("policies");
  TrainerOptions options;
  options.run_dir = dir;
  ASSERT_OK_AND_ASSIGN(auto trainer, LocalTrainer::Create(spec, options));
  ASSERT_OK(trainer->Train(nullptr, 6).status());
  const TrainerProgress& p = trainer->progress();
  ASSERT_EQ(p.policies.size(), 2u);
  EXPECT_EQ(p.policies[0].name, "red");
  EXPECT_EQ(p.policies[1].name, "blue");
  // Games on a 6x6 board end within 16 steps: both seats finished some.
  EXPECT_GT(p.policies[0].episodes, 0);
  EXPECT_EQ(p.policies[0].episodes, p.policies[1].episodes);
  EXPECT_EQ(p.episodes, p.policies[0].episodes);
  // Zero-sum: one seat's wins are the other's losses.
  EXPECT_NEAR(p.policies[0].mean_return, -p.policies[1].mean_return, 1e-6);
  EXPECT_GT(p.policies[1].last_update.learning_rate,
            p.policies[0].last_update.learning_rate);
  // The first policy's checkpoints are the run's; blue's beside them, with
  // its own network.
  ASSERT_OK_AND_ASSIGN(const std::string red_ckpt,
                       LatestCheckpoint(dir + "/checkpoints"));
  ASSERT_OK_AND_ASSIGN(const std::string blue_ckpt,
                       LatestCheckpoint(dir + "/policies/blue/checkpoints"));
  EXPECT_EQ(std::filesystem::path(red_ckpt).filename(),
            std::filesystem::path(blue_ckpt).filename());
  ASSERT_OK_AND_ASSIGN(ActorCritic blue,
                       ReadRunPolicy(NamedPolicyRun(spec, 1), blue_ckpt));
  EXPECT_EQ(blue->parameters()[0].size(0), 8);

  ASSERT_OK_AND_ASSIGN(auto resumed, LocalTrainer::Create(spec, {}));
  ASSERT_OK(resumed->Restore(red_ckpt));
  EXPECT_EQ(resumed->progress().policies[1].episodes, p.policies[1].episodes);
  const auto a = trainer->policy()->named_parameters();
  for (const auto& item : resumed->policy()->named_parameters()) {
    EXPECT_TRUE(torch::equal(item.value(), a[item.key()])) << item.key();
  }
  ASSERT_OK(resumed->Train(nullptr, 1).status());
  EXPECT_GT(resumed->progress().policies[1].episodes, p.policies[1].episodes);
  // A checkpoint without blue's beside it is refused, naming the path.
  std::filesystem::remove_all(dir + "/policies");
  ASSERT_OK_AND_ASSIGN(auto missing, LocalTrainer::Create(spec, {}));
  const absl::Status refused = missing->Restore(red_ckpt);
  EXPECT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("policies/blue/checkpoints"));
}

// The other policies' checkpoints are kept for the run's own: a run
// checkpoint that fails (the disk fills while its largest file is written)
// leaves every policy with the checkpoint the run falls back to, though
// keep_checkpoints is 1. Pruned on their own, the policies had kept only
// the new one the run never got.
TEST(PoliciesTest, APolicysCheckpointsFollowTheRunsWhenItsWriteFails) {
  ASSERT_OK_AND_ASSIGN(RunSpec spec, TwoPolicies(kRedBlue));
  spec.set_keep_checkpoints(1);
  const std::string dir = MakeTestDir("policies_full");
  TrainerOptions options;
  options.run_dir = dir;
  ASSERT_OK_AND_ASSIGN(auto trainer, LocalTrainer::Create(spec, options));
  ASSERT_OK(trainer->Train(nullptr, 1).status());  // checkpoint 1
  const std::string blue_root = dir + "/policies/blue/checkpoints";
  ASSERT_OK_AND_ASSIGN(std::set<int64_t> blue, CheckpointCounters(blue_root));
  ASSERT_EQ(blue, (std::set<int64_t>{1}));
  // A file of the run's (its network is larger) outgrows every one of
  // blue's.
  auto largest = [](const std::string& ckpt) {
    rlim_t most = 0;
    for (const char* file : {"policy.pt", "optimizer.pt", "state.pt"}) {
      most = std::max(most, static_cast<rlim_t>(std::filesystem::file_size(
                                std::filesystem::path(ckpt) / file)));
    }
    return most;
  };
  const rlim_t blue_largest = largest(blue_root + "/ckpt-000000000001");
  ASSERT_GT(largest(dir + "/checkpoints/ckpt-000000000001"),
            blue_largest + 1024);
  absl::Status failed;
  {
    const FileSizeLimit full_disk(blue_largest + 512);
    failed = trainer->Train(nullptr, 1).status();  // checkpoint 2 fails
  }
  EXPECT_FALSE(failed.ok());
  ASSERT_OK_AND_ASSIGN(const std::set<int64_t> run,
                       CheckpointCounters(dir + "/checkpoints"));
  EXPECT_EQ(run, (std::set<int64_t>{1}));
  ASSERT_OK_AND_ASSIGN(blue, CheckpointCounters(blue_root));
  EXPECT_EQ(blue, run);
  // And the run resumes from it, blue included.
  ASSERT_OK_AND_ASSIGN(auto resumed, LocalTrainer::Create(spec, {}));
  EXPECT_OK(resumed->Restore(dir + "/checkpoints/ckpt-000000000001"));
}

// Beside a recurrent core (the run's, every policy carrying it), each
// policy trains on its rows, and a checkpoint brings every one back with
// the collector's states: the resumed run goes on as the uninterrupted.
TEST(PoliciesTest, RecurrentPoliciesTrainAndComeBackFromACheckpoint) {
  ASSERT_OK_AND_ASSIGN(
      const RunSpec spec,
      TwoPolicies("[{name: red, agents: [0]},"
                  " {name: blue, agents: [1], policy: {hidden_sizes: [8]}}]",
                  "{num_minibatches: 2, num_epochs: 1, learning_rate: 0.001}",
                  "{hidden_sizes: [16], core: gru, core_size: 8}"));
  TrainerOptions options;
  options.run_dir = MakeTestDir("recurrent_policies");
  ASSERT_OK_AND_ASSIGN(auto trainer, LocalTrainer::Create(spec, options));
  ASSERT_OK(trainer->Train(nullptr, 3).status());
  const TrainerProgress& p = trainer->progress();
  ASSERT_EQ(p.policies.size(), 2u);
  EXPECT_GT(p.policies[1].episodes, 0);
  EXPECT_EQ(p.policies[0].episodes, p.policies[1].episodes);
  EXPECT_TRUE(std::isfinite(p.policies[1].last_update.policy_loss));
  EXPECT_NE(p.policies[1].last_update.policy_loss, 0);
  ASSERT_OK_AND_ASSIGN(const std::string red_ckpt,
                       LatestCheckpoint(options.run_dir + "/checkpoints"));
  ASSERT_OK_AND_ASSIGN(
      const std::string blue_ckpt,
      LatestCheckpoint(options.run_dir + "/policies/blue/checkpoints"));
  ASSERT_OK_AND_ASSIGN(ActorCritic blue,
                       ReadRunPolicy(NamedPolicyRun(spec, 1), blue_ckpt));
  EXPECT_EQ(blue->state_size(), 8);

  // Both policies' weights and the collector's states come back: the
  // resumed run's own checkpoint, written before it trains, holds the
  // same states as the one it read.
  TrainerOptions again;
  again.run_dir = MakeTestDir("recurrent_policies_resumed");
  ASSERT_OK_AND_ASSIGN(auto resumed, LocalTrainer::Create(spec, again));
  ASSERT_OK(resumed->Restore(red_ckpt));
  for (size_t i = 0; i < 2; ++i) {
    const auto a = trainer->policy(i)->named_parameters();
    for (const auto& item : resumed->policy(i)->named_parameters()) {
      EXPECT_TRUE(torch::equal(item.value(), a[item.key()]))
          << "policy " << i << " " << item.key();
    }
  }
  ASSERT_OK_AND_ASSIGN(const std::string rewritten, resumed->WriteCheckpoint());
  std::vector<torch::Tensor> states;
  for (const std::string& dir : {red_ckpt, rewritten}) {
    ASSERT_OK_AND_ASSIGN(ActorCritic red,
                         ReadRunPolicy(NamedPolicyRun(spec, 0), dir));
    TensorMap extra;
    ASSERT_OK(ReadCheckpoint(dir, red, nullptr, &extra));
    ASSERT_EQ(extra.count("collector.policy_state"), 1u) << dir;
    states.push_back(extra.at("collector.policy_state"));
  }
  ASSERT_EQ(states[0].sizes(), (std::vector<int64_t>{8, 8}));
  EXPECT_GT(states[0].abs().sum().item<float>(), 0);
  EXPECT_TRUE(torch::equal(states[0], states[1]));
  // And it plays on exactly as a run never interrupted (LightCycles-v0
  // saves its boards with the checkpoint).
  ASSERT_OK(resumed->Train(nullptr, 1).status());
  EXPECT_EQ(resumed->progress().updates, 4);
  ASSERT_OK_AND_ASSIGN(auto straight, LocalTrainer::Create(spec, {}));
  ASSERT_OK(straight->Train(nullptr, 4).status());
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(resumed->progress().policies[i].episodes,
              straight->progress().policies[i].episodes);
    EXPECT_EQ(resumed->progress().policies[i].last_update.policy_loss,
              straight->progress().policies[i].last_update.policy_loss);
    const auto a = straight->policy(i)->named_parameters();
    for (const auto& item : resumed->policy(i)->named_parameters()) {
      EXPECT_TRUE(torch::equal(item.value(), a[item.key()]))
          << "policy " << i << " " << item.key();
    }
  }
}

// rl_local export --policy_name: each policy with its own network from its
// own checkpoints (blue's [8, 8] layers would not load into red's [16]).
TEST(PoliciesTest, ExportTakesAPolicyName) {
  const std::string dir = MakeTestDir("export");
  const std::string run_file = dir + "/run.yaml";
  {
    std::ofstream out(run_file);
    out << TwoPoliciesText(kRedBlue);
  }
  ASSERT_OK_AND_ASSIGN(const RunSpec spec, LoadRunSpecFile(run_file));
  TrainerOptions options;
  options.run_dir = dir + "/run";
  ASSERT_OK_AND_ASSIGN(auto trainer, LocalTrainer::Create(spec, options));
  ASSERT_OK(trainer->Train(nullptr, 2).status());
  ASSERT_OK_AND_ASSIGN(const std::string red_ckpt,
                       LatestCheckpoint(dir + "/run/checkpoints"));

  ExportOptions exp;
  exp.run_file = run_file;
  exp.checkpoint = dir + "/run";
  for (const std::string name : {"", "red", "blue"}) {
    SCOPED_TRACE(name);
    exp.policy_name = name;
    exp.output = dir + "/" + (name.empty() ? "first" : name) + ".pt";
    EXPECT_EQ(ExportRunPolicy(exp), kExitDone);
    EXPECT_TRUE(std::filesystem::exists(exp.output));
    EXPECT_TRUE(std::filesystem::exists(exp.output + ".json"));
  }
  // A checkpoint of the run's names blue's beside it; blue's own
  // directory names blue; the run's checkpoints directory, with a trailing
  // '/', is red's.
  struct Case {
    std::string checkpoint, name;
  };
  for (const Case& c :
       std::vector<Case>{{red_ckpt, "blue"},
                         {dir + "/run/policies/blue", ""},
                         {dir + "/run/policies/blue/checkpoints", "blue"},
                         {dir + "/run/checkpoints/", ""}}) {
    SCOPED_TRACE(c.checkpoint);
    exp.checkpoint = c.checkpoint;
    exp.policy_name = c.name;
    exp.output = dir + "/by_path.pt";
    std::filesystem::remove(exp.output);
    EXPECT_EQ(ExportRunPolicy(exp), kExitDone);
    EXPECT_TRUE(std::filesystem::exists(exp.output));
  }
  // Blue's directory is not red's.
  exp.checkpoint = dir + "/run/policies/blue";
  exp.policy_name = "red";
  EXPECT_EQ(ExportRunPolicy(exp), kExitBadInput);
  // Unknown names and missing checkpoints are bad input; nothing written.
  exp.policy_name = "green";
  exp.output = dir + "/green.pt";
  EXPECT_EQ(ExportRunPolicy(exp), kExitBadInput);
  exp.policy_name = "blue";
  exp.checkpoint = dir;
  EXPECT_EQ(ExportRunPolicy(exp), kExitBadInput);
  EXPECT_FALSE(std::filesystem::exists(dir + "/green.pt"));
}

}  // namespace
}  // namespace rl
