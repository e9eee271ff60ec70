#include "learner/league_games.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "common/league_matches.h"
#include "telemetry/client/emitter.h"

namespace rl {

absl::Status LeagueGames::Record(const SegmentBatch& batch, int64_t env_steps) {
  std::vector<LeagueMatch> matches;
  for (const auto& s : batch) {
    for (const LeagueMatchResult& m : s->proto->league_matches()) {
      matches.push_back(LeagueMatch{m.env_steps(), m.learner_version(),
                                    m.opponent_version(), m.learner_return()});
      recent_.push_back(m.learner_return());
      if (recent_.size() > kRecentGames) recent_.pop_front();
      newest_opponent_ = std::max(newest_opponent_, m.opponent_version());
    }
  }
  if (matches.empty()) return absl::OkStatus();
  games_ += static_cast<int64_t>(matches.size());
  if (emitter_ != nullptr) {
    double won = 0, drew = 0;
    for (const float r : recent_) {
      won += r > 0 ? 1 : 0;
      drew += r == 0 ? 1 : 0;
    }
    const double n = static_cast<double>(recent_.size());
    emitter_->Emit("league/won", env_steps, won / n);
    emitter_->Emit("league/drew", env_steps, drew / n);
    emitter_->Emit("league/lost", env_steps, (n - won - drew) / n);
    emitter_->Emit("league/games", env_steps, static_cast<double>(games_));
    emitter_->Emit("league/newest_opponent", env_steps,
                   static_cast<double>(newest_opponent_));
  }
  if (run_dir_.empty()) return absl::OkStatus();
  return AppendLeagueMatches(
      (std::filesystem::path(run_dir_) / "league" / "matches.csv").string(),
      matches);
}

}  // namespace rl
