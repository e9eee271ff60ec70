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
// (and the counts) from matches.csv, its torn last line cut off first.
TEST(LeagueGamesTest, RatingsAreEmittedAndRebuiltWhenTheRunResumes) {
  const std::string dir = MakeTestDir("league_games");
  const std::string path = dir + "/league/matches.csv";
  const std::vector<LeagueMatch> first = {
      {0, 1, 0, 1}, {0, 1, -1, -1}, {0, 1, 0, 1}};
  const std::vector<LeagueMatch> second = {{128, 2, 1, 1}, {128, 2, -1, 0}};
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
  // The run stopped while appending.
  { std::ofstream(path, std::ios::app) << "128,2,1,"; }
  for (const LeagueMatch& m : second) want.Rate(m);
  auto sent = std::make_shared<SentPoints>();
  EmitterOptions emitter_options;
  emitter_options.batch_interval = absl::Milliseconds(10);
  Emitter emitter(std::make_unique<RecordingTransport>(sent), emitter_options);
  LeagueGames resumed(dir, &emitter);
  ASSERT_OK(resumed.Record(second, 256));
  EXPECT_EQ(resumed.games(), 5);
  EXPECT_DOUBLE_EQ(resumed.rating().mu, want.Of(2).mu);
  EXPECT_DOUBLE_EQ(resumed.ratings().Of(0).mu, want.Of(0).mu);
  ASSERT_OK(emitter.Flush(absl::Seconds(30)));
  EXPECT_EQ(sent->Named("league/games").back().value(), 5);
  EXPECT_DOUBLE_EQ(sent->Named("league/rating").back().value(), want.Of(2).mu);
  EXPECT_EQ(ReadFile(path),
            "env_steps,learner_version,opponent_version,learner_return\n"
            "0,1,0,1\n0,1,-1,-1\n0,1,0,1\n128,2,1,1\n128,2,-1,0\n");
}

// A file that is not matches stops the learner with its line named, not
// overwritten.
TEST(LeagueGamesTest, AMalformedMatchesFileIsNamed) {
  const std::string dir = MakeTestDir("bad_matches");
  std::filesystem::create_directories(dir + "/league");
  { std::ofstream(dir + "/league/matches.csv") << "not,a,header\n"; }
  LeagueGames games(dir, nullptr);
  EXPECT_THAT(games.Record({{0, 1, 0, 1}}, 16),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(ReadFile(dir + "/league/matches.csv"), "not,a,header\n");
}

}  // namespace
}  // namespace rl
