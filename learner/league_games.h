// A league run's games as the learner and rl_local keep them
// (RunSpec.league; the actors play them, learner/run_intake.h checks
// them): appended to <run_dir>/league/matches.csv (the file `rlctl league`
// rates) and rated as it rates them (common/league_ratings.h). Emitted:
// how the trained policy fared in the last 100 as league/won, league/drew,
// league/lost (fractions), league/games (all so far),
// league/newest_opponent (a version), league/rating (the rating, mu, of
// the version being trained) and league/member_rating labelled member=m1,
// m2, ... for the fixed members. A run that resumes rebuilds all of it
// from its matches.csv, as far as the checkpoint it resumed from (StartAt).
// Rank 0's alone in a gang: its own actors' games, a sample of the
// league's.
#ifndef RL_LEARNER_LEAGUE_GAMES_H_
#define RL_LEARNER_LEAGUE_GAMES_H_

#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/league_matches.h"
#include "common/league_ratings.h"
#include "learner/segment_intake.h"

namespace rl {

class Emitter;

class LeagueGames {
 public:
  // `run_dir` empty: no file; `emitter` null: no figures (not owned).
  LeagueGames(std::string run_dir, Emitter* emitter)
      : run_dir_(std::move(run_dir)), emitter_(emitter) {}

  // Where the run starts: 0 afresh, or the env steps of the checkpoint it
  // resumed from. Before the first games the matches file is read back up
  // to there (games from segments begun at or after it, of updates the
  // checkpoint does not hold or of an earlier run in the same directory,
  // are cut off the file); 0 until told.
  void StartAt(int64_t env_steps) { start_env_steps_ = env_steps; }

  // The games that ended in `batch`'s segments, at the run's `env_steps`;
  // the file's write error, if any.
  absl::Status Record(const SegmentBatch& batch, int64_t env_steps);
  absl::Status Record(const std::vector<LeagueMatch>& matches,
                      int64_t env_steps);

  // The trained policy's rating: its newest version's (a new player's
  // before any game).
  PlayerRating rating() const { return ratings_.Of(newest_learner_); }
  const LeagueRatings& ratings() const { return ratings_; }
  int64_t games() const { return games_; }

 private:
  static constexpr size_t kRecentGames = 100;
  // Before the first games: the matches a run dir already holds before
  // StartAt's env steps (a resumed run's), the rest (and a torn last line)
  // cut off. A file that does not read as matches is set aside
  // (matches.csv.unreadable) with a warning, and a new one begun.
  absl::Status Resume();
  void Count(const LeagueMatch& match);

  const std::string run_dir_;
  Emitter* const emitter_;
  bool resumed_ = false;
  int64_t start_env_steps_ = 0;
  std::deque<float> recent_;  // the trained seat's returns
  int64_t games_ = 0;
  int64_t newest_opponent_ = 0;
  int64_t newest_learner_ = 0;
  LeagueRatings ratings_;
};

}  // namespace rl

#endif  // RL_LEARNER_LEAGUE_GAMES_H_
