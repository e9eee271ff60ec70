#include "common/league_ratings.h"

#include <vector>

#include "gtest/gtest.h"

namespace rl {
namespace {

// OpenSkill 6.2.0's own figures for these matches, from
//   python/rlservice/league.py's rate(matches)
// (a seeded draw of versions 1-5 against 0, their predecessor, themselves
// and members -1 and -2, with wins, losses, draws and fractional returns).
TEST(LeagueRatingsTest, MatchesOpenSkillBradleyTerryFull) {
  const std::vector<LeagueMatch> matches = {
      {0, 1, 1, -1},       {100, 1, -1, 1},      {200, 1, 0, -0.25},
      {300, 1, 0, 0},      {400, 1, -2, 1},      {500, 1, -2, -1},
      {600, 2, 0, 1},      {700, 2, -1, 0.5},    {800, 2, 0, -1},
      {900, 2, 0, -0.25},  {1000, 2, -1, 1},     {1100, 2, -2, 1},
      {1200, 3, 2, -0.25}, {1300, 3, 0, -0.25},  {1400, 3, -2, 0.5},
      {1500, 3, 0, -1},    {1600, 3, 0, -0.25},  {1700, 3, 2, 0},
      {1800, 4, -1, -1},   {1900, 4, -2, 1},     {2000, 4, -2, 0},
      {2100, 4, -2, -1},   {2200, 4, 0, -0.25},  {2300, 4, -2, -1},
      {2400, 5, 5, 1},     {2500, 5, -2, 1},     {2600, 5, -2, 1},
      {2700, 5, -2, -1},   {2800, 5, -1, -0.25}, {2900, 5, -1, 0},
  };
  struct Want {
    int64_t version;
    double mu, sigma;
    int64_t games;
  };
  const std::vector<Want> want = {
      {-2, 22.638319582262053, 6.2212962483828802, 11},
      {-1, 23.825776002975157, 6.9710603713729871, 6},
      {0, 34.894634550826801, 6.570178655357422, 9},
      {1, 24.772811618734814, 7.2019638991164987, 5},
      {2, 29.419379896233941, 6.651220611904626, 8},
      {3, 21.40767587064331, 6.9292045769188322, 6},
      {4, 17.51475466122044, 6.9002004474405689, 6},
      {5, 23.38948128418507, 7.0273618261204938, 5},
  };
  LeagueRatings ratings;
  for (const LeagueMatch& m : matches) ratings.Rate(m);
  ASSERT_EQ(ratings.players().size(), want.size());
  for (const Want& w : want) {
    const PlayerRating r = ratings.Of(w.version);
    EXPECT_NEAR(r.mu, w.mu, 1e-9) << "version " << w.version;
    EXPECT_NEAR(r.sigma, w.sigma, 1e-9) << "version " << w.version;
    EXPECT_EQ(r.games, w.games) << "version " << w.version;
  }
}

TEST(LeagueRatingsTest, AWinRaisesTheWinnerAndANewPlayerStartsAt25) {
  LeagueRatings ratings;
  EXPECT_DOUBLE_EQ(ratings.Of(7).mu, 25.0);
  EXPECT_DOUBLE_EQ(ratings.Of(7).ordinal(), 0.0);
  ratings.Rate({0, 1, 0, 1.0});
  EXPECT_GT(ratings.Of(1).mu, 25.0);
  EXPECT_LT(ratings.Of(0).mu, 25.0);
  EXPECT_LT(ratings.Of(1).sigma, 25.0 / 3.0);
  // Against itself: a player, unmoved.
  ratings.Rate({0, 2, 2, 1.0});
  EXPECT_DOUBLE_EQ(ratings.Of(2).mu, 25.0);
  EXPECT_EQ(ratings.Of(2).games, 0);
  EXPECT_EQ(ratings.players().size(), 3u);
}

}  // namespace
}  // namespace rl
