// A league's matches (RunSpec.league): each finished game of the trained
// policy against a frozen version, kept in <run_dir>/league/matches.csv
// by rl_local and by the learner (from its actors' segments); `rlctl
// league` rates the versions from it.
#ifndef RL_COMMON_LEAGUE_MATCHES_H_
#define RL_COMMON_LEAGUE_MATCHES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace rl {

// A finished game: the trained policy (about to become version
// `learner_version`) against frozen `opponent_version`.
struct LeagueMatch {
  int64_t env_steps = 0;  // when the segment it ended in began
  int64_t learner_version = 0;
  int64_t opponent_version = 0;
  float learner_return = 0;
};

// Appends `matches` to the CSV file `path` (env_steps, learner_version,
// opponent_version, learner_return), writing its header and directory
// first where it is new.
absl::Status AppendLeagueMatches(const std::string& path,
                                 const std::vector<LeagueMatch>& matches);

// The matches of the CSV file `path` in the order they were written; none
// when it does not exist. A last line without its newline (a write cut
// short) is left out, its size in `*torn_bytes` (when given; else 0).
// INVALID_ARGUMENT naming path:line for a line that is not a match or a
// header that is not AppendLeagueMatches's.
absl::StatusOr<std::vector<LeagueMatch>> ReadLeagueMatches(
    const std::string& path, int64_t* torn_bytes = nullptr);

}  // namespace rl

#endif  // RL_COMMON_LEAGUE_MATCHES_H_
