// A sweep on this machine (`rl_local sweep`): the trials of a sweep file
// (runspec/sweep_spec.h) trained by LocalTrainer, `concurrency` at a time,
// rung by rung: every live trial trains to the next rung's env steps, the
// early-stopping rule (ASHA or median) stops the losers there with the
// reason, and the rest go on to their budget. Method pbt trains the
// population in rounds instead: after each, its worst members go on from
// a better member's checkpoint with explored hyperparameters
// (runspec/pbt.h), each copy recorded in the trial's lineage. The metric is the
// trainer's mean return of the last 100 episodes (learner/mean_return); a sweep
// naming another series needs the coordinator and is refused.
#ifndef RL_TRAINER_LOCAL_SWEEP_H_
#define RL_TRAINER_LOCAL_SWEEP_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/sweep.pb.h"
#include "runspec/sweep_spec.h"

namespace rl {

struct LocalSweepOptions {
  // Each trial's checkpoints under <sweep_dir>/<trial name>; empty: none.
  std::string sweep_dir;
  int env_threads = 1;
  // Progress lines (a trial stopped, a rung decided, a trial done).
  std::function<void(const std::string&)> log;
};

struct TrialOutcome {
  SweepTrial trial;
  // "DONE" (its budget or target), "STOPPED" (early, at a rung) or
  // "FAILED" (its run failed).
  std::string state;
  std::string reason;  // why STOPPED or FAILED
  double score = 0;    // NaN: no episode ended
  int64_t env_steps = 0;
  bool target_reached = false;
  std::string checkpoint;  // its last checkpoint, if any
  // pbt: each copy it made, in order ("at 20000 env steps: copied trial 3
  // (score 212.40, its own 31.00); ppo.learning_rate 0.001 -> 0.0012
  // (x1.2)"); trial.parameters are those it ended with.
  std::vector<std::string> lineage;
};

// The metric's series that rl_local can score.
inline constexpr char kLocalSweepSeries[] = "learner/mean_return";

// Runs every trial of `spec` (resolved). INVALID_ARGUMENT for a metric
// rl_local cannot score; a trial's own failure is its outcome, not the
// sweep's.
absl::StatusOr<std::vector<TrialOutcome>> RunLocalSweep(
    const SweepSpec& spec, const LocalSweepOptions& options);

// `rl_local sweep`: loads the sweep file, runs it with progress on stdout,
// prints the table and writes it to <sweep_dir>/results.txt (sweep_dir
// empty: runs/<sweep name>). Errors of the file start with its path.
absl::StatusOr<std::vector<TrialOutcome>> RunLocalSweepFile(
    const std::string& path, std::string sweep_dir, int env_threads);

// The outcomes as a table, best first: trial, state, score, env steps,
// then one column per parameter; the lineage of each pbt trial that
// copied another; and the best configuration (its seeds' mean) on the
// last line.
std::string SweepTable(const SweepSpec& spec,
                       const std::vector<TrialOutcome>& outcomes);

}  // namespace rl

#endif  // RL_TRAINER_LOCAL_SWEEP_H_
