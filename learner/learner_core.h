// The learner's core, free of gRPC: validated rollout segments in, PPO
// updates, versioned policies out.
//
// Data flow: stream reactors -> SubmitSegment -> the segment intake
// (learner/segment_intake.h: validate, dedupe by (actor process, sequence
// number), a queue bounded in segments and in bytes by the process's
// SegmentBudget, stale segments dropped, the rest staged) -> PPO thread:
// when the batch is complete: concatenate, PPO update, version++ -> encode
// the weights once -> notify subscribers; acknowledge the segments used to
// their actors. A gang's agreement beyond the gradients is
// learner/gang_sync.h; the counters a checkpoint carries, TrainingState
// (learner/training_state.h).
#ifndef RL_LEARNER_LEARNER_CORE_H_
#define RL_LEARNER_LEARNER_CORE_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "learner/collective.h"
#include "learner/policy_publisher.h"
#include "learner/segment_budget.h"
#include "learner/segment_intake.h"
#include "policy/actor_critic.h"
#include "proto/common.pb.h"
#include "proto/learner.pb.h"

namespace rl {

class Emitter;

struct LearnerOptions {
  RunSpec spec;
  std::string run_id;
  // Checkpoints under <run_dir>/checkpoints; the newest complete one is
  // resumed at start. Empty: no checkpoints.
  std::string run_dir;
  // Metrics of every update go here (not owned; null: none): losses, KL,
  // clip fraction, entropy, explained variance, SPS, policy lag, queue
  // depths, update time; the gradient norm every `grad_norm_interval`
  // updates.
  Emitter* emitter = nullptr;
  int grad_norm_interval = 10;
  // Data-parallel: this core is one rank of `collective`'s gang (null:
  // alone). Rank 0 alone resumes from the checkpoint and writes them, and
  // broadcasts its whole state (weights, optimizer, counters, shuffling
  // stream) at start; each rank's batch is its share of the actors (actor
  // a belongs to rank a % world_size); env steps, the budget and the end
  // are global (one small all-reduce per update); every
  // `sync_check_interval` updates the ranks compare a hash of their weights
  // and a mismatch fails the run (DATA_LOSS).
  std::shared_ptr<Collective> collective;
  int sync_check_interval = 10;
  // resources.learner_per_policy: where the learners of the run's policies
  // after its first listen (policy i + 1's at [i]; learner/policy_learner.h),
  // called with run_id, `run_key` and `gang_id`. Empty: this core trains
  // every policy.
  std::vector<std::string> policy_learners;
  std::string run_key;
  std::string gang_id;  // Assignment.gang_id: the placement's
  // True once a newer assignment waits: calls to the policy learners (the
  // checkpoint READ of a resume among them) stop retrying. Null: never.
  std::function<bool()> cancelled;
  // An update whose loss or gradient turns NaN or inf (in some minibatch) is
  // skipped: those gradients are not applied, the update is counted and
  // reported ("learner/nonfinite_minibatches", "learner/nonfinite_updates")
  // and training goes on; this many such updates in a row fail the run
  // (INTERNAL, the updater's message), counted across a resume (the count
  // is in the checkpoint). Values below 1 mean 1.
  int max_nonfinite_updates = 3;
  // A checkpoint that cannot be written (a full disk, a storage outage) is
  // logged, counted ("learner/checkpoint_failures") and tried again at the
  // next checkpoint interval; this many failures in a row fail the run with
  // the write's status (RESOURCE_EXHAUSTED for a full disk). The final
  // checkpoint, having no next interval, fails the run at once. Values
  // below 1 mean 1.
  int max_checkpoint_failures = 5;
  // Shared by the cores of one learner process (null: no byte budget; the
  // queue's length in segments still bounds what waits).
  std::shared_ptr<SegmentBudget> segment_budget;
  // A Chrome trace of the first `profile_updates` updates (LibTorch's
  // profiler on the PPO thread: batching, the update, publication) to
  // `profile_path` (empty: <run_dir>/profile.json, or profile-<run_id>.json
  // without a run_dir); 0: none.
  int profile_updates = 0;
  std::string profile_path;
  // A run with no checkpoint of its own under run_dir starts from the
  // newest complete checkpoint under <start_from>/checkpoints (another
  // run's directory: a population-based training round going on from its
  // own last round or from a better member's): weights, optimizer,
  // counters, return window; not that run's segment watermarks (its actors
  // are not this run's). FAILED_PRECONDITION where it holds none. Empty: a
  // fresh start.
  std::string start_from;
  // The run ends (successfully) once this many env steps are consumed;
  // 0: at spec.total_env_steps, which the learning-rate schedule spans
  // either way.
  int64_t stop_env_steps = 0;
  // Tests: called on the PPO thread right after each update (before its
  // checks and its publication) with the update's number.
  std::function<void(int64_t, ActorCritic&)> after_update_for_testing;
};

// Faults the learner recovered from, or is recovering from (LearnerStatus
// does not carry them).
struct LearnerFaultCounts {
  // Updates with non-finite minibatches (skipped), in all and in a row.
  int64_t nonfinite_updates = 0;
  int64_t consecutive_nonfinite_updates = 0;
  // Checkpoint writes on this rank (rank 0 writes the gang's).
  int64_t checkpoints_written = 0;
  int64_t checkpoint_failures = 0;
  int64_t consecutive_checkpoint_failures = 0;
};

class LearnerCore {
 public:
  // Builds the policy and optimizer (resuming from the newest checkpoint in
  // run_dir if any) and starts the PPO thread.
  static absl::StatusOr<std::unique_ptr<LearnerCore>> Create(
      const LearnerOptions& options);
  ~LearnerCore();  // Stop().

  // Stops and joins the PPO thread and, stopped before its end, keeps the
  // updates made since the last checkpoint in one more. Idempotent; after
  // it GetStatus() is what the last checkpoint holds.
  void Stop();

  // A rollout stream of `actor_id` opened; acks for this actor go to
  // `on_ack` (called from the PPO thread) until CloseStream. A newer stream
  // of the same actor replaces an older one. Returns a stream id.
  int64_t OpenStream(int actor_id, AckCallback on_ack) {
    return intake_->OpenStream(actor_id, std::move(on_ack));
  }
  void CloseStream(int64_t stream_id) { intake_->CloseStream(stream_id); }

  // Validates `segment` and queues it. A duplicate (already seen sequence
  // number of this actor) is dropped and acknowledged again. Errors:
  // INVALID_ARGUMENT naming the field (the stream must end with it),
  // RESOURCE_EXHAUSTED if the actor exceeded its credits or the segment
  // does not fit in the segment budget (not queued: the actor resends it).
  absl::Status SubmitSegment(int64_t stream_id,
                             std::unique_ptr<RolloutSegment> segment) {
    return intake_->Submit(stream_id, std::move(segment));
  }

  // Policy subscribers: `on_update` is called with every new version (from
  // the PPO thread); Subscribe returns the latest at once as well.
  int64_t Subscribe(PolicyCallback on_update,
                    std::shared_ptr<const PolicyUpdate>* latest) {
    return publisher_->Subscribe(std::move(on_update), latest);
  }
  void Unsubscribe(int64_t subscriber_id) {
    publisher_->Unsubscribe(subscriber_id);
  }
  std::shared_ptr<const PolicyUpdate> LatestPolicy() const {
    return publisher_->Latest();
  }
  // The latest with the league's kept versions (PolicyPublisher), for an
  // actor that has no league yet.
  std::shared_ptr<const PolicyUpdate> LatestPolicyWithLeaguePool() {
    return publisher_->LatestWithLeaguePool();
  }

  LearnerStatus GetStatus() const;
  LearnerFaultCounts fault_counts() const;
  // The run this core trains.
  const std::string& run_id() const { return run_id_; }
  // The largest rollout segment, in bytes on the wire, that this run's
  // actors can send (sized from the run; with room to spare).
  int64_t max_segment_bytes() const { return max_segment_bytes_; }
  // Counts `status` (a segment refused before it could be parsed or
  // submitted) in segments_rejected; returns it.
  absl::Status RejectSegment(absl::Status status) {
    return intake_->Reject(std::move(status));
  }
  // Segments an actor may have in flight beyond its last ack.
  int credits() const { return intake_->credits(); }

  // True once the budget or the target return is reached (the final policy
  // has been published and the last checkpoint written).
  bool WaitUntilDone(absl::Duration timeout);
  // OK, or the error that stopped the PPO thread.
  absl::Status final_status() const;

 private:
  class Impl;
  explicit LearnerCore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  SegmentIntake* intake_;       // the PPO loop's (impl_'s)
  PolicyPublisher* publisher_;  // the PPO loop's (impl_'s)
  int64_t max_segment_bytes_ = 0;
  std::string run_id_;
};

}  // namespace rl

#endif  // RL_LEARNER_LEARNER_CORE_H_
