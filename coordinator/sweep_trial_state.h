// What a sweep's trial is doing, for the sweep manager's files
// (sweep_manager.cc, sweep_pbt_rounds.cc, sweep_recovery.cc): ended, and for
// population-based training, whether it runs in the sweep's round or waits for
// its others.
#ifndef RL_COORDINATOR_SWEEP_TRIAL_STATE_H_
#define RL_COORDINATOR_SWEEP_TRIAL_STATE_H_

#include <cstdint>
#include <limits>

#include "proto/coordinator.pb.h"

namespace rl {

// SweepManager::Live::scored_version of a trial recovered with points: not
// known until its run's report is matched with its last stored point.
inline constexpr int64_t kRecovered = std::numeric_limits<int64_t>::min();

inline bool IsFinal(RunState s) {
  return s == SUCCEEDED || s == FAILED || s == CANCELLED;
}

inline bool IsPbt(const Sweep& sweep) { return sweep.spec().method() == "pbt"; }

// The trial has a run in the sweep's current round (for every method but
// pbt: a run at all). A pbt member between rounds has its last round's run
// (ended) and none yet in this one.
inline bool RunsThisRound(const Sweep& sweep, const Trial& trial) {
  if (trial.run_id().empty()) return false;
  return !IsPbt(sweep) || trial.round_run_ids_size() > sweep.pbt_round();
}

// A pbt member whose run of the current round reached the round's end: it
// waits (QUEUED) for the round's other members.
inline bool WaitsForTheRound(const Sweep& sweep, const Trial& trial) {
  return IsPbt(sweep) && trial.rounds_done() > sweep.pbt_round();
}

}  // namespace rl

#endif  // RL_COORDINATOR_SWEEP_TRIAL_STATE_H_
