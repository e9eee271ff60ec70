// The rules of a run's league block (RunSpec.league, self-play against
// frozen past versions): its defaults and its checks against the rest of
// the run.
#ifndef RL_RUNSPEC_LEAGUE_RULES_H_
#define RL_RUNSPEC_LEAGUE_RULES_H_

#include <string>
#include <vector>

#include "proto/common.pb.h"

namespace rl {

// The opponent samplings a league may name.
inline constexpr const char* kLeagueSamplings[] = {"pfsp", "uniform", "latest"};

// Fills a present league block's left-out fields: snapshot_interval 10,
// pool_size 20, sampling "pfsp". A run without one is left as it is.
void ApplyLeagueDefaults(LeagueSpec* league);

// Each problem of `spec`'s league block as "field.path: what is wrong (got
// value)"; empty without a league or with none.
std::vector<std::string> LeagueProblems(const RunSpec& spec);

}  // namespace rl

#endif  // RL_RUNSPEC_LEAGUE_RULES_H_
