#include "common/league_matches.h"

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

TEST(LeagueMatchesTest, AppendedMatchesReadBackInOrder) {
  const std::string path = MakeTestDir("matches") + "/league/matches.csv";
  ASSERT_OK_AND_ASSIGN(std::vector<LeagueMatch> none, ReadLeagueMatches(path));
  EXPECT_TRUE(none.empty());
  ASSERT_OK(AppendLeagueMatches(path, {{128, 1, 0, 1}, {128, 1, -2, -0.5}}));
  ASSERT_OK(AppendLeagueMatches(path, {{256, 2, 1, 0}}));
  int64_t torn = -1;
  ASSERT_OK_AND_ASSIGN(std::vector<LeagueMatch> read,
                       ReadLeagueMatches(path, &torn));
  EXPECT_EQ(torn, 0);
  ASSERT_EQ(read.size(), 3u);
  EXPECT_EQ(read[1].env_steps, 128);
  EXPECT_EQ(read[1].learner_version, 1);
  EXPECT_EQ(read[1].opponent_version, -2);
  EXPECT_FLOAT_EQ(read[1].learner_return, -0.5f);
  EXPECT_EQ(read[2].learner_version, 2);
}

// A write cut short leaves a last line without its newline: left out and
// measured, so a learner that resumes can cut it off before appending.
TEST(LeagueMatchesTest, ATornLastLineIsLeftOutAndABadLineNamed) {
  const std::string path = MakeTestDir("torn") + "/matches.csv";
  ASSERT_OK(AppendLeagueMatches(path, {{128, 1, 0, 1}}));
  { std::ofstream(path, std::ios::app) << "256,1,0,-"; }
  int64_t torn = -1;
  ASSERT_OK_AND_ASSIGN(std::vector<LeagueMatch> read,
                       ReadLeagueMatches(path, &torn));
  EXPECT_EQ(read.size(), 1u);
  EXPECT_EQ(torn, 9);
  { std::ofstream(path, std::ios::app) << "\n256,1,zero,1\n"; }
  EXPECT_THAT(ReadLeagueMatches(path),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(path + ":3: not a match: \"256,1,0,-\"")));
  { std::ofstream(path) << "steps,a,b\n"; }
  EXPECT_THAT(ReadLeagueMatches(path),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(path + ":1: expected the header")));
}

}  // namespace
}  // namespace rl
