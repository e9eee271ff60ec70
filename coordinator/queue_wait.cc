#include "coordinator/queue_wait.h"

namespace rl {

void QueueWaitReporter::Observe(const Run& run, absl::Time now) {
  if (run.state() == SUCCEEDED || run.state() == FAILED ||
      run.state() == CANCELLED) {
    absl::MutexLock lock(&mu_);
    started_.erase(run.run_id());
    return;
  }
  if (run.state() != RUNNING) return;
  {
    absl::MutexLock lock(&mu_);
    if (!started_.insert(run.run_id()).second) return;
  }
  const absl::Time created =
      absl::FromUnixSeconds(run.create_time().seconds()) +
      absl::Nanoseconds(run.create_time().nanos());
  emitter_->EmitToRun(run.run_id(), kSeries, absl::ToUnixMillis(now),
                      absl::ToDoubleSeconds(now - created));
}

}  // namespace rl
