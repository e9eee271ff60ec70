// Sweeps run by the coordinator (docs/sweeps.md): a sweep file parsed and
// expanded into trials (runspec/sweep_spec.h), stored whole in the
// coordinator's store, and driven from the coordinator's tick:
//
//   - trials are ordinary runs of the sweep's owner named "<sweep>-<index>"
//     (priorities, quotas and placement as for any run), at most
//     `concurrency` of them unfinished at once, each submitted with the
//     idempotency key "<sweep id>/<index>" so that a restart between the
//     submit and the sweep's write submits nothing twice;
//   - a trial's score is the best of its run's last `metric.last_points`
//     progress reports of the mean return (learner/mean_return);
//   - early stopping (asha, median) decides as each trial reaches a rung,
//     against the scores recorded at that rung so far (asynchronous, as Ray
//     Tune's ASHA): a loser's run ends CANCELLED naming the rung and why;
//   - population-based training (method pbt) runs in rounds of
//     pbt.interval_steps: each member's round is a run of its own
//     (idempotency key "<sweep id>/<index>/round-<r>") that starts from the
//     newest
//     checkpoint of its last round's run (or of the better member's it
//     copied) and ends at the round's env steps; when all ended, the worst
//     copy the best and explore (runspec/pbt.h decides, as for rl_local);
//   - the sweep ends SUCCEEDED with its best trial (the best configuration
//     by the mean score of its succeeded trials), FAILED when none
//     succeeded, or CANCELLED with its unfinished trials.
//
// Unfinished sweeps are recovered from the store at Create. No gRPC: the
// service calls this. The pbt rounds are in sweep_pbt_rounds.cc.
#ifndef RL_COORDINATOR_SWEEP_MANAGER_H_
#define RL_COORDINATOR_SWEEP_MANAGER_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/coordinator_core.h"
#include "coordinator/run_store.h"
#include "proto/coordinator.pb.h"
#include "runspec/sweep_spec.h"

namespace rl {

// The one metric a coordinator sweep scores (its runs' progress).
inline constexpr char kSweepSeries[] = "learner/mean_return";
// ListSweeps' most, and the most trials it includes in all.
inline constexpr int kMaxListedSweeps = 100;
inline constexpr int kMaxListedTrials = 10000;
// A pbt sweep's most rounds (budget / pbt.interval_steps, rounded up): the
// sweep stores every round's run and copy of each trial.
inline constexpr int kMaxPbtRounds = 100;

class SweepManager {
 public:
  // `core` and `store` (the core's) outlive it. An owner may have at most
  // `max_unfinished_per_owner` sweeps running at once (0: no limit).
  static absl::StatusOr<std::unique_ptr<SweepManager>> Create(
      CoordinatorCore* core, RunStore* store,
      int max_unfinished_per_owner = 16);

  // Parses and validates the sweep file (INVALID_ARGUMENT naming the
  // field path, prefixed with its name), stores the sweep RUNNING and
  // submits its first trials as `owner`'s runs. RESOURCE_EXHAUSTED when
  // `owner` has max_unfinished_per_owner sweeps running.
  absl::StatusOr<Sweep> Submit(const SubmitSweepRequest& request,
                               const std::string& owner);
  // NOT_FOUND for an unknown id.
  absl::StatusOr<Sweep> Get(const std::string& sweep_id);
  absl::StatusOr<ListSweepsResponse> List();
  // Cancels its unfinished trials' runs; idempotent. Only the sweep's
  // owner or an admin (PERMISSION_DENIED otherwise); the reason names who.
  absl::StatusOr<Sweep> Cancel(const std::string& sweep_id,
                               const Requester& by = {});

  // A configuration for a sweep of method external (AddSweepTrialRequest),
  // from its owner or an admin (PERMISSION_DENIED otherwise).
  absl::StatusOr<Sweep> AddTrial(const AddSweepTrialRequest& request,
                                 const Requester& by = {});

  // Follows every unfinished sweep's trials: scores, rungs, next trials,
  // the end. Called by the service after the core's Tick.
  void Tick();

 private:
  // An unfinished sweep and its trials' run specs (expanded again from the
  // stored spec after a restart: the expansion is deterministic).
  struct Live {
    Sweep sweep;
    std::vector<SweepTrial> expanded;
    // The last policy version scored per trial (a progress report counts
    // as one point once). Not stored: a recovered trial's is unknown until
    // its run's report is matched with its last stored point.
    std::map<int, int64_t> scored_version;
    std::string stored;  // the sweep as last written
  };

  SweepManager(CoordinatorCore* core, RunStore* store,
               int max_unfinished_per_owner)
      : core_(core),
        store_(store),
        max_unfinished_per_owner_(max_unfinished_per_owner) {}
  absl::Status Recover();
  // live->expanded again from its trials' parameters.
  static absl::Status RebuildTrials(Live* live);
  // A trial made from `expanded`, appended (QUEUED, not submitted).
  static void AppendTrial(Live* live, const SweepTrial& expanded);
  // Advances `live` one step; writes it to the store if it changed. True
  // when the sweep ended.
  bool AdvanceLocked(Live* live) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // AdvanceLocked on the live sweep `sweep_id` (forgotten once it ended):
  // the sweep after it.
  Sweep AdvanceOneLocked(const std::string& sweep_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // FollowTrialLocked, then a run that stopped at the round's end makes
  // its member wait (QUEUED, rounds_done) for the round's others. Whether
  // the member's run of this round is still under way.
  bool FollowRoundLocked(Live* live, Trial* trial)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Method pbt: follows the round's runs, submits the members' runs of
  // the round (at most `concurrency` at once) and, once every one ended,
  // plans the next round. True when the sweep ended.
  bool AdvancePbtLocked(Live* live) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The round that ended at `target` env steps: the worst members copy the
  // best (runspec/pbt.h decides), every member that goes on is QUEUED for
  // the next round. False when no member goes on.
  bool PlanRoundLocked(Live* live, int64_t target)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The member's run of the sweep's round, starting from its
  // start_from_run and ending at `stop_env_steps` (0: the budget).
  void SubmitRoundLocked(Live* live, Trial* trial, int64_t stop_env_steps)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The trial's state, env steps and score from its run (and rungs); `read`
  // (if given) gets the run as read.
  void FollowTrialLocked(Live* live, Trial* trial, Run* read = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SubmitTrialLocked(Live* live, Trial* trial)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FinishLocked(Live* live) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WriteLocked(Live* live) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // WriteLocked's write, its failure returned rather than logged.
  absl::Status StoreLocked(Live* live) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Cancels `trial`'s run for `reason` and takes its end as the trial's;
  // false (logged, the trial left as it is) when the run cannot be.
  bool CancelTrialRun(const Sweep& sweep, Trial* trial,
                      const std::string& reason);

  CoordinatorCore* const core_;
  RunStore* const store_;
  const int max_unfinished_per_owner_;
  absl::Mutex mu_;
  std::map<std::string, Live> live_ ABSL_GUARDED_BY(mu_);
  // Per owner: submits past the limit's check and not yet in live_ (two at
  // once must not both pass --max_sweeps_per_user).
  std::map<std::string, int> submitting_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rl

#endif  // RL_COORDINATOR_SWEEP_MANAGER_H_
