#include "learner/segment_budget.h"

#include "absl/strings/str_cat.h"

namespace rl {

absl::Status SegmentBudget::Take(int64_t bytes) {
  absl::MutexLock lock(&mu_);
  if (held_bytes_ > 0 && held_bytes_ + bytes > max_bytes_) {
    ++refused_;
    return absl::ResourceExhaustedError(absl::StrCat(
        "learner segment budget spent: ", held_bytes_,
        " bytes of rollout segments wait for the PPO thread, at most ",
        max_bytes_, " (--max_inflight_segment_mb); this segment has ", bytes,
        " bytes; resend it later"));
  }
  held_bytes_ += bytes;
  return absl::OkStatus();
}

void SegmentBudget::Give(int64_t bytes) {
  absl::MutexLock lock(&mu_);
  held_bytes_ -= bytes;
}

int64_t SegmentBudget::held_bytes() const {
  absl::MutexLock lock(&mu_);
  return held_bytes_;
}

int64_t SegmentBudget::refused() const {
  absl::MutexLock lock(&mu_);
  return refused_;
}

}  // namespace rl
