// The learner's intake of rollout segments, free of LibTorch and gRPC: the
// actors' streams, their processes (incarnations), per actor process the
// sequence numbers seen and acknowledged (watermarks), duplicates, credits,
// the bounded queue, the staging area of the next batch, and the acks. The
// learner's mirror of the actor's SegmentWindow (actor/segment_window.h).
//
//   stream reactors -> Submit (check the header, decode through the run's
//   `decode`, dedupe by (actor, incarnation, sequence number), take the
//   segment budget) -> queue -> PPO thread: StageNext (drop stale segments,
//   acknowledging them; stage the rest) -> TakeBatch -> the update ->
//   AcknowledgeUsed.
//
// Batch completion: SYNC once every connected actor has staged a segment
// (strictly on-policy: actors wait for the next version) or a batch's worth
// of steps is staged; ASYNC once a batch's worth of steps is staged.
// Segments whose version lags by more than max_policy_lag (SYNC: any lag),
// or is ahead of the learner's (sent before a learner restart), are stale.
#ifndef RL_LEARNER_SEGMENT_INTAKE_H_
#define RL_LEARNER_SEGMENT_INTAKE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "learner/segment_budget.h"
#include "learner/segment_ledger.h"
#include "proto/learner.pb.h"
#include "proto/training_state.pb.h"

namespace rl {

// What the run's decoder makes of a segment (the core's decoded rollout).
struct SegmentPayload {
  virtual ~SegmentPayload() = default;
};

struct DecodedSegment {
  std::unique_ptr<SegmentPayload> payload;
  int64_t env_steps = 0;  // T x E
};

// A checked segment in the queue or the staging area; gives its share of
// the segment budget back when it leaves the queue (or goes).
struct IntakeSegment {
  ~IntakeSegment() { GiveBudget(); }
  void GiveBudget();
  SegmentKey key() const { return {actor_id, incarnation, sequence_number}; }

  int actor_id = 0;
  uint64_t incarnation = 0;
  int64_t sequence_number = 0;
  int64_t policy_version = 0;
  int64_t env_steps = 0;
  std::unique_ptr<RolloutSegment> proto;
  std::unique_ptr<SegmentPayload> payload;
  std::shared_ptr<SegmentBudget> budget;  // null once given back
  int64_t budget_bytes = 0;
};

using AckCallback = std::function<void(const RolloutAck&)>;
using SegmentBatch = std::vector<std::unique_ptr<IntakeSegment>>;

struct SegmentIntakeOptions {
  std::string run_id;  // segments of another run are refused (empty: any)
  // Segments an actor may have in flight beyond its last ack.
  int credits = 2;
  // Queued segments (all actors) before Submit says RESOURCE_EXHAUSTED.
  size_t queue_capacity = 8;
  // The actors this learner rank expects (a warning names the first extra
  // one), of `num_actors` over `num_learners`.
  int actors_here = 1;
  int num_actors = 1;
  int num_learners = 1;
  bool async = false;
  int max_policy_lag = 0;  // ASYNC only
  // Steps (T x E, summed over segments) that complete a batch.
  int64_t batch_steps = 1;
  // Shared by the learner process (null: no byte budget).
  std::shared_ptr<SegmentBudget> budget;
  // Checks a segment against the run (shapes, values) and decodes it;
  // errors are INVALID_ARGUMENT naming the field. Called without locks.
  std::function<absl::StatusOr<DecodedSegment>(const RolloutSegment&)> decode;
  // Called (under the intake's lock) for each segment dropped as stale.
  std::function<void(const SegmentKey&)> on_stale;
};

// The intake's counters, as LearnerStatus reports them.
struct IntakeCounts {
  int64_t received = 0;
  int64_t rejected = 0;
  int64_t duplicate = 0;
  int64_t dropped_stale = 0;
  int64_t queued = 0;
  int connected_actors = 0;

  void FillStatus(LearnerStatus* status) const {
    status->set_segments_received(received);
    status->set_segments_rejected(rejected);
    status->set_segments_duplicate(duplicate);
    status->set_segments_dropped_stale(dropped_stale);
    status->set_connected_actors(connected_actors);
  }
};

class SegmentIntake {
 public:
  explicit SegmentIntake(SegmentIntakeOptions options);
  SegmentIntake(const SegmentIntake&) = delete;
  SegmentIntake& operator=(const SegmentIntake&) = delete;

  // A rollout stream of `actor_id` opened; its acks go to `on_ack` (called
  // under the intake's lock, from the PPO thread or a Submit) until
  // CloseStream. A newer stream of the same actor replaces an older one.
  int64_t OpenStream(int actor_id, AckCallback on_ack);
  void CloseStream(int64_t stream_id);

  // Checks, decodes and queues `segment`. A duplicate (a sequence number of
  // this actor process already seen) is dropped and acknowledged again.
  // Errors: INVALID_ARGUMENT naming the field (the stream must end with it);
  // FAILED_PRECONDITION for a closed stream or an actor process that was
  // replaced; RESOURCE_EXHAUSTED when the queue is full (the actor exceeded
  // its credits) or the segment does not fit in the budget (the actor sends
  // it again). Once closed, segments are accepted and dropped.
  absl::Status Submit(int64_t stream_id,
                      std::unique_ptr<RolloutSegment> segment);
  // Counts `status` (a segment refused before it could be submitted) as
  // rejected; returns it.
  absl::Status Reject(absl::Status status);

  // The learner's latest policy version: acks carry it, and staging
  // measures a segment's lag from it.
  void SetPolicyVersion(int64_t version);

  // PPO thread. Waits up to `timeout` for a queued segment; stages it, or
  // drops it as stale (acknowledged at once). True when what is staged
  // completes a batch.
  bool StageNext(absl::Duration timeout);
  // The staged batch, taken out of the staging area.
  SegmentBatch TakeBatch();
  // Marks the batch's segments used (unless their actor process has been
  // replaced since) and acknowledges them to their actors.
  void AcknowledgeUsed(const SegmentBatch& batch);
  // The run is over: what waits is dropped (its budget given back) and
  // later segments are accepted and dropped.
  void Close();

  // Per actor process, the highest sequence number acknowledged: of the
  // actors that streamed here (`streamed_here_only`), or of every actor
  // known (including those restored from a checkpoint).
  std::vector<AckWatermark> Watermarks(bool streamed_here_only) const;
  // A resumed learner: resends of segments at or below these watermarks
  // are duplicates.
  void RestoreWatermarks(const std::vector<AckWatermark>& watermarks);

  IntakeCounts counts() const;
  int credits() const { return options_.credits; }

 private:
  struct Stream {
    int actor_id;
    AckCallback on_ack;
  };
  // Per actor id: the process streaming as it and its numbering.
  struct ActorState {
    uint64_t incarnation = 0;
    bool known = false;
    // The processes it moved on from (newest last, at most
    // kMaxReplacedIncarnations): their segments are refused.
    std::deque<uint64_t> replaced;
    int64_t last_sequence = 0;
    int64_t acked = 0;
    int64_t dropped_stale = 0;
    bool streamed_here = false;
  };
  static constexpr size_t kMaxReplacedIncarnations = 16;

  absl::Status CheckHeader(const RolloutSegment& segment, int stream_actor);
  void SendAck(int actor_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MarkAcked(const IntakeSegment& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool BatchComplete() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const SegmentIntakeOptions options_;
  mutable absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  int64_t policy_version_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t next_stream_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int64_t, Stream> streams_ ABSL_GUARDED_BY(mu_);
  std::map<int, int64_t> actor_stream_ ABSL_GUARDED_BY(mu_);
  std::map<int, ActorState> actors_ ABSL_GUARDED_BY(mu_);
  int streamed_here_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<std::unique_ptr<IntakeSegment>> queue_ ABSL_GUARDED_BY(mu_);
  SegmentBatch staged_ ABSL_GUARDED_BY(mu_);
  int64_t staged_steps_ ABSL_GUARDED_BY(mu_) = 0;
  IntakeCounts counts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rl

#endif  // RL_LEARNER_SEGMENT_INTAKE_H_
