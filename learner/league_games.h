// A league run's games as the learner keeps them (RunSpec.league; the
// actors play them, learner/run_intake.h checks them): appended to
// <run_dir>/league/matches.csv (the file `rlctl league` rates), and how
// the trained policy fared in the last 100 emitted as league/won,
// league/drew, league/lost (fractions), league/games (all so far) and
// league/newest_opponent (a version). Rank 0's alone in a gang: its own
// actors' games, a sample of the league's.
#ifndef RL_LEARNER_LEAGUE_GAMES_H_
#define RL_LEARNER_LEAGUE_GAMES_H_

#include <cstdint>
#include <deque>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "learner/segment_intake.h"

namespace rl {

class Emitter;

class LeagueGames {
 public:
  // `run_dir` empty: no file; `emitter` null: no figures (not owned).
  LeagueGames(std::string run_dir, Emitter* emitter)
      : run_dir_(std::move(run_dir)), emitter_(emitter) {}

  // The games that ended in `batch`'s segments, at the run's `env_steps`;
  // the file's write error, if any.
  absl::Status Record(const SegmentBatch& batch, int64_t env_steps);

 private:
  static constexpr size_t kRecentGames = 100;
  const std::string run_dir_;
  Emitter* const emitter_;
  std::deque<float> recent_;  // the trained seat's returns
  int64_t games_ = 0;
  int64_t newest_opponent_ = 0;
};

}  // namespace rl

#endif  // RL_LEARNER_LEAGUE_GAMES_H_
