// The points a Watch stream has yet to send, bounded in bytes, so a client
// that stops reading cannot make the server hold more than `max_bytes` for
// it: producer (the core's writer thread) -> Push -> FIFO -> Pop -> the
// stream's next write.
//
// A Push past the bound empties the backlog (its memory goes at once, not
// when the client leaves) and returns RESOURCE_EXHAUSTED; the watch is over
// then, since a tail with a gap would mislead. Bytes are the points'
// serialized size plus sizeof(MetricPoint), close to what they hold in
// memory.
#ifndef RL_TELEMETRY_WATCH_BACKLOG_H_
#define RL_TELEMETRY_WATCH_BACKLOG_H_

#include <cstdint>
#include <deque>

#include "absl/status/status.h"
#include "proto/telemetry.pb.h"

namespace rl {

// Not thread-safe: the Watch reactor calls it under its mutex.
class WatchBacklog {
 public:
  explicit WatchBacklog(int64_t max_bytes) : max_bytes_(max_bytes) {}

  // Appends `point`, or, if that would pass the bound, empties the backlog
  // and returns RESOURCE_EXHAUSTED ("watcher fell behind by N bytes ...").
  // Every later Push fails the same way.
  absl::Status Push(const MetricPoint& point);
  // Moves the oldest point into `out`; false when there is none.
  bool Pop(MetricPoint* out);

  int64_t bytes() const { return bytes_; }
  // The most bytes it ever held.
  int64_t peak_bytes() const { return peak_bytes_; }
  size_t size() const { return points_.size(); }

  static int64_t PointBytes(const MetricPoint& point);

 private:
  const int64_t max_bytes_;
  std::deque<MetricPoint> points_;
  int64_t bytes_ = 0;
  int64_t peak_bytes_ = 0;
  absl::Status overflow_;
};

}  // namespace rl

#endif  // RL_TELEMETRY_WATCH_BACKLOG_H_
