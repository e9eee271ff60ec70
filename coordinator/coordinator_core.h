// The coordinator's core, free of gRPC: runs (validated, stored durably,
// queued), workers (leases), and the placement loop that connects them.
//
// Data flow: SubmitRun -> validate -> RunStore (QUEUED) -> Scheduler queue;
// Tick (every ~200 ms): expire leases (a lost learner sends its run back to
// the queue, to resume from its checkpoint; lost actors are replaced) ->
// place queued runs (QUEUED -> PLACING -> RUNNING). Workers learn their
// assignment from the heartbeat reply and report progress and completion.
// On start, runs in the store are recovered: QUEUED/PLACING are queued again,
// RUNNING ones keep the workers that re-register with them.
#ifndef RL_COORDINATOR_COORDINATOR_CORE_H_
#define RL_COORDINATOR_COORDINATOR_CORE_H_

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/pending_ends.h"
#include "coordinator/reason_text.h"
#include "coordinator/run_store.h"
#include "coordinator/scheduler.h"
#include "coordinator/worker_keys.h"
#include "proto/coordinator.pb.h"
#include "runspec/run_footprint.h"

namespace rl {

struct CoordinatorOptions {
  std::string store_path;
  // Cap of the store's size in bytes (0: none); beyond it requests that
  // write fail with RESOURCE_EXHAUSTED, as on a full disk.
  int64_t max_store_bytes = 0;
  // Checkpoints of run R go to <runs_dir>/<R>.
  std::string runs_dir = "runs";
  // Key from which worker and run keys are derived (HMAC). Empty: kept in
  // <store_path>.secret (made once, mode 0600) so the keys survive a
  // restart; random for an in-memory store.
  std::string key_secret;
  // The workers that will register and no others, by name (the embedded
  // system's local workers): a run none of them could ever hold is refused
  // at submit (FAILED_PRECONDITION naming what it lacks), or fails as soon
  // as that is known (when a registered worker lacks the device). Empty:
  // any worker may come, and such runs wait unplaceable_timeout.
  std::vector<std::pair<std::string, WorkerRole>> fixed_pool;
  // Runs one owner may have QUEUED or PLACING at once (0: no limit).
  int max_queued_runs_per_user = 256;
  absl::Duration lease_ttl = absl::Seconds(10);
  // A run whose workers fail more than this many times within
  // worker_failure_window (an actor's error, an actor lost or restarted, a
  // learner lost or restarted, a gang restart for any reason), like a
  // Kubernetes Job's backoff limit, FAILS with the last error: one budget
  // per run. A failed actor is freed and the run topped up again; a broken
  // gang is placed again and resumes from its checkpoint.
  int max_worker_failures = 10;
  absl::Duration worker_failure_window = absl::Minutes(10);
  // A queued run that could not be placed even if every registered worker
  // were idle (no worker has the device, the memory, or there are too few)
  // FAILS after this long with the reason; zero: it waits for ever.
  absl::Duration unplaceable_timeout = absl::Minutes(10);
  // Refused at submit (runspec/run_footprint.h): segments or policies over
  // the wire's message limit, runs over a worker memory limit.
  FootprintLimits footprint_limits = DefaultFootprintLimits();
  // A RUNNING run whose learner reports no new environment steps for this
  // long (no segment reached it, no update) has its gang restarted with
  // that reason, which counts against max_worker_failures: nothing stays
  // RUNNING silently. Zero: no limit.
  absl::Duration max_time_without_progress = absl::Minutes(10);
  // Every registration must carry an operator-issued worker credential
  // (WorkerCredential); without this, a name that is not held may be taken
  // by any worker-role caller, and a held one only with its key or a
  // credential.
  bool require_worker_credentials = false;
  // Callers are told apart by tokens. Then only a worker that showed its
  // credential fails a run with one fatal report; without tokens (everyone
  // is the anonymous admin) any worker's fatal report does.
  bool tokens_required = false;
  Scheduler::Clock clock = [] { return absl::Now(); };
};

// Who asks to change a run or a sweep. A run or sweep is changed (cancelled,
// given trials) only by its owner or an admin; with tokens off everyone is
// the anonymous admin.
struct Requester {
  std::string name = "anonymous";
  bool admin = true;
};

// OK when `by` may change `what` (e.g. "run run-000003") owned by `owner`;
// else PERMISSION_DENIED naming the owner and the caller.
absl::Status CheckOwnerOrAdmin(const std::string& what,
                               const std::string& owner, const Requester& by);

class CoordinatorCore {
 public:
  static absl::StatusOr<std::unique_ptr<CoordinatorCore>> Create(
      const CoordinatorOptions& options);

  // `owner`: the caller's identity, recorded in the run and counted against
  // max_queued_runs_per_user (RESOURCE_EXHAUSTED beyond it).
  // `round`: a population-based training round's start and end (the sweep
  // manager's; clients cannot set them).
  absl::StatusOr<SubmitRunResponse> SubmitRun(
      const SubmitRunRequest& request, const std::string& owner = "anonymous",
      const RunRound& round = {});
  // Submits refused by max_queued_runs_per_user so far.
  int64_t refused_by_user_quota() const { return refused_by_user_quota_; }
  // With `with_history`, also its state changes (Run.history, the last
  // kMaxHistory).
  absl::StatusOr<Run> GetRun(const std::string& run_id,
                             bool with_history = false);
  static constexpr size_t kMaxHistory = 100;
  absl::StatusOr<ListRunsResponse> ListRuns(const ListRunsRequest& request);
  // Ends an unfinished run CANCELLED with `reason`; idempotent.
  absl::StatusOr<Run> CancelRun(
      const std::string& run_id,
      const std::string& reason = "cancelled by a user");
  // A user's cancel: only the run's owner or an admin (PERMISSION_DENIED
  // otherwise, nothing changed); the reason names who.
  absl::StatusOr<Run> CancelRunFor(const std::string& run_id,
                                   const Requester& by);

  // A name whose registration is live (its lease not expired, or within a
  // lease of this coordinator's start) is held: registering it again needs
  // its worker_key (the same process, e.g. after a coordinator restart) or
  // its worker_credential (a restarted process, which takes the name over
  // and revokes the old key); else PERMISSION_DENIED. A new key is made
  // for every registration that did not show the current one.
  absl::StatusOr<RegisterWorkerResponse> RegisterWorker(
      const RegisterWorkerRequest& request);
  absl::StatusOr<HeartbeatResponse> Heartbeat(const HeartbeatRequest& request);
  absl::Status ReportStatus(const ReportStatusRequest& request);
  ListWorkersResponse ListWorkers();

  // The credential that proves a process is worker `worker_name` (for the
  // operator to hand to that worker; derived from the coordinator's secret).
  std::string WorkerCredential(const std::string& worker_name) const;

  // The embedded supervisor saw worker `worker_name`'s process end `how`
  // ("killed by SIGABRT (signal 6)"): the worker is lost now, as if its
  // lease had expired. Its run is charged one failure naming `how` (a
  // learner's run goes back to the queue), and no run is placed on it
  // until its next process registers.
  void NoteWorkerExit(const std::string& worker_name, const std::string& how)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The durable store (the sweep manager keeps its sweeps there too).
  RunStore* store() { return store_.get(); }

  // Expires leases and places runs; called periodically by the service.
  void Tick();

  // Called with the run after every change (state or progress).
  int64_t Watch(std::function<void(const Run&)> on_change);
  void Unwatch(int64_t id);

  // Runs the core keeps bookkeeping of beyond the scheduler's (gang
  // restarts, worker failures, unplaceable since): unfinished runs only, so
  // it does not grow with the number of runs that ended.
  int64_t runs_with_bookkeeping();

 private:
  explicit CoordinatorCore(const CoordinatorOptions& options,
                           std::unique_ptr<RunStore> store);
  absl::Status Recover();
  std::atomic<int64_t> refused_by_user_quota_{0};
  // What a run's workers show its learners (Assignment.run_key).
  std::string RunKey(const std::string& run_id) const;
  // PERMISSION_DENIED unless `key` is `worker_id`'s current key.
  absl::Status CheckWorkerKeyLocked(const std::string& worker_id,
                                    const std::string& key) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `worker_id`'s registration is live (see RegisterWorker).
  bool NameHeldLocked(const std::string& worker_id) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Assignment AssignmentFor(const SchedulerWorker& worker)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The id AssignmentFor(worker) would carry without changing anything (0:
  // no assignment), or -1 where it would make a new assignment.
  int64_t CurrentAssignmentIdLocked(const SchedulerWorker& worker) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Notify(const Run& run);
  void RequeueLocked(const std::string& run_id, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `run_id` ended (SUCCEEDED, FAILED or CANCELLED): frees its workers and
  // forgets what was kept about it.
  void EndRunLocked(const std::string& run_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends `run_id` in state `to` (terminal) with `reason`, and EndRunLocked.
  // When the store is full (RESOURCE_EXHAUSTED) the end is kept here
  // instead: GetRun, ListRuns and watchers see it at once, and Tick writes
  // it once there is room.
  absl::StatusOr<Run> FinishRunLocked(const std::string& run_id, RunState to,
                                      const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Workers still in recovered_assignments_ a lease after the start are lost:
  // forgotten, and removed from the store (else every restart would list
  // them again, for ever).
  void ForgetWorkersNotBackLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The gang of `run_id` broke: requeue it (its ranks restart from the
  // latest checkpoint), or FAIL it past max_worker_failures. The run after
  // the change, if it changed.
  absl::StatusOr<Run> RestartGangLocked(const std::string& run_id,
                                        const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // A worker of `run_id` failed: counts it in the window, and FAILS the run
  // past max_worker_failures. The run after the change, if it changed.
  std::optional<Run> WorkerFailedLocked(const std::string& run_id,
                                        const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Restarts the gang of RUNNING runs past max_time_without_progress.
  void RestartStalledLocked(std::vector<Run>* changed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // FAILS queued runs that have been unplaceable for unplaceable_timeout.
  void FailUnplaceableLocked(std::vector<Run>* changed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const CoordinatorOptions options_;
  std::unique_ptr<RunStore> store_;
  // Workers of recovered runs get one lease period to re-register.
  const absl::Time started_;
  // Random, new with every coordinator process: in gang ids, so that a
  // gang placed after a restart never takes an older gang's id (the
  // placement counter starts again at 1).
  const std::string incarnation_;

  absl::Mutex mu_;
  // Who holds each worker name (RegisterWorkerResponse.worker_key).
  WorkerKeys keys_ ABSL_GUARDED_BY(mu_);
  Scheduler scheduler_ ABSL_GUARDED_BY(mu_);
  // Assignment id per worker, and the scheduler placement it stands for; a
  // new placement gets a new id. Ids start from the clock (microseconds) so
  // that they stay unique across coordinator restarts.
  std::map<std::string, int64_t> assignment_ids_ ABSL_GUARDED_BY(mu_);
  // Whether `request`'s worker holds the assignment it reports on, for run
  // `run_id` (any run where empty).
  bool HoldsReportedAssignmentLocked(const ReportStatusRequest& request,
                                     const std::string& run_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::map<std::string, int64_t> assigned_placement_ ABSL_GUARDED_BY(mu_);
  int64_t next_assignment_id_ ABSL_GUARDED_BY(mu_);
  // Assignments stored before a restart: a re-registering worker keeps its
  // run only if it reports the very assignment recorded for it.
  std::map<std::string, AssignmentRecord> recovered_assignments_
      ABSL_GUARDED_BY(mu_);
  int64_t next_order_ ABSL_GUARDED_BY(mu_) = 0;
  // Per RUNNING run: the environment steps its learner last reported and
  // since when (max_time_without_progress).
  struct ProgressMark {
    int64_t env_steps = 0;
    absl::Time since;
  };
  std::map<std::string, ProgressMark> progress_marks_ ABSL_GUARDED_BY(mu_);
  // Per worker: the device checks its last heartbeat reported.
  std::map<std::string, std::vector<DeviceCheck>> device_checks_
      ABSL_GUARDED_BY(mu_);
  // Ends not yet written because the store was full (FinishRunLocked).
  PendingEnds pending_ends_ ABSL_GUARDED_BY(mu_);
  // Forgets `lost` (an expired lease, a process that ended) and charges
  // its run, if any, one failure for `reason`: a learner's gang restarts
  // (the run back in the queue), a run over its budget fails; the run,
  // changed, is added to `changed`.
  void LoseWorkerLocked(const LostWorker& lost, const std::string& reason,
                        std::vector<Run>* changed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Workers whose process showed an operator-issued credential: their fatal
  // reports (an env error that would recur anywhere) fail a run at once;
  // anyone else's count as that worker's failure.
  std::set<std::string> credentialed_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> gang_restarts_ ABSL_GUARDED_BY(mu_);
  // Per run: when its workers failed, within worker_failure_window.
  std::map<std::string, std::deque<absl::Time>> worker_failures_
      ABSL_GUARDED_BY(mu_);
  // Per queued run that could not be placed on any registered workers:
  // since when.
  std::map<std::string, absl::Time> unplaceable_since_ ABSL_GUARDED_BY(mu_);

  absl::Mutex watchers_mu_;
  int64_t next_watcher_ ABSL_GUARDED_BY(watchers_mu_) = 0;
  std::map<int64_t, std::function<void(const Run&)>> watchers_
      ABSL_GUARDED_BY(watchers_mu_);
};

}  // namespace rl

#endif  // RL_COORDINATOR_COORDINATOR_CORE_H_
