// One worker process's loop, the same for learners and actors:
//
//   coordinator --heartbeat reply--> WorkerAgent --new assignment-->
//   runtime thread: Workload::Stop, then Start(assignment)
//   runtime thread, every report_interval: Workload::Poll -> ReportStatus
//
// A workload that fails to start, or finishes, is reported once as the end
// of its assignment (with the error, if any); an assignment with an empty
// run id means: stop and idle.
#ifndef RL_WORKER_WORKER_RUNTIME_H_
#define RL_WORKER_WORKER_RUNTIME_H_

#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/thread.h"
#include "worker/worker_agent.h"
#include "worker/workload.h"

namespace rl {

struct WorkerRuntimeOptions {
  WorkerAgentOptions agent;
  absl::Duration report_interval = absl::Seconds(1);
};

class WorkerRuntime {
 public:
  // Registers with the coordinator and starts driving `workload`, which
  // must outlive the runtime. INVALID_ARGUMENT for options that cannot work
  // (no coordinator, no worker name, no role, a non-positive interval).
  static absl::StatusOr<std::unique_ptr<WorkerRuntime>> Create(
      const WorkerRuntimeOptions& options, Workload* workload);

  WorkerRuntime(const WorkerRuntime&) = delete;
  WorkerRuntime& operator=(const WorkerRuntime&) = delete;
  ~WorkerRuntime();  // Stop()

  // Stops heartbeating and the workload; returns when both have stopped.
  // Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // Reports the current assignment ended with `failure` now, from any
  // thread (e.g. the env call watch's, just before the process exits over
  // a hung or crashed environment call). The coordinator's reply, or the
  // error, is returned; the runtime goes on as before.
  // `assignment_id`: the assignment whose work failed (a stale one is
  // refused by the coordinator, so a later run is not blamed).
  absl::Status ReportFailure(int64_t assignment_id, const absl::Status& failure)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Assignments started so far (tests and logs).
  int64_t assignments_started() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  WorkerRuntime(const WorkerRuntimeOptions& options, Workload* workload);
  void OnAssignment(const Assignment& assignment) ABSL_LOCKS_EXCLUDED(mu_);
  void Loop();
  // Reports `state` of the current assignment; true once its end is out.
  bool Report(const WorkloadState& state);

  const WorkerRuntimeOptions options_;
  Workload* const workload_;
  std::unique_ptr<WorkerAgent> agent_;

  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool changed_ ABSL_GUARDED_BY(mu_) = false;
  Assignment desired_ ABSL_GUARDED_BY(mu_);
  int64_t started_ ABSL_GUARDED_BY(mu_) = 0;

  NamedThread thread_;
};

}  // namespace rl

#endif  // RL_WORKER_WORKER_RUNTIME_H_
