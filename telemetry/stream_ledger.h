// What the metric store knows of one emitter stream (source, incarnation,
// run): which of its batches' sequence numbers are stored, so a resend is
// spotted and dropped and a batch whose write failed is taken when resent
// (no SQLite, no gRPC).
#ifndef RL_TELEMETRY_STREAM_LEDGER_H_
#define RL_TELEMETRY_STREAM_LEDGER_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace rl {

// Every sequence number up to `last` is stored except those in `gaps`
// ([first, last] ranges, ascending, all below `last`). Not a high-water mark
// alone: batch k+1 may be stored while batch k's write failed, and k's
// resend must be stored then, not taken for a duplicate.
struct StreamLedger {
  // Gaps kept, at most; past it the oldest is forgotten (its batches,
  // should they ever come, are taken for duplicates). A gap is a batch
  // whose write failed while a later one was stored; its resend fills it
  // within a reconnect, so few are open at once.
  static constexpr size_t kMaxGaps = 64;

  int64_t last = 0;
  std::vector<std::pair<int64_t, int64_t>> gaps;
  // When a batch of it was last stored (wall clock), for ForgetIdleStreams.
  int64_t last_write_ns = 0;

  // Whether batch `seq` is stored.
  bool Has(int64_t seq) const;
  // Records `seq` as stored (it is not yet: !Has(seq)).
  void Add(int64_t seq);
};

}  // namespace rl

#endif  // RL_TELEMETRY_STREAM_LEDGER_H_
