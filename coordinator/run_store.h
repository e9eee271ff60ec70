// Durable state of the coordinator in SQLite (WAL mode): runs, every
// submission and state transition as one transaction recorded in an event
// log, and the workers with their current assignments. After a crash,
// reopening the file gives back everything committed.
//
// Run lifecycle (enforced here):
//   QUEUED -> PLACING -> RUNNING -> SUCCEEDED
//   PLACING -> QUEUED (placement undone), RUNNING -> PLACING (learner lost)
//   any non-final state -> FAILED | CANCELLED
#ifndef RL_COORDINATOR_RUN_STORE_H_
#define RL_COORDINATOR_RUN_STORE_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/coordinator.pb.h"

struct sqlite3;

namespace rl {

// A worker's current assignment, as last granted.
struct AssignmentRecord {
  std::string worker_id;
  std::string run_id;
  WorkerRole role = WORKER_ROLE_UNSPECIFIED;
  int rank = 0;
  int64_t assignment_id = 0;
};

// One recorded transition.
struct RunEventRecord {
  std::string run_id;
  RunState from = RUN_STATE_UNSPECIFIED;
  RunState to = RUN_STATE_UNSPECIFIED;
  std::string reason;
  absl::Time time;
};

// Where a run of a population-based training round starts and ends
// (Run.start_from_run, Run.stop_env_steps); empty for every other run.
struct RunRound {
  std::string start_from_run;
  int64_t stop_env_steps = 0;
};

class RunStore {
 public:
  // Opens (creating if needed) the database file at `path`. `max_bytes` >
  // 0 caps its size: writes beyond fail with RESOURCE_EXHAUSTED, as on a
  // full disk, and what was stored stays readable.
  static absl::StatusOr<std::unique_ptr<RunStore>> Open(const std::string& path,
                                                        int64_t max_bytes = 0);
  ~RunStore();

  // Stores a new QUEUED run of `owner`, or, when `idempotency_key` is
  // non-empty and `owner` already used it, returns the run it created
  // (`*created` false): keys are per owner, another owner's run is never
  // returned. With `max_queued_per_owner` > 0, RESOURCE_EXHAUSTED (nothing
  // stored) when `owner` already has that many runs QUEUED or PLACING.
  // `round` (if given) sets Run.start_from_run and Run.stop_env_steps.
  absl::StatusOr<Run> SubmitRun(const RunSpec& spec,
                                const std::string& idempotency_key,
                                bool* created, const std::string& owner = "",
                                int max_queued_per_owner = 0,
                                const RunRound& round = {});

  // NOT_FOUND for an unknown id.
  absl::StatusOr<Run> GetRun(const std::string& run_id);

  // Newest first. `states` empty: all. `page_token` from the previous page.
  // INVALID_ARGUMENT for a malformed token.
  absl::StatusOr<std::vector<Run>> ListRuns(const std::vector<RunState>& states,
                                            int page_size,
                                            const std::string& page_token,
                                            std::string* next_page_token);

  // Moves a run to `to` (FAILED_PRECONDITION if the lifecycle forbids it,
  // NOT_FOUND for an unknown id) and logs the event, in one transaction.
  absl::StatusOr<Run> Transition(const std::string& run_id, RunState to,
                                 const std::string& reason);

  // Records progress reported by the run's learner.
  absl::Status UpdateProgress(const std::string& run_id,
                              const RunProgress& progress);

  // The event log of a run, oldest first.
  absl::StatusOr<std::vector<RunEventRecord>> Events(const std::string& run_id);

  // Workers: their registration (upserted) and current assignment (one row
  // per worker; cleared when the worker is idle or gone).
  absl::Status PutWorker(const std::string& worker_id, WorkerRole role,
                         const std::string& address);
  absl::Status PutAssignment(const AssignmentRecord& assignment);
  absl::Status ClearAssignment(const std::string& worker_id);
  // Deletes a worker's registration and assignment (it was lost).
  absl::Status RemoveWorker(const std::string& worker_id);
  absl::StatusOr<std::vector<AssignmentRecord>> Assignments();
  // Per worker name, the nonce its current worker key is derived from
  // (removed with the worker), so keys survive a coordinator restart.
  absl::Status PutWorkerNonce(const std::string& worker_id,
                              const std::string& nonce);
  absl::StatusOr<std::map<std::string, std::string>> WorkerNonces();

  // Sweeps (coordinator/sweep_manager.h), stored whole. CreateSweep gives
  // `sweep` its id ("sweep-000001"), or, when `idempotency_key` is
  // non-empty and `sweep.owner()` already used it, returns the sweep it
  // made (`*created` false).
  absl::StatusOr<Sweep> CreateSweep(Sweep sweep,
                                    const std::string& idempotency_key,
                                    bool* created);
  // The sweep CreateSweep made for `owner` with `idempotency_key`
  // (NOT_FOUND: none).
  absl::StatusOr<Sweep> FindSweepByKey(const std::string& idempotency_key,
                                       const std::string& owner);
  // Replaces a stored sweep (NOT_FOUND for an unknown id).
  absl::Status PutSweep(const Sweep& sweep);
  absl::StatusOr<Sweep> GetSweep(const std::string& sweep_id);
  // Newest first, at most `limit`; only those not ended with
  // `unfinished_only`.
  absl::StatusOr<std::vector<Sweep>> ListSweeps(bool unfinished_only,
                                                int limit);

  // True if the lifecycle allows `from` -> `to`.
  static bool TransitionAllowed(RunState from, RunState to);

 private:
  explicit RunStore(sqlite3* db) : db_(db) {}
  absl::Status Exec(const std::string& sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Rolls the open transaction back; `status` (why) again.
  absl::Status Rollback(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Appends a transition to the event log (in the caller's transaction).
  absl::Status LogEventLocked(const std::string& run_id, RunState from,
                              RunState to, const std::string& reason,
                              absl::Time time)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Sweep> FindSweepByKeyLocked(const std::string& idempotency_key,
                                             const std::string& owner)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Run> GetRunLocked(const std::string& run_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  sqlite3* db_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rl

#endif  // RL_COORDINATOR_RUN_STORE_H_
