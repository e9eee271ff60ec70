// The learner's byte budget for rollout segments waiting for its PPO
// thread, over all streams (no LibTorch, no gRPC).
#ifndef RL_LEARNER_SEGMENT_BUDGET_H_
#define RL_LEARNER_SEGMENT_BUDGET_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace rl {

// The bytes of rollout segments a learner holds waiting for a PPO thread
// (received and validated, not yet taken for an update), over all its
// streams and runs (--max_inflight_segment_mb). Streams x credits x the
// message limit would otherwise bound them. A segment beyond the budget is
// refused (RESOURCE_EXHAUSTED: its stream ends and the actor resends it
// after a backoff) and counted. When no segment waits, one is admitted
// whatever its size, so a segment larger than the budget is not refused
// for ever; the PPO thread takes waiting segments whatever the budget, so
// the budget always frees up again.
class SegmentBudget {
 public:
  explicit SegmentBudget(int64_t max_bytes) : max_bytes_(max_bytes) {}

  // Takes `bytes` of the budget, or RESOURCE_EXHAUSTED (counted).
  absl::Status Take(int64_t bytes) ABSL_LOCKS_EXCLUDED(mu_);
  void Give(int64_t bytes) ABSL_LOCKS_EXCLUDED(mu_);

  int64_t max_bytes() const { return max_bytes_; }
  int64_t held_bytes() const ABSL_LOCKS_EXCLUDED(mu_);
  // Segments refused so far.
  int64_t refused() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const int64_t max_bytes_;
  mutable absl::Mutex mu_;
  int64_t held_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t refused_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace rl

#endif  // RL_LEARNER_SEGMENT_BUDGET_H_
