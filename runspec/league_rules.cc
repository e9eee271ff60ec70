#include "runspec/league_rules.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json_quote.h"
#include "runspec/field_problems.h"
#include "runspec/policy_rules.h"

namespace rl {
namespace {}  // namespace

void ApplyLeagueDefaults(LeagueSpec* league) {
  if (league->snapshot_interval() == 0) league->set_snapshot_interval(10);
  if (league->pool_size() == 0) league->set_pool_size(20);
  if (league->sampling().empty()) league->set_sampling("pfsp");
}

std::vector<std::string> LeagueProblems(const RunSpec& spec) {
  std::vector<std::string> out;
  if (!spec.has_league()) return out;
  const LeagueSpec& league = spec.league();
  if (spec.env().agents_per_env() < 2) {
    out.push_back(FieldProblem(
        "league",
        "needs an environment of several agents (env.agents_per_env >= 2): "
        "the trained policy plays one seat of each, its frozen versions the "
        "others",
        absl::StrCat("env.agents_per_env ", spec.env().agents_per_env())));
  }
  if (league.snapshot_interval() < 1 || league.snapshot_interval() > 1000000) {
    out.push_back(FieldProblem("league.snapshot_interval",
                               "must be in [1, 1000000] updates",
                               league.snapshot_interval()));
  }
  if (league.pool_size() < 1 || league.pool_size() > 1000) {
    out.push_back(FieldProblem("league.pool_size", "must be in [1, 1000]",
                               league.pool_size()));
  }
  if (std::find(std::begin(kLeagueSamplings), std::end(kLeagueSamplings),
                league.sampling()) == std::end(kLeagueSamplings)) {
    out.push_back(FieldProblem(
        "league.sampling",
        absl::StrCat("must be one of ", absl::StrJoin(kLeagueSamplings, ", ")),
        JsonQuote(league.sampling())));
  }
  double shares = 0;
  std::set<std::string> names;
  for (int i = 0; i < league.members_size(); ++i) {
    const LeagueMember& m = league.members(i);
    const std::string path = absl::StrCat("league.members[", i, "]");
    if (!IsPolicyName(m.name())) {
      out.push_back(FieldProblem(path + ".name",
                                 "1-32 characters of a-z, 0-9, _ and -",
                                 JsonQuote(m.name())));
    } else if (!names.insert(m.name()).second) {
      out.push_back(FieldProblem(path + ".name", "already names another member",
                                 JsonQuote(m.name())));
    }
    if (m.policy_file().empty()) {
      out.push_back(FieldProblem(
          path + ".policy_file",
          "the member's TorchScript file (rl_local export writes one)",
          "none"));
    }
    if (!(m.share() > 0 && m.share() <= 1)) {
      out.push_back(FieldProblem(path + ".share",
                                 "the fraction of games it plays, in (0, 1]",
                                 m.share()));
    } else {
      shares += m.share();
    }
  }
  if (shares > 1 + 1e-9) {
    out.push_back(FieldProblem("league.members",
                               "their shares together are more than every game",
                               shares));
  }
  if (HasRecurrentCore(spec.policy())) {
    out.push_back(FieldProblem(
        "league",
        "a recurrent policy (policy.core) cannot play in a league in this "
        "version: the frozen opponents carry no state",
        JsonQuote(spec.policy().core())));
  }
  if (spec.policy().central_value()) {
    out.push_back(FieldProblem(
        "league",
        "not with a central critic (policy.central_value) in this version: "
        "a segment carries only the trained seats' rows",
        "true"));
  }
  if (spec.ppo().num_minibatches() >= 1 && spec.env().agents_per_env() >= 2) {
    // The update learns from the trained seats only: one row in A.
    const int64_t rows = static_cast<int64_t>(spec.envs_per_actor()) /
                         spec.env().agents_per_env() * spec.segment_length();
    if (rows < spec.ppo().num_minibatches()) {
      out.push_back(FieldProblem(
          "ppo.num_minibatches",
          absl::StrCat("more than the ", rows,
                       " steps of the trained seats in a segment (league: "
                       "one row in env.agents_per_env is learned from)"),
          spec.ppo().num_minibatches()));
    }
  }
  return out;
}

}  // namespace rl
