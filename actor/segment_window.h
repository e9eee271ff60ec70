// The actor's side of the StreamRollouts protocol, without the transport:
// sequence numbers, the window of unacknowledged segments, the learner's
// credits and what to (re)send after a reconnect.
//
// Data flow: step loop AssignNext() when HasRoomForNext() -> sender Add()s
// the encoded segment -> NextToWrite() -> stream write -> OnWritten(); the
// learner's acks -> OnAck() frees the window and sets the credits; a new
// stream -> OnStreamOpened() rewinds writing to the oldest unacknowledged
// segment, which keeps its sequence number.
//
// Not thread-safe, and nothing in it blocks: ActorClient calls it only while
// holding its own mutex, because its waits combine the window's state with
// its own (free buffers, the policy version, a stop) in one absl::Condition,
// which a second mutex inside the window would make impossible.
#ifndef RL_ACTOR_SEGMENT_WINDOW_H_
#define RL_ACTOR_SEGMENT_WINDOW_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/learner.pb.h"

namespace rl {

class SegmentWindow {
 public:
  struct Options {
    // Random per actor process. Sequence numbers count from 1 per
    // incarnation: the learner restarts duplicate detection when a new
    // process takes over an actor_id.
    uint64_t incarnation = 0;
    // Credits assumed on a new stream before the learner's first ack.
    int initial_credits = 2;
  };

  // A segment the sender should write next.
  struct Write {
    int64_t sequence_number = 0;
    std::shared_ptr<const RolloutSegment> segment;
    // It was written on some stream before (this write is a resend).
    bool resend = false;
  };

  // INVALID_ARGUMENT if initial_credits < 1: with none, the first segment of
  // a stream would wait for an ack that only a segment can bring.
  static absl::StatusOr<std::unique_ptr<SegmentWindow>> Create(
      const Options& options);

  SegmentWindow(const SegmentWindow&) = delete;
  SegmentWindow& operator=(const SegmentWindow&) = delete;

  uint64_t incarnation() const { return options_.incarnation; }

  // Step loop. The number the next collected segment gets.
  int64_t next_sequence_number() const { return last_assigned_ + 1; }
  // Whether the next segment may be collected now: at most `credits()`
  // segments beyond the acknowledged ones may be in flight, plus the one
  // being collected (so collection overlaps the wait for an ack).
  bool HasRoomForNext() const;
  // Gives the next segment its number (next_sequence_number()), once it is
  // collected. Never refuses: the room was checked before collecting, and a
  // segment collected while the credits shrank waits here until they allow
  // writing it.
  int64_t AssignNext() { return ++last_assigned_; }
  // ASYNC mode: whether a segment collected now with `policy_version` is
  // likely to be within `max_policy_lag` versions of the learner's when the
  // learner gets to it, so that collecting it is not wasted (the learner
  // drops staler ones). The learner takes about `num_actors` segments an
  // update, so the unacknowledged segments ahead of it put it
  // unacked() / num_actors versions past the learner's newest known version
  // (its acks carry it; at least `policy_version`). Unless the learner is
  // known to be past the bound already (its newer policy is on the way), at
  // least one batch's worth (num_actors segments) is always allowed, so that
  // a lone actor can still fill a batch whatever the lag bound.
  bool FreshWhenUsed(int64_t policy_version, int64_t max_policy_lag,
                     int num_actors) const;

  // Sender. Takes the encoded segment that carries the oldest assigned number
  // not yet added. FAILED_PRECONDITION for any other number (a gap or a
  // repeat would break the learner's duplicate detection) or another
  // incarnation.
  absl::Status Add(std::shared_ptr<const RolloutSegment> segment);
  // The next segment to write on the current stream, in sequence order, if
  // the credits allow (sequence number <= acked() + credits()).
  std::optional<Write> NextToWrite() const;
  // `sequence_number` was written on the current stream.
  void OnWritten(int64_t sequence_number);
  // A new stream: the learner may have lost everything unacknowledged, so
  // writing starts again from the oldest unacknowledged segment, with the
  // initial credits until its first ack.
  void OnStreamOpened();

  // Ack reader. Everything up to the acked number (cumulative) is forgotten;
  // an ack beyond what was added counts only up to the newest added segment
  // (the learner cannot have processed more), an older or repeated one frees
  // nothing. The credits are the learner's newest word, whatever the ack's
  // number (negative ones count as none).
  void OnAck(const RolloutAck& ack);

  // Highest acknowledged sequence number (= segments acknowledged).
  int64_t acked() const { return acked_; }
  int64_t last_assigned() const { return last_assigned_; }
  int credits() const { return credits_; }
  // The learner's policy version in its newest ack on the current stream (0
  // before any).
  int64_t learner_version() const { return learner_version_; }
  // Assigned and not acknowledged, whether added yet or not.
  int64_t unacked() const { return last_assigned_ - acked_; }
  // Every assigned segment is acknowledged (what a flush waits for).
  bool AllAcked() const { return acked_ >= last_assigned_; }

 private:
  struct Pending {
    std::shared_ptr<const RolloutSegment> segment;
    bool written_before = false;
  };

  explicit SegmentWindow(const Options& options);

  // Newest added sequence number.
  int64_t newest_added() const {
    return acked_ + static_cast<int64_t>(pending_.size());
  }

  const Options options_;
  int64_t last_assigned_ = 0;
  int64_t acked_ = 0;
  int credits_;
  int64_t learner_version_ = 0;
  // Added, not yet acknowledged: sequence numbers acked_ + 1, acked_ + 2, ...
  std::deque<Pending> pending_;
  // Highest sequence number written on the current stream.
  int64_t written_on_stream_ = 0;
};

}  // namespace rl

#endif  // RL_ACTOR_SEGMENT_WINDOW_H_
