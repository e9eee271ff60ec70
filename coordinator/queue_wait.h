// The coordinator's queue-wait series: for each run, the seconds from its
// submission to its first RUNNING, emitted once as
// coordinator/queue_wait_seconds of that run (stored with the run's own
// metrics: `rlctl metrics RUN` shows it), at wall-clock milliseconds (so a
// restarted coordinator's points follow, not replace, earlier ones).
//
//   CoordinatorCore::Watch (every run change) -> Observe -> Emitter
#ifndef RL_COORDINATOR_QUEUE_WAIT_H_
#define RL_COORDINATOR_QUEUE_WAIT_H_

#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/coordinator.pb.h"
#include "telemetry/client/emitter.h"

namespace rl {

class QueueWaitReporter {
 public:
  static constexpr char kSeries[] = "coordinator/queue_wait_seconds";

  // `emitter` is not owned and must outlive this.
  explicit QueueWaitReporter(Emitter* emitter) : emitter_(emitter) {}

  // Emits `run`'s queue wait the first time it is seen RUNNING at `now`;
  // later changes (a restarted gang runs again) emit nothing. A run is
  // forgotten once it ends. Thread-safe.
  void Observe(const Run& run, absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  Emitter* const emitter_;
  absl::Mutex mu_;
  std::set<std::string> started_ ABSL_GUARDED_BY(mu_);  // running runs
};

}  // namespace rl

#endif  // RL_COORDINATOR_QUEUE_WAIT_H_
