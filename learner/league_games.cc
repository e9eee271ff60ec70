#include "learner/league_games.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "telemetry/client/emitter.h"

namespace rl {
namespace {

std::string MatchesPath(const std::string& run_dir) {
  return (std::filesystem::path(run_dir) / "league" / "matches.csv").string();
}

}  // namespace

absl::Status LeagueGames::Resume() {
  resumed_ = true;
  if (run_dir_.empty()) return absl::OkStatus();
  const std::string path = MatchesPath(run_dir_);
  int64_t torn = 0;
  absl::StatusOr<std::vector<LeagueMatch>> read =
      ReadLeagueMatches(path, &torn);
  std::error_code ec;
  if (!read.ok()) {
    // Statistics, not training state: set aside, never fatal.
    const std::string aside = path + ".unreadable";
    std::filesystem::rename(path, aside, ec);
    if (ec) {
      return absl::InternalError(
          absl::StrCat("league: ", path, " does not read as matches (",
                       read.status().message(),
                       ") and cannot be set aside: ", ec.message()));
    }
    RL_LOG_WARNING(
        "league: {} does not read as matches ({}); set aside as {}, and the "
        "ratings begin again",
        path, std::string(read.status().message()), aside);
    return absl::OkStatus();
  }
  std::vector<LeagueMatch> kept;
  for (const LeagueMatch& m : *read) {
    if (m.env_steps < start_env_steps_) kept.push_back(m);
  }
  const size_t dropped = read->size() - kept.size();
  if (torn > 0 || dropped > 0) {
    // Rewritten whole (a new file renamed over the old one), so a crash
    // here leaves one or the other.
    const std::string fresh = path + ".new";
    std::filesystem::remove(fresh, ec);
    if (!kept.empty()) RETURN_IF_ERROR(AppendLeagueMatches(fresh, kept));
    if (kept.empty()) {
      std::filesystem::remove(path, ec);
    } else {
      std::filesystem::rename(fresh, path, ec);
    }
    if (ec) {
      return absl::InternalError(
          absl::StrCat("league: cannot rewrite ", path, ": ", ec.message()));
    }
    if (torn > 0) {
      RL_LOG_WARNING(
          "league: {} ended in a line cut short ({} bytes), left out", path,
          torn);
    }
    if (dropped > 0) {
      RL_LOG_WARNING(
          "league: {} matches in {} are of segments begun at or after this "
          "run's start ({} env steps; an earlier run's, or updates the "
          "checkpoint does not hold): cut off",
          dropped, path, start_env_steps_);
    }
  }
  for (const LeagueMatch& m : kept) Count(m);
  if (!kept.empty()) {
    RL_LOG_INFO(
        "league: resumed from {} matches in {}; the trained policy (v{}) "
        "rates {:.2f}",
        kept.size(), path, newest_learner_, rating().mu);
  }
  return absl::OkStatus();
}

void LeagueGames::Count(const LeagueMatch& m) {
  recent_.push_back(m.learner_return);
  if (recent_.size() > kRecentGames) recent_.pop_front();
  newest_opponent_ = std::max(newest_opponent_, m.opponent_version);
  newest_learner_ = std::max(newest_learner_, m.learner_version);
  ratings_.Rate(m);
  games_ += 1;
}

absl::Status LeagueGames::Record(const SegmentBatch& batch, int64_t env_steps) {
  std::vector<LeagueMatch> matches;
  for (const auto& s : batch) {
    for (const LeagueMatchResult& m : s->proto->league_matches()) {
      matches.push_back(LeagueMatch{m.env_steps(), m.learner_version(),
                                    m.opponent_version(), m.learner_return()});
    }
  }
  return Record(matches, env_steps);
}

absl::Status LeagueGames::Record(const std::vector<LeagueMatch>& matches,
                                 int64_t env_steps) {
  if (!resumed_) RETURN_IF_ERROR(Resume());
  if (matches.empty()) return absl::OkStatus();
  for (const LeagueMatch& m : matches) Count(m);
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
    emitter_->Emit("league/rating", env_steps, rating().mu);
    for (const auto& [version, r] : ratings_.players()) {
      if (version >= 0) break;  // members first: they are negative
      emitter_->Emit("league/member_rating", env_steps, r.mu,
                     {{"member", absl::StrCat("m", -version)}});
    }
  }
  if (run_dir_.empty()) return absl::OkStatus();
  return AppendLeagueMatches(MatchesPath(run_dir_), matches);
}

}  // namespace rl
