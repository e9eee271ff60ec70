// What a worker process runs for its current assignment: a learner's core,
// an actor's client. The worker runtime (worker_runtime.h) drives it from
// the assignments the coordinator hands out.
#ifndef RL_WORKER_WORKLOAD_H_
#define RL_WORKER_WORKLOAD_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>

#include "absl/status/status.h"
#include "proto/coordinator.pb.h"

namespace rl {

// Where the current assignment's work stands.
struct WorkloadState {
  // The work ended (the run's budget is used, the learner sent its final
  // policy, or it failed): `status` says how. Reported to the coordinator
  // once, after which the workload is not polled again until the next
  // assignment.
  bool finished = false;
  absl::Status status;
  // Progress to report (learners); nothing is reported while unset and not
  // finished.
  std::optional<RunProgress> progress;
};

// Called from the runtime's one thread, never concurrently.
class Workload {
 public:
  virtual ~Workload() = default;

  // Starts work on `assignment` (its run_id is set). An error ends the
  // assignment at once and is reported as its failure.
  virtual absl::Status Start(const Assignment& assignment) = 0;

  // The current assignment's state; called about once a report interval.
  virtual WorkloadState Poll() = 0;

  // Ends the current assignment's work, if any, and returns when it has
  // stopped. Idempotent.
  virtual void Stop() = 0;

  // Called from another thread when a new assignment arrives: a Start in
  // progress (waiting for peers) may give up and return CANCELLED, which
  // is not reported. Thread-safe.
  void Cancel() { cancels_.fetch_add(1); }

  // Called by the runtime (on its thread, under the lock it publishes new
  // assignments with, Cancel included) as it takes an assignment to start:
  // every Cancel after it supersedes that assignment, even one that comes
  // before Start itself is called (while the previous work stops).
  void Picked() { picked_ = cancels_.load(); }

  // How many assignments have arrived (Cancel calls): for tests and logs.
  int64_t cancels() const { return cancels_.load(); }

  // Called once the end of an assignment has been reported, before the
  // next one starts: a workload may give back what its run left behind
  // (an actor recycles itself over its memory limit). Default: nothing.
  virtual void Idle() {}

 protected:
  // For Start: a check that turns true once a newer assignment arrived
  // (a Cancel since Picked, or since this call where Start came without
  // one). Start takes it once, at its beginning.
  std::function<bool()> Superseded() {
    const int64_t seen = picked_.has_value() ? *picked_ : cancels_.load();
    picked_.reset();
    return [this, seen] { return cancels_.load() != seen; };
  }

 private:
  std::atomic<int64_t> cancels_{0};
  std::optional<int64_t> picked_;  // the runtime's thread only
};

}  // namespace rl

#endif  // RL_WORKER_WORKLOAD_H_
