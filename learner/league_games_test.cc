#include "learner/league_games.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "telemetry/client/emitter.h"
#include "telemetry/client/recording_transport.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace rl {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The trained policy's rating and each member's are emitted as the matches
// rate them; a learner that resumes on the run's directory rebuilds them
// (and the counts) from matches.csv as far as its checkpoint, the games
// after it and a torn last line cut off first.
TEST(LeagueGamesTest, RatingsAreEmittedAndRebuiltWhenTheRunResumes) {
  const std::string dir = MakeTestDir("league_games");
  const std::string path = dir + "/league/matches.csv";
  const std::vector<LeagueMatch> first = {
      {0, 1, 0, 1}, {0, 1, -1, -1}, {64, 1, 0, 1}};
  const std::vector<LeagueMatch> second = {{64, 2, 1, 1}, {64, 2, -1, 0}};
  LeagueRatings want;
  for (const LeagueMatch& m : first) want.Rate(m);
  {
    auto sent = std::make_shared<SentPoints>();
    EmitterOptions emitter_options;
    emitter_options.batch_interval = absl::Milliseconds(10);
    Emitter emitter(std::make_unique<RecordingTransport>(sent),
                    emitter_options);
    LeagueGames games(dir, &emitter);
    ASSERT_OK(games.Record(first, 128));
    EXPECT_DOUBLE_EQ(games.rating().mu, want.Of(1).mu);
    EXPECT_GT(games.rating().mu, 25.0);
    ASSERT_OK(emitter.Flush(absl::Seconds(30)));
    ASSERT_EQ(sent->Named("league/rating").size(), 1u);
    EXPECT_DOUBLE_EQ(sent->Named("league/rating")[0].value(), want.Of(1).mu);
    const std::vector<MetricPoint> member = sent->Named("league/member_rating");
    ASSERT_EQ(member.size(), 1u);
    EXPECT_DOUBLE_EQ(member[0].value(), want.Of(-1).mu);
    ASSERT_EQ(member[0].labels_size(), 1);
    EXPECT_EQ(member[0].labels().at("member"), "m1");
  }
  // The run stopped while appending, and resumes from its checkpoint at
  // 64 env steps: the third game (of a segment begun at 64) is not in it.
  { std::ofstream(path, std::ios::app) << "128,2,1,"; }
  want = LeagueRatings();
  for (const LeagueMatch& m : {first[0], first[1]}) want.Rate(m);
  for (const LeagueMatch& m : second) want.Rate(m);
  auto sent = std::make_shared<SentPoints>();
  EmitterOptions emitter_options;
  emitter_options.batch_interval = absl::Milliseconds(10);
  Emitter emitter(std::make_unique<RecordingTransport>(sent), emitter_options);
  LeagueGames resumed(dir, &emitter);
  resumed.StartAt(64);
  ASSERT_OK(resumed.Record(second, 128));
  EXPECT_EQ(resumed.games(), 4);
  EXPECT_DOUBLE_EQ(resumed.rating().mu, want.Of(2).mu);
  EXPECT_DOUBLE_EQ(resumed.ratings().Of(0).mu, want.Of(0).mu);
  ASSERT_OK(emitter.Flush(absl::Seconds(30)));
  EXPECT_EQ(sent->Named("league/games").back().value(), 4);
  EXPECT_DOUBLE_EQ(sent->Named("league/rating").back().value(), want.Of(2).mu);
  EXPECT_EQ(ReadFile(path),
            "env_steps,learner_version,opponent_version,learner_return\n"
            "0,1,0,1\n0,1,-1,-1\n64,2,1,1\n64,2,-1,0\n");
  // A run begun afresh in the same directory keeps none of those games.
  LeagueGames fresh(dir, nullptr);
  ASSERT_OK(fresh.Record({{0, 1, 0, -1}}, 64));
  EXPECT_EQ(fresh.games(), 1);
  EXPECT_LT(fresh.rating().mu, 25.0);
  EXPECT_EQ(ReadFile(path),
            "env_steps,learner_version,opponent_version,learner_return\n"
            "0,1,0,-1\n");
}

// A file that is not matches (statistics, not training state) never stops
// the run: it is set aside, kept, and a new one begun. An empty one (a
// crash before its header) is given its header.
TEST(LeagueGamesTest, AMalformedMatchesFileIsSetAside) {
  const std::string dir = MakeTestDir("bad_matches");
  const std::string path = dir + "/league/matches.csv";
  std::filesystem::create_directories(dir + "/league");
  { std::ofstream(path) << "not,a,header\n"; }
  LeagueGames games(dir, nullptr);
  games.StartAt(16);
  ASSERT_OK(games.Record({{16, 1, 0, 1}}, 32));
  EXPECT_EQ(ReadFile(path + ".unreadable"), "not,a,header\n");
  EXPECT_EQ(ReadFile(path),
            "env_steps,learner_version,opponent_version,learner_return\n"
            "16,1,0,1\n");
  { std::ofstream truncate(path); }
  LeagueGames empty(dir, nullptr);
  ASSERT_OK(empty.Record({{0, 1, 0, 0}}, 16));
  EXPECT_EQ(ReadFile(path),
            "env_steps,learner_version,opponent_version,learner_return\n"
            "0,1,0,0\n");
}

}  // namespace
}  // namespace rl
