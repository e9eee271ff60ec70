// The delay schedule of a client that reconnects: exponential backoff with
// jitter, reset after a success. One helper for every reconnecting stream
// (the actor's rollout and policy streams, the telemetry emitter).
//
//   Backoff backoff({.initial = absl::Milliseconds(100),
//                    .max = absl::Seconds(10)});
//   ... the stream failed:
//   const absl::Duration delay = backoff.Next();  // 80..120 ms, 160..240 ms
//   ... it worked again:
//   backoff.Reset();
#ifndef RL_COMMON_BACKOFF_H_
#define RL_COMMON_BACKOFF_H_

#include <cstdint>
#include <random>

#include "absl/time/time.h"

namespace rl {

class Backoff {
 public:
  struct Options {
    absl::Duration initial = absl::Milliseconds(100);
    absl::Duration max = absl::Seconds(10);
    // Each delay is the current step times a factor drawn uniformly from
    // [min_jitter, max_jitter), so that clients that failed together do
    // not come back together.
    double min_jitter = 0.8;
    double max_jitter = 1.2;
    // The jitter's random stream (0: a random seed).
    uint64_t seed = 0;
  };

  explicit Backoff(const Options& options);

  // The delay before the next attempt; the step then doubles, up to max.
  absl::Duration Next();
  // After a success: the next delay starts from `initial` again.
  void Reset();
  // Attempts (Next calls) since the last Reset.
  int64_t failures() const { return failures_; }

 private:
  Options options_;
  absl::Duration step_;
  int64_t failures_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace rl

#endif  // RL_COMMON_BACKOFF_H_
