#include "actor/league.h"

#include <torch/script.h>
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "actor/rollout_collector.h"
#include "common/league_matches.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/policy_export.h"
#include "policy/rollout.h"
#include "runspec/run_spec.h"
#include "testing/run_specs.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"
#include "trainer/local_trainer.h"

namespace rl {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(OpponentWeightsTest, LatestUniformAndPrioritisedBySelfPlayWinRate) {
  const std::vector<OpponentRecord> pool = {
      {0, 9, 10},  // the trained policy beat version 0 in 9 of 10
      {1, 5, 10},  // even
      {2, 0, 0},   // untried: counted as even
      {3, 1, 10},  // version 3 beat it in 9 of 10
  };
  EXPECT_THAT(OpponentWeights("latest", pool), ElementsAre(0, 0, 0, 1));
  EXPECT_THAT(OpponentWeights("uniform", pool), ElementsAre(1, 1, 1, 1));
  const std::vector<double> w = OpponentWeights("pfsp", pool);
  ASSERT_EQ(w.size(), 4u);
  EXPECT_NEAR(w[0], (1 - 9.5 / 11) * (1 - 9.5 / 11), 1e-12);
  EXPECT_NEAR(w[2], 0.25, 1e-12);
  // The harder the opponent, the more often it is drawn.
  EXPECT_LT(w[0], w[1]);
  EXPECT_DOUBLE_EQ(w[1], w[2]);
  EXPECT_LT(w[2], w[3]);
}

TEST(LeagueRulesTest, ARunFileNamesWhatIsWrong) {
  EXPECT_EQ(LightCyclesLeagueRunSpec("{}").league().sampling(), "pfsp");
  EXPECT_EQ(LightCyclesLeagueRunSpec("{}").league().snapshot_interval(), 10);
  EXPECT_EQ(LightCyclesLeagueRunSpec("{}").league().pool_size(), 20);
  auto bad = LoadRunSpec(R"(
env: {id: CartPole-v1}
league: {sampling: best, pool_size: -1, snapshot_interval: 0}
)",
                         RunFileFormat::kYaml);
  EXPECT_THAT(bad.status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("league: needs an environment of "
                                       "several agents"),
                             HasSubstr("league.sampling: must be one of pfsp, "
                                       "uniform, latest (got \"best\")"),
                             HasSubstr("league.pool_size: must be in [1, "
                                       "1000] (got -1)"))));
  // A segment holds only the trained seats: no central critic.
  RunSpec central = LightCyclesLeagueRunSpec("{}");
  central.mutable_policy()->set_central_value(true);
  EXPECT_THAT(ValidateRunSpec(central),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("league: not with a central critic")));
}

// The frozen versions play every seat but c mod 2 of copy c; the trained
// policy's choices there are left alone.
TEST(LeagueTest, OpponentsPlayTheOtherSeatsAndGamesBecomeMatches) {
  RunSpec spec =
      LightCyclesLeagueRunSpec("{snapshot_interval: 2, pool_size: 2}");
  ASSERT_OK_AND_ASSIGN(ActorCritic policy,
                       CreateSeededActorCritic(RunNetworkConfig(spec), 1));
  ASSERT_OK_AND_ASSIGN(auto league, League::Create(spec, policy, 8));
  EXPECT_TRUE(torch::equal(league->learner_rows(),
                           torch::tensor({0, 3, 4, 7}, torch::kInt64)));
  c10::InferenceMode inference;
  torch::Tensor actions = torch::full({8}, -1, torch::kInt64);
  // Masks allow action 2 only: the opponents' rows must take it.
  torch::Tensor masks = torch::zeros({8, 3}, torch::kUInt8);
  masks.select(1, 2).fill_(1);
  ASSERT_OK(league->Act(torch::rand({8, 242}), masks, actions));
  EXPECT_THAT(std::vector<int64_t>(actions.data_ptr<int64_t>(),
                                   actions.data_ptr<int64_t>() + 8),
              ElementsAre(-1, 2, 2, -1, -1, 2, 2, -1));

  // Copies 0 and 1 end: the trained seat won the first, lost the second.
  const std::vector<uint8_t> term = {1, 1, 1, 1, 0, 0, 0, 0};
  const std::vector<uint8_t> trunc(8, 0);
  const std::vector<float> returns = {1, -1, 1, -1, 0, 0, 0, 0};
  const std::vector<int32_t> lengths = {7, 7, 9, 9, 0, 0, 0, 0};
  league->StepEnded(term.data(), trunc.data(), returns.data(), lengths.data(),
                    nullptr);
  EXPECT_THAT(league->TakeLearnerReturns(), ElementsAre(1.f, -1.f));
  EXPECT_THAT(league->TakeLearnerLengths(), ElementsAre(7, 9));
  const std::vector<LeagueMatch> matches = league->TakeMatches();
  ASSERT_EQ(matches.size(), 2u);
  EXPECT_EQ(matches[0].learner_version, 1);
  EXPECT_EQ(matches[0].opponent_version, 0);
  EXPECT_EQ(league->records()[0].games, 2);
  EXPECT_DOUBLE_EQ(league->records()[0].learner_score, 1.0);
  EXPECT_THAT(league->Describe(),
              HasSubstr("the last 2 games: won 50%, drew 0%, lost 50%"));

  // Every 2 updates a version joins; the pool keeps the latest 2.
  for (int update = 1; update <= 6; ++update) {
    ASSERT_OK(league->AfterUpdate(update, update * 128, policy));
  }
  EXPECT_EQ(league->next_version(), 4);
  ASSERT_EQ(league->records().size(), 2u);
  EXPECT_EQ(league->records()[0].version, 2);
  EXPECT_EQ(league->records()[1].version, 3);
  EXPECT_THAT(league->Describe(), HasSubstr("pool v2-v3 (2 versions, pfsp)"));
}

TEST(LeagueRulesTest, MembersNeedNamesFilesAndShares) {
  auto bad = LoadRunSpec(R"(
env:
  id: LightCycles-v0
  plugin: light_cycles
  kwargs: {opponent: self}
  agents_per_env: 2
  observation_size: 450
  num_discrete_actions: 3
league:
  members:
    - {name: Bad Name, share: 0}
    - {name: ok, share: 0.7, policy_file: a.pt}
    - {name: ok, share: 0.6, policy_file: b.pt}
)",
                         RunFileFormat::kYaml);
  EXPECT_THAT(
      bad.status(),
      StatusIs(
          absl::StatusCode::kInvalidArgument,
          AllOf(HasSubstr("league.members[0].name: 1-32 characters of a-z, "
                          "0-9, _ and - (got \"Bad Name\")"),
                HasSubstr("league.members[0].policy_file: the member's "
                          "TorchScript file"),
                HasSubstr("league.members[0].share: the fraction of games it "
                          "plays, in (0, 1] (got 0)"),
                HasSubstr("league.members[2].name: already names another "
                          "member (got \"ok\")"),
                HasSubstr("league.members: their shares together are more "
                          "than every game (got 1.3)"))));
}

// A TorchScript member saved under `dir`: a module whose forward is
// `forward` (TorchScript source).
std::string WriteMember(const std::string& dir, const std::string& name,
                        const std::string& forward) {
  torch::jit::Module module("Member");
  module.define(forward);
  const std::string path = dir + "/" + name + ".pt";
  module.save(path);
  return path;
}

// LeagueRun with one member, "right" (it always turns right, action 2,
// whatever the masks say), that plays every game after the first.
RunSpec RightMemberRun(const std::string& dir) {
  const std::string right = WriteMember(dir, "right", R"(
def forward(self, obs: Tensor):
    n = obs.size(0)
    return torch.zeros([n]).long() + 2, torch.zeros([n])
)");
  return LightCyclesLeagueRunSpec(absl::StrCat(
      "{members: [{name: right, share: 1.0, policy_file: \"", right, "\"}]}"));
}

// A fixed member plays its share of the games (here all of them once the
// first games end), as version -1 in the matches, whatever the masks say
// (its forward takes none); its record survives a checkpoint.
TEST(LeagueTest, MembersPlayTheirShareOfGamesAsNegativeVersions) {
  const RunSpec spec = RightMemberRun(MakeTestDir("members"));
  ASSERT_OK_AND_ASSIGN(ActorCritic policy,
                       CreateSeededActorCritic(RunNetworkConfig(spec), 1));
  ASSERT_OK_AND_ASSIGN(auto league, League::Create(spec, policy, 8));
  c10::InferenceMode inference;
  // The pool's version 0 takes the one action the masks allow, 0.
  torch::Tensor masks = torch::zeros({8, 3}, torch::kUInt8);
  masks.select(1, 0).fill_(1);
  const auto act = [&]() -> std::vector<int64_t> {
    torch::Tensor actions = torch::full({8}, -1, torch::kInt64);
    EXPECT_OK(league->Act(torch::rand({8, 242}), masks, actions));
    return {actions.data_ptr<int64_t>(), actions.data_ptr<int64_t>() + 8};
  };
  EXPECT_THAT(act(), ElementsAre(-1, 0, 0, -1, -1, 0, 0, -1));
  // Copies 0 and 1 end against version 0, and draw the member next.
  const std::vector<uint8_t> trunc(8, 0);
  std::vector<uint8_t> term = {1, 1, 1, 1, 0, 0, 0, 0};
  std::vector<float> returns = {1, -1, -1, 1, 0, 0, 0, 0};
  const std::vector<int32_t> lengths(8, 4);
  league->StepEnded(term.data(), trunc.data(), returns.data(), lengths.data(),
                    nullptr);
  EXPECT_THAT(act(), ElementsAre(-1, 2, 2, -1, -1, 0, 0, -1));
  // Copy 1's trained seat (row 3) beats the member.
  term = {0, 0, 1, 1, 0, 0, 0, 0};
  returns = {0, 0, -1, 1, 0, 0, 0, 0};
  league->TakeMatches();
  league->StepEnded(term.data(), trunc.data(), returns.data(), lengths.data(),
                    nullptr);
  const std::vector<LeagueMatch> matches = league->TakeMatches();
  ASSERT_EQ(matches.size(), 1u);
  EXPECT_EQ(matches[0].opponent_version, -1);
  EXPECT_EQ(matches[0].learner_return, 1.f);
  ASSERT_EQ(league->member_records().size(), 1u);
  EXPECT_EQ(league->member_records()[0].version, -1);
  EXPECT_EQ(league->member_records()[0].games, 1);
  EXPECT_THAT(league->Describe(),
              HasSubstr("member right (scored 100% of 1 games)"));

  std::map<std::string, torch::Tensor> state;
  league->SaveState(&state);
  ASSERT_OK_AND_ASSIGN(auto resumed, League::Create(spec, policy, 8));
  ASSERT_OK(resumed->RestoreState(state));
  EXPECT_EQ(resumed->member_records()[0].games, 1);
  EXPECT_DOUBLE_EQ(resumed->member_records()[0].learner_score, 1.0);
  torch::Tensor actions = torch::full({8}, -1, torch::kInt64);
  ASSERT_OK(resumed->Act(torch::rand({8, 242}), masks, actions));
  EXPECT_EQ(actions[1].item<int64_t>(), 2);  // copy 0 still plays it
  EXPECT_EQ(actions[2].item<int64_t>(), 2);  // and copy 1 again

  // A checkpoint whose copies play a member this run does not have.
  state["league.opponents"].fill_(-2);
  EXPECT_THAT(resumed->RestoreState(state),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("copy 0 plays member 2, and this run has 1")));
}

TEST(LeagueTest, AMemberThatDoesNotLoadOrDoesNotFitIsNamed) {
  RunSpec gone = LightCyclesLeagueRunSpec(
      "{members: [{name: gone, share: 0.5, policy_file: /nonexistent/x.pt}]}");
  ASSERT_OK_AND_ASSIGN(ActorCritic policy,
                       CreateSeededActorCritic(RunNetworkConfig(gone), 1));
  EXPECT_THAT(League::Create(gone, policy, 8).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("league.members[0].policy_file: "
                                 "\"/nonexistent/x.pt\" (member gone) does "
                                 "not load as TorchScript")));
  const std::string wide = WriteMember(MakeTestDir("wide"), "wide", R"(
def forward(self, obs: Tensor):
    return torch.zeros([obs.size(0), 3]).long()
)");
  RunSpec spec = LightCyclesLeagueRunSpec(absl::StrCat(
      "{members: [{name: wide, share: 1.0, policy_file: \"", wide, "\"}]}"));
  ASSERT_OK_AND_ASSIGN(auto league, League::Create(spec, policy, 8));
  const std::vector<uint8_t> term = {1, 1, 0, 0, 0, 0, 0, 0};
  const std::vector<uint8_t> trunc(8, 0);
  const std::vector<float> returns = {1, -1, 0, 0, 0, 0, 0, 0};
  const std::vector<int32_t> lengths(8, 4);
  league->StepEnded(term.data(), trunc.data(), returns.data(), lengths.data(),
                    nullptr);
  c10::InferenceMode inference;
  torch::Tensor actions = torch::full({8}, -1, torch::kInt64);
  EXPECT_THAT(
      league->Act(torch::rand({8, 242}), torch::Tensor(), actions),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("league member wide ("),
                     HasSubstr("returned actions Long[1, 3] for 1 rows; "
                               "expected the shape [1]"))));
}

// A member acts from the observation alone: a recurrent export (its
// forward takes a state carried per row) and a forward whose second input
// is not a mask are refused at load, naming the member and its inputs.
TEST(LeagueTest, AMemberMustActFromTheObservationAlone) {
  const std::string dir = MakeTestDir("recurrent_member");
  RunSpec recurrent_run = LightCyclesLeagueRunSpec("{}");
  recurrent_run.mutable_policy()->set_core("lstm");
  recurrent_run.mutable_policy()->set_core_size(8);
  ASSERT_OK_AND_ASSIGN(
      ActorCritic lstm,
      CreateSeededActorCritic(RunNetworkConfig(recurrent_run), 3));
  ASSERT_GT(lstm->state_size(), 0);
  const std::string lstm_file = dir + "/lstm.pt";
  ASSERT_OK(ExportTorchScript(lstm, recurrent_run.env(), PolicyExportOptions(),
                              lstm_file));
  const std::string odd = WriteMember(dir, "odd", R"(
def forward(self, obs: Tensor, hidden: Tensor):
    return torch.zeros([obs.size(0)]).long()
)");
  RunSpec spec = LightCyclesLeagueRunSpec(
      absl::StrCat("{members: [{name: lstm, share: 0.5, policy_file: \"",
                   lstm_file, "\"}]}"));
  ASSERT_OK_AND_ASSIGN(ActorCritic policy,
                       CreateSeededActorCritic(RunNetworkConfig(spec), 1));
  EXPECT_THAT(League::Create(spec, policy, 8).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("league.members[0].policy_file: "),
                             HasSubstr("(member lstm) is a recurrent policy "
                                       "(forward(obs, state))"))));
  spec = LightCyclesLeagueRunSpec(absl::StrCat(
      "{members: [{name: odd, share: 0.5, policy_file: \"", odd, "\"}]}"));
  EXPECT_THAT(League::Create(spec, policy, 8).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("(member odd) has forward(obs, hidden); a "
                                 "member's is forward(obs) or forward(obs, "
                                 "mask)")));
}

// In a collector the trained policy acts for its own rows alone (its
// log-probabilities and values are written there and nowhere else) and
// the frozen versions, without masks on the fused CPU kernels, for the
// rest: every row's action is a legal one.
TEST(LeagueTest, TheTrainedPolicyActsOnlyForItsRows) {
  for (const std::string kernels : {"fused", "libtorch"}) {
    SCOPED_TRACE(kernels);
    RunSpec spec = LightCyclesLeagueRunSpec("{snapshot_interval: 2}");
    spec.mutable_execution()->set_cpu_kernels(kernels);
    ASSERT_OK_AND_ASSIGN(ActorCritic policy,
                         CreateSeededActorCritic(RunNetworkConfig(spec), 1));
    ASSERT_OK_AND_ASSIGN(auto collector, RolloutCollector::Create(spec, 3, 1));
    ASSERT_OK_AND_ASSIGN(auto league, League::Create(spec, policy, 8));
    ASSERT_OK(collector->SetOpponents(league.get()));
    Rollout rollout = collector->AllocateRollout();
    const torch::Tensor mine =
        torch::zeros({8}, torch::kBool)
            .index_fill_(0, league->learner_rows(), true);
    const torch::Tensor theirs = mine.logical_not();
    // Segments against a pool that grows (versions 0-3, each of other
    // weights), so games are drawn against several versions at once.
    for (int segment = 0; segment < 4; ++segment) {
      SCOPED_TRACE(segment);
      rollout.actions.fill_(-1);
      ASSERT_OK(collector->Collect(policy, &rollout));
      EXPECT_TRUE(rollout.actions.ge(0)
                      .logical_and(rollout.actions.lt(3))
                      .all()
                      .item<bool>());
      {
        torch::NoGradGuard no_grad;
        for (torch::Tensor& p : policy->parameters()) {
          p.add_(torch::randn_like(p), 0.5);
        }
      }
      ASSERT_OK(league->AfterUpdate(2 * (segment + 1), 128, policy));
    }
    EXPECT_EQ(league->next_version(), 5);
    // [T, 8]: the trained rows' log-probabilities are those of real
    // choices (< 0); the opponents' rows are left as allocated (0).
    EXPECT_TRUE(rollout.log_probs.index({torch::indexing::Slice(), mine})
                    .lt(0)
                    .all()
                    .item<bool>());
    EXPECT_TRUE(rollout.log_probs.index({torch::indexing::Slice(), theirs})
                    .eq(0)
                    .all()
                    .item<bool>());
    EXPECT_TRUE(rollout.values.index({torch::indexing::Slice(), theirs})
                    .eq(0)
                    .all()
                    .item<bool>());
    EXPECT_TRUE(rollout.next_values.index({theirs}).eq(0).all().item<bool>());
    // Several policies beside a league are refused.
    EXPECT_THAT(
        collector->SetRowPolicies({RowPolicy{policy, league->learner_rows()}}),
        StatusIs(absl::StatusCode::kInvalidArgument,
                 HasSubstr("beside a league")));
  }
}

// Where agents leave early (env.agents_leave) the trained seat's episode
// is still its match, paired with it as the learner checks; the copy's
// next opponent is drawn only when the game's last agent has left, across
// a checkpoint too.
TEST(LeagueTest, WhereAgentsLeaveTheNextOpponentWaitsForTheGamesEnd) {
  // Every game after the first is against the member (version -1).
  const RunSpec spec = RightMemberRun(MakeTestDir("leave"));
  ASSERT_OK_AND_ASSIGN(ActorCritic policy,
                       CreateSeededActorCritic(RunNetworkConfig(spec), 1));
  ASSERT_OK_AND_ASSIGN(auto league, League::Create(spec, policy, 8));
  const auto opponents = [](League& l) {
    std::map<std::string, torch::Tensor> state;
    l.SaveState(&state);
    const torch::Tensor o = state.at("league.opponents");
    return std::vector<int64_t>(o.data_ptr<int64_t>(),
                                o.data_ptr<int64_t>() + o.numel());
  };
  // The learner's check (learner/run_intake.cc): a segment's matches are
  // its trained episodes, one for one and in order.
  const auto paired = [](League& l) {
    const std::vector<float> returns = l.TakeLearnerReturns();
    const std::vector<LeagueMatch> matches = l.TakeMatches();
    std::vector<float> match_returns;
    for (const LeagueMatch& m : matches) {
      match_returns.push_back(m.learner_return);
    }
    EXPECT_EQ(match_returns, returns);
    return matches;
  };
  // Trained seats: rows 0, 3, 4, 7. Copy 0's trained seat leaves (its
  // opponent plays on); copy 1's agents both leave, ending its game;
  // copy 2's opponent leaves (its trained seat plays on).
  const std::vector<uint8_t> trunc(8, 0);
  std::vector<uint8_t> term = {1, 0, 1, 1, 0, 1, 0, 0};
  std::vector<uint8_t> alive = {0, 1, 1, 1, 1, 0, 1, 1};
  std::vector<float> returns = {1, 0, -1, 1, 0, 1, 0, 0};
  const std::vector<int32_t> lengths(8, 5);
  league->StepEnded(term.data(), trunc.data(), returns.data(), lengths.data(),
                    alive.data());
  std::vector<LeagueMatch> matches = paired(*league);
  ASSERT_EQ(matches.size(), 2u);
  EXPECT_EQ(matches[0].opponent_version, 0);
  EXPECT_EQ(matches[0].learner_return, 1.f);
  EXPECT_EQ(matches[1].learner_return, 1.f);  // copy 1, row 3
  // Copy 0's game goes on against the same opponent.
  EXPECT_THAT(opponents(*league), ElementsAre(0, -1, 0, 0));

  // A checkpoint while copy 0 waits for its game's end.
  std::map<std::string, torch::Tensor> state;
  league->SaveState(&state);
  EXPECT_TRUE(torch::equal(state.at("league.waiting"),
                           torch::tensor({1, 0, 0, 0}, torch::kUInt8)));
  ASSERT_OK_AND_ASSIGN(auto resumed, League::Create(spec, policy, 8));
  ASSERT_OK(resumed->RestoreState(state));
  for (League* l : {league.get(), resumed.get()}) {
    // Copy 0's opponent and copy 2's trained seat leave: both games end
    // (their copies start anew, every agent alive).
    term = {0, 1, 0, 0, 1, 0, 0, 0};
    alive = {1, 1, 1, 1, 1, 1, 1, 1};
    returns = {0, -1, 0, 0, -1, 0, 0, 0};
    l->StepEnded(term.data(), trunc.data(), returns.data(), lengths.data(),
                 alive.data());
    matches = paired(*l);
    ASSERT_EQ(matches.size(), 1u);
    EXPECT_EQ(matches[0].learner_return, -1.f);  // copy 2, row 4
    EXPECT_THAT(opponents(*l), ElementsAre(-1, -1, -1, 0));
  }
  // A checkpoint without the key (a run before this) waits for nothing.
  state.erase("league.waiting");
  ASSERT_OK_AND_ASSIGN(auto older, League::Create(spec, policy, 8));
  ASSERT_OK(older->RestoreState(state));
  std::map<std::string, torch::Tensor> saved;
  older->SaveState(&saved);
  EXPECT_EQ(saved.at("league.waiting").sum().item<int64_t>(), 0);
}

// A league on Walkers-v0, whose agents leave their game early, trains
// through rl_local's trainer: every game is one match, the trained seat's
// return (+1 at the goal, -1 off the cliff).
TEST(LeagueTest, TrainsWhereAgentsLeaveEarly) {
  auto spec = LoadRunSpec(absl::StrCat(WalkersEnvYaml(), R"(
envs_per_actor: 12
segment_length: 32
total_env_steps: 100000
seed: 3
policy: {hidden_sizes: [16]}
ppo: {num_minibatches: 2, num_epochs: 2, learning_rate: 0.01}
league: {snapshot_interval: 2, pool_size: 3}
)"),
                          RunFileFormat::kYaml);
  ASSERT_OK(spec.status());
  TrainerOptions options;
  options.run_dir = MakeTestDir("walkers_league");
  ASSERT_OK_AND_ASSIGN(auto trainer, LocalTrainer::Create(*spec, options));
  ASSERT_OK(trainer->Train(nullptr, 8).status());
  EXPECT_THAT(trainer->league()->Describe(),
              HasSubstr("pool v2-v4 (3 versions"));
  ASSERT_OK_AND_ASSIGN(
      const std::vector<LeagueMatch> matches,
      ReadLeagueMatches(
          (std::filesystem::path(options.run_dir) / "league" / "matches.csv")
              .string()));
  // 8 updates of 4 copies x 32 steps: a game lasts until its slowest
  // walker leaves, about 6 to 20 steps.
  EXPECT_GT(matches.size(), 20u);
  int64_t versions_played = 0;
  for (const LeagueMatch& m : matches) {
    EXPECT_TRUE(m.learner_return == 1.f || m.learner_return == -1.f)
        << m.learner_return;
    versions_played = std::max(versions_played, m.opponent_version);
  }
  EXPECT_GE(versions_played, 1) << "the pool's later versions played too";
}

// A run with a league resumed from a checkpoint gets its league back
// whole: the pool's weights and records, each copy's opponent, the draws'
// streams. (LightCycles-v0 keeps no state of its own across a checkpoint,
// so the games after it are not the uninterrupted run's.)
TEST(LeagueTest, ACheckpointKeepsTheLeague) {
  const RunSpec spec = LightCyclesLeagueRunSpec(
      "{snapshot_interval: 1, pool_size: 3, sampling: uniform}");
  const std::string straight_dir = MakeTestDir("straight");
  const std::string resumed_dir = MakeTestDir("resumed");
  TrainerOptions straight_options;
  straight_options.run_dir = straight_dir;
  ASSERT_OK_AND_ASSIGN(auto straight,
                       LocalTrainer::Create(spec, straight_options));
  ASSERT_OK(straight->Train(nullptr, 6).status());

  TrainerOptions options;
  options.run_dir = resumed_dir;
  std::string checkpoint;
  std::map<std::string, torch::Tensor> saved;
  {
    ASSERT_OK_AND_ASSIGN(auto first, LocalTrainer::Create(spec, options));
    ASSERT_OK(first->Train(nullptr, 3).status());
    ASSERT_OK_AND_ASSIGN(checkpoint, first->WriteCheckpoint());
    first->league()->SaveState(&saved);
  }
  ASSERT_OK_AND_ASSIGN(auto resumed, LocalTrainer::Create(spec, options));
  ASSERT_OK(resumed->Restore(checkpoint));
  std::map<std::string, torch::Tensor> restored;
  resumed->league()->SaveState(&restored);
  // Versions 1-3 in the pool, and version 0 while games begun against it
  // go on: their weights are kept too.
  EXPECT_TRUE(saved.count("league.v3.0"));
  EXPECT_EQ(saved.size(), restored.size());
  for (const auto& [key, tensor] : saved) {
    ASSERT_TRUE(restored.count(key)) << key;
    EXPECT_TRUE(torch::equal(tensor, restored[key])) << key;
  }
  EXPECT_THAT(resumed->league()->Describe(),
              HasSubstr("pool v1-v3 (3 versions, uniform)"));
  // A run file whose interval changed would number the versions to come
  // otherwise: refused, naming the field.
  {
    RunSpec changed = spec;
    changed.mutable_league()->set_snapshot_interval(2);
    TrainerOptions other = options;
    other.run_dir = MakeTestDir("changed");
    ASSERT_OK_AND_ASSIGN(auto refused, LocalTrainer::Create(changed, other));
    EXPECT_THAT(refused->Restore(checkpoint),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("league.snapshot_interval: 2 does "
                                         "not fit checkpoint "),
                               HasSubstr("froze 3 versions in 3 updates"))));
  }
  ASSERT_OK(resumed->Train(nullptr, 3).status());
  EXPECT_EQ(resumed->league()->next_version(), 7);
  EXPECT_EQ(straight->league()->next_version(), 7);

  const auto read = [](const std::string& dir) {
    std::ifstream in(std::filesystem::path(dir) / "league" / "matches.csv");
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string matches = read(straight_dir);
  EXPECT_THAT(matches, ::testing::StartsWith(
                           "env_steps,learner_version,opponent_version,"
                           "learner_return\n"));
  // Games on a 6x6 board end within 16 steps: every segment has some,
  // and the first three segments' are the same in both runs.
  const std::string resumed_matches = read(resumed_dir);
  const size_t fourth = matches.find("\n384,4,");
  ASSERT_NE(fourth, std::string::npos) << matches;
  EXPECT_EQ(resumed_matches.substr(0, fourth), matches.substr(0, fourth));
  EXPECT_THAT(resumed_matches, HasSubstr("\n640,6,"));
  // Only the trained seats' episodes count, one per match.
  EXPECT_EQ(straight->progress().episodes,
            std::count(matches.begin(), matches.end(), '\n') - 1);
}

}  // namespace
}  // namespace rl
