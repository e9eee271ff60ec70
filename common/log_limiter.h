// Log lines a peer can cause, rate-limited per key (a caller, a client
// address): a peer that sends 10,000 bad requests a second gets a few lines
// a minute, each later one saying how many were left out, and cannot crowd
// out other peers' lines or fill the disk.
//
//   static LogLimiter* const limiter = new LogLimiter();
//   std::string left_out;
//   if (limiter->Allow(caller, &left_out)) {
//     RL_LOG_WARNING("refused {}: {}{}", method, reason, left_out);
//   }
#ifndef RL_COMMON_LOG_LIMITER_H_
#define RL_COMMON_LOG_LIMITER_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace rl {

class LogLimiter {
 public:
  // At most `lines_per_period` lines per key in each `period`. At most
  // `max_keys` keys are tracked; keys beyond share one budget, so many
  // distinct keys cannot grow memory or the log without bound.
  explicit LogLimiter(int lines_per_period = 5,
                      absl::Duration period = absl::Minutes(1),
                      int max_keys = 4096);

  // Whether to log a line for `key` now. When true and lines of this key
  // were left out since its last logged line, `*left_out` is
  // " (N more like it not logged)"; otherwise it is emptied.
  bool Allow(absl::string_view key, std::string* left_out) {
    return Allow(key, absl::Now(), left_out);
  }
  bool Allow(absl::string_view key, absl::Time now, std::string* left_out);

 private:
  struct Budget {
    absl::Time period_start;
    int lines = 0;
    int64_t left_out = 0;
  };

  const int lines_per_period_;
  const absl::Duration period_;
  const int max_keys_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Budget> budgets_ ABSL_GUARDED_BY(mu_);
  Budget overflow_ ABSL_GUARDED_BY(mu_);
  absl::Time last_sweep_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace rl

#endif  // RL_COMMON_LOG_LIMITER_H_
