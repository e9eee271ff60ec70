// An actor that joins a run under way, or starts again in it: its league
// numbers versions as the run does, and begins with the versions the
// learner kept (PolicyUpdate.league_pool, League::AdoptEarlier) instead of
// its one newest version.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "actor/league.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/actor_critic.h"
#include "testing/run_specs.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<int64_t> PoolVersions(const League& league) {
  std::vector<int64_t> versions;
  for (const OpponentRecord& r : league.records()) {
    versions.push_back(r.version);
  }
  return versions;
}

// An actor sees the versions the learner published when it looked: it may
// begin under way and skip updates. Versions are numbered by the snapshot
// they stand for (updates / snapshot_interval), the first call at or past
// a multiple freezing it, so every actor of a run names them alike.
TEST(LeagueJoinTest, AnActorJoiningUnderWayNumbersVersionsAsTheRun) {
  RunSpec spec =
      LightCyclesLeagueRunSpec("{snapshot_interval: 10, pool_size: 3}");
  ASSERT_OK_AND_ASSIGN(ActorCritic policy,
                       CreateSeededActorCritic(RunNetworkConfig(spec), 1));
  // Begun at update 57: its first version stands for v5 (update 50).
  ASSERT_OK_AND_ASSIGN(auto league, League::Create(spec, policy, 8, 57));
  ASSERT_EQ(league->records().size(), 1u);
  EXPECT_EQ(league->records()[0].version, 5);
  EXPECT_EQ(league->next_version(), 6);
  // Its games are against v5, the trained policy playing as v6.
  const std::vector<uint8_t> term = {1, 1, 0, 0, 0, 0, 0, 0};
  const std::vector<uint8_t> trunc(8, 0);
  const std::vector<float> returns = {1, -1, 0, 0, 0, 0, 0, 0};
  const std::vector<int32_t> lengths = {5, 5, 0, 0, 0, 0, 0, 0};
  league->StepEnded(term.data(), trunc.data(), returns.data(), lengths.data(),
                    nullptr);
  std::vector<LeagueMatch> matches = league->TakeMatches();
  ASSERT_EQ(matches.size(), 1u);
  EXPECT_EQ(matches[0].opponent_version, 5);
  EXPECT_EQ(matches[0].learner_version, 6);
  // 58, 59: nothing; 63 (60 skipped): v6; 64, 69: nothing; 85: v8 (v7 was
  // never seen); 85 again: nothing.
  for (const int64_t updates : {58, 59, 63, 64, 69, 85, 85}) {
    ASSERT_OK(league->AfterUpdate(updates, updates * 128, policy));
  }
  std::vector<int64_t> versions;
  for (const OpponentRecord& r : league->records())
    versions.push_back(r.version);
  EXPECT_THAT(versions, ElementsAre(5, 6, 8));
  EXPECT_EQ(league->next_version(), 9);
  EXPECT_THAT(League::Create(spec, policy, 8, -1).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("updates must be >= 0")));
}

TEST(LeagueJoinTest, AnActorThatStartsAgainBeginsWithTheLearnersPool) {
  torch::set_num_threads(1);
  const RunSpec spec = LightCyclesLeagueRunSpec(
      "{snapshot_interval: 10, pool_size: 3, sampling: uniform}");
  ASSERT_OK_AND_ASSIGN(ActorCritic policy,
                       CreateSeededActorCritic(RunNetworkConfig(spec), 1));
  // Begun at update 57: its own first version is v5.
  ASSERT_OK_AND_ASSIGN(auto league, League::Create(spec, policy, 8, 57));
  // The learner kept v1-v4 (each its own weights); v5 and v6 are not older
  // than the league's first version and are left out.
  std::vector<std::pair<int64_t, ActorCritic>> kept;
  for (const int64_t v : {1, 2, 3, 4, 5, 6}) {
    ASSERT_OK_AND_ASSIGN(ActorCritic net, CreateSeededActorCritic(
                                              RunNetworkConfig(spec), 100 + v));
    kept.emplace_back(v, net);
  }
  ASSERT_OK_AND_ASSIGN(const int64_t adopted, league->AdoptEarlier(kept));
  EXPECT_EQ(adopted, 4);  // v1-v4; v1 and v2 then leave for pool_size
  // pool_size 3: the newest three, its own v5 among them.
  EXPECT_THAT(PoolVersions(*league), ElementsAre(3, 4, 5));
  EXPECT_THAT(league->Describe(), HasSubstr("pool v3-v5 (3 versions"));
  EXPECT_EQ(league->next_version(), 6);
  // Adopted versions are copies of the learner's weights; v1 and v2 left.
  std::map<std::string, torch::Tensor> state;
  league->SaveState(&state);
  for (const int64_t v : {3, 4}) {
    const torch::Tensor learner = kept[v - 1].second->parameters()[0];
    const torch::Tensor frozen = state.at(absl::StrCat("league.v", v, ".0"));
    EXPECT_TRUE(torch::equal(frozen, learner.detach())) << "v" << v;
  }
  EXPECT_EQ(state.count("league.v1.0"), 0u);
  EXPECT_EQ(state.count("league.v2.0"), 0u);
  // The next snapshot pushes the oldest adopted version out.
  ASSERT_OK(league->AfterUpdate(60, 60 * 128, policy));
  EXPECT_THAT(PoolVersions(*league), ElementsAre(4, 5, 6));
  // Nothing kept (a new run's first actor): the league is its own.
  ASSERT_OK_AND_ASSIGN(auto fresh, League::Create(spec, policy, 8, 57));
  ASSERT_OK_AND_ASSIGN(const int64_t none, fresh->AdoptEarlier({}));
  EXPECT_EQ(none, 0);
  EXPECT_THAT(PoolVersions(*fresh), ElementsAre(5));
}

// The adopted versions play: with uniform sampling every one of them is
// drawn as an opponent once games end, and the games are matches against
// their numbers.
TEST(LeagueJoinTest, AdoptedVersionsAreDrawnAsOpponents) {
  torch::set_num_threads(1);
  const RunSpec spec = LightCyclesLeagueRunSpec(
      "{snapshot_interval: 10, pool_size: 4, sampling: uniform}");
  ASSERT_OK_AND_ASSIGN(ActorCritic policy,
                       CreateSeededActorCritic(RunNetworkConfig(spec), 1));
  ASSERT_OK_AND_ASSIGN(auto league, League::Create(spec, policy, 8, 30));
  std::vector<std::pair<int64_t, ActorCritic>> kept;
  for (const int64_t v : {0, 1, 2}) kept.emplace_back(v, policy);
  ASSERT_OK(league->AdoptEarlier(kept).status());
  ASSERT_THAT(PoolVersions(*league), ElementsAre(0, 1, 2, 3));
  // Every copy's game ends, 50 times: the opponents drawn after each are
  // the next matches' versions.
  const std::vector<uint8_t> ended(8, 1);
  const std::vector<uint8_t> not_truncated(8, 0);
  const std::vector<float> returns(8, 1);
  const std::vector<int32_t> lengths(8, 3);
  std::map<int64_t, int> played;
  for (int round = 0; round < 50; ++round) {
    league->StepEnded(ended.data(), not_truncated.data(), returns.data(),
                      lengths.data(), nullptr);
    for (const LeagueMatch& m : league->TakeMatches()) {
      ++played[m.opponent_version];
    }
  }
  for (const int64_t v : {0, 1, 2}) {
    EXPECT_GT(played[v], 0) << "adopted v" << v << " never played";
  }
}

}  // namespace
}  // namespace rl
