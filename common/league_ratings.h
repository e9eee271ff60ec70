// Ratings of a league's players from its matches (common/league_matches.h),
// as `rlctl league` computes them with OpenSkill: each version of the pool
// and each fixed member (version -(k + 1)) is one player, rated match by
// match in the order they were played with OpenSkill 6.2's BradleyTerryFull
// model at its defaults (mu 25, sigma 25/3, beta 25/6, tau 25/300, kappa
// 1e-4). The learner and rl_local keep these to emit league/rating; the
// test holds OpenSkill's own figures for the same matches.
#ifndef RL_COMMON_LEAGUE_RATINGS_H_
#define RL_COMMON_LEAGUE_RATINGS_H_

#include <cstdint>
#include <map>

#include "common/league_matches.h"

namespace rl {

struct PlayerRating {
  double mu = 25.0;
  double sigma = 25.0 / 3.0;
  int64_t games = 0;  // as the trained policy and as an opponent

  // The conservative rating, mu - 3 sigma.
  double ordinal() const { return mu - 3 * sigma; }
};

class LeagueRatings {
 public:
  // Rates `match`: a positive return is the trained policy's win, a
  // negative one its loss, zero a draw. A version against itself says
  // nothing of either (both become players, neither moves).
  void Rate(const LeagueMatch& match);

  // The player's rating; a version not seen yet rates as a new player.
  PlayerRating Of(int64_t version) const;

  // Every player seen, by version (members first: they are negative).
  const std::map<int64_t, PlayerRating>& players() const { return players_; }

 private:
  std::map<int64_t, PlayerRating> players_;
};

}  // namespace rl

#endif  // RL_COMMON_LEAGUE_RATINGS_H_
