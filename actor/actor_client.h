// The actor process's core: collects rollout segments with the newest policy
// it has and streams them to a learner, which streams policies back.
//
// Data flow: policy thread (SubscribePolicy) -> decoded ActorCritic, swapped
// in at a segment boundary -> step loop (Run's thread) fills one of two
// Rollout buffers -> sender thread encodes it into a RolloutSegment, adds it
// to the SegmentWindow and writes what the window says on StreamRollouts
// (tensor bytes from the encoded segment itself, common/grpc_message.h) ->
// ack reader thread feeds acks and credits back to the window.
// The protocol's state (sequence numbers, acks, credits, resends) lives in
// SegmentWindow; this class moves bytes, waits, and reconnects.
//
// Threads (named, all joined before Run() returns):
//   Run()         step loop; waits only for a free buffer, for credits and, in
//                 SYNC mode, for a policy newer than the one it collected with.
//   actor-send    owns the StreamRollouts stream: encodes, (re)sends in
//                 sequence order, reconnects with jittered backoff.
//   actor-acks    one per StreamRollouts stream: reads RolloutAcks.
//   actor-policy  owns the SubscribePolicy stream, reconnects with backoff.
// The step loop and the lifecycle are in actor_client.cc, the three threads
// that talk to the learner in learner_link.cc.
#ifndef RL_ACTOR_ACTOR_CLIENT_H_
#define RL_ACTOR_ACTOR_CLIENT_H_

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "actor/league.h"
#include "actor/segment_collector.h"
#include "actor/segment_window.h"
#include "common/backoff.h"
#include "common/raw_client_stream.h"
#include "common/security.h"
#include "common/shared_segments.h"
#include "common/thread.h"
#include "grpcpp/grpcpp.h"
#include "policy/actor_critic.h"
#include "policy/rollout.h"
#include "proto/common.pb.h"
#include "proto/learner.grpc.pb.h"

namespace rl {

class Emitter;

struct ActorOptions {
  // "host:port" of the learner.
  std::string learner_address;
  // The channel's TLS and bearer token (null: Security::ProcessDefault()).
  std::shared_ptr<const Security> security;
  // The run (validated, defaults applied: LoadRunSpecFile's result).
  RunSpec spec;
  // Sent with every segment and subscription; empty: spec.name().
  std::string run_id;
  // This actor's key from the coordinator (Assignment.run_key), shown to the
  // learner with `actor_id` on every stream; empty for a learner that asks
  // for none.
  std::string run_key;
  // Rank of this actor in the run; also offsets its seed.
  int actor_id = 0;
  // Threads stepping the environments.
  int env_threads = 1;
  // Where environment plugins may be loaded from (empty: anywhere).
  std::vector<std::string> env_plugin_dirs;
  // A Chrome trace of the first `profile_segments` segments' collection
  // (LibTorch's profiler: inference, copies) to `profile_path` (empty:
  // profile-<run>-actor<actor_id>.json); 0: none.
  int profile_segments = 0;
  std::string profile_path;
  // Run() fails with UNAVAILABLE after this long without a connection.
  absl::Duration max_disconnected = absl::Seconds(120);
  // Reconnect backoff: doubles from initial to max, with +-20% jitter.
  absl::Duration initial_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(5);
  // On Stop(): how long to wait for the learner to acknowledge what is queued.
  absl::Duration flush_timeout = absl::Seconds(5);
  // Credits assumed on a new stream before the learner's first ack.
  int initial_credits = 2;
  // Same-host transport: each stream offers the learner slots of shared
  // memory (common/shared_segments.h); a learner on this host takes them
  // and segments go through them, not the socket. False: never offered.
  bool shared_memory = true;
  // Metrics go here (not owned; null: none), labelled actor=<actor_id>:
  // episode return and length, env steps/s, inference and env time per
  // segment, segment send time.
  Emitter* emitter = nullptr;
};

// Monotone counters, for logs and tests.
struct ActorCounters {
  int64_t segments_collected = 0;
  // Successful writes, resends included.
  int64_t segments_sent = 0;
  // Writes of a segment already written on an earlier stream.
  int64_t segments_resent = 0;
  // Writes whose segment went through shared memory (included above).
  int64_t segments_shared = 0;
  // Highest acknowledged sequence number (= segments acknowledged).
  int64_t segments_acked = 0;
  // Attempts (either method) to open a stream again after one ended.
  int64_t reconnects = 0;
  int64_t policy_updates_received = 0;
  // Newest policy version received (0: none yet).
  int64_t latest_version = 0;
  // As last reported by the learner.
  int64_t dropped_stale = 0;
  // SYNC mode: the step loop waits for a version newer than this (0: not
  // waiting).
  int64_t waiting_for_newer_than = 0;
  bool final_received = false;
};

class ActorClient {
 public:
  // INVALID_ARGUMENT for a bad address or a run the environments reject.
  // Connects lazily; nothing is sent before Run().
  static absl::StatusOr<std::unique_ptr<ActorClient>> Create(
      const ActorOptions& options);

  ~ActorClient();
  ActorClient(const ActorClient&) = delete;
  ActorClient& operator=(const ActorClient&) = delete;

  // Collects and streams until the learner sends its final policy or Stop()
  // is called (OK), or fails: UNAVAILABLE after max_disconnected without a
  // connection to the learner, or a collection error. Call once.
  absl::Status Run() ABSL_LOCKS_EXCLUDED(mu_);

  // Asks Run() to stop at the next segment boundary, flush what is queued
  // (bounded by flush_timeout) and return. Thread-safe; not signal-safe.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  ActorCounters counters() const ABSL_LOCKS_EXCLUDED(mu_);

  // Waits until `predicate(counters())` holds; false at the timeout.
  bool AwaitCounters(const std::function<bool(const ActorCounters&)>& predicate,
                     absl::Duration timeout) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // A policy version as the step loop uses it.
  struct PolicyVersion {
    int64_t version = 0;
    int64_t env_steps = 0;  // the run's, when the learner made it
    ActorCritic policy{nullptr};
    // A run of several policies: the second one's on, in the run's order.
    std::vector<ActorCritic> others;
    // A league run's first update of a subscription: the learner's kept
    // versions (PolicyUpdate.league_pool), oldest first.
    std::vector<std::pair<int64_t, ActorCritic>> league_pool;
  };
  // A filled buffer handed from the step loop to the sender.
  struct Handoff {
    int buffer = 0;
    int64_t sequence_number = 0;
    int64_t policy_version = 0;
    std::vector<float> episode_returns;
    std::vector<int32_t> episode_lengths;
    // A league's: the rows sent (the trained seats'), and its matches.
    torch::Tensor rows;
    std::vector<LeagueMatch> matches;
    // A run of several policies: the row each episode ended on.
    std::vector<int64_t> episode_rows;
  };

  ActorClient(const ActorOptions& options, uint64_t seed, torch::Device device,
              std::unique_ptr<SegmentCollector> collector,
              std::unique_ptr<SegmentWindow> window);

  absl::Status StepLoop() ABSL_LOCKS_EXCLUDED(mu_);
  // A league run, before each segment: the league begins with the first
  // policy received (its version 0), then freezes a version every
  // league.snapshot_interval updates of the ones received.
  absl::Status AdvanceLeague(const PolicyVersion& policy, ActorCritic& net);
  // A run of several policies, before a segment of a new version: each of
  // `policy`'s networks acts for its agents' rows.
  absl::Status SetRowPolicies(
      const std::shared_ptr<const PolicyVersion>& version);
  // Emits the segment's figures (several policies: each one's episodes
  // apart, labelled with its name).
  void EmitSegment(const Handoff& handoff, int64_t env_steps, double seconds,
                   const CollectTimings& timings)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits (holding mu_) until `ready` or a stop; checks the connection
  // watchdog every poll. True when `ready` holds and no stop was requested.
  template <typename Ready>
  absl::StatusOr<bool> AwaitForStepLoop(const Ready& ready)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckConnected() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Flush() ABSL_LOCKS_EXCLUDED(mu_);

  // The sender thread: encodes handoffs, opens the rollout stream, writes
  // the window's segments, and tears the stream down and reopens it (with
  // backoff) when it breaks. Its state is the sender thread's own.
  struct SenderState;
  enum class SenderAction { kNone, kEncode, kOpen, kWrite, kTeardown, kExit };
  void SenderLoop() ABSL_LOCKS_EXCLUDED(mu_);
  // Waits for work and says what it is (taking a handoff or a write).
  SenderAction NextSenderAction(SenderState* s, std::optional<Handoff>* handoff,
                                std::optional<SegmentWindow::Write>* write)
      ABSL_LOCKS_EXCLUDED(mu_);
  void OpenRolloutStream(SenderState* s) ABSL_LOCKS_EXCLUDED(mu_);
  void WriteSegment(SenderState* s, const SegmentWindow::Write& write)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Writes `write` through the stream's shared memory: whether the stream
  // took it, or nullopt when no slot could hold it (send the bytes).
  std::optional<bool> WriteShared(SenderState* s,
                                  const SegmentWindow::Write& write)
      ABSL_LOCKS_EXCLUDED(mu_);
  // After a broken stream: closes it and schedules the reconnect, or
  // records a refusal that cannot change as the sender's error.
  void TeardownRolloutStream(SenderState* s) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the stream; graceful: half-close and let the learner end it.
  // Returns its status and whether it carried any ack.
  std::pair<grpc::Status, bool> CloseRolloutStream(SenderState* s,
                                                   bool graceful)
      ABSL_LOCKS_EXCLUDED(mu_);
  void EncodeHandoff(const Handoff& handoff) ABSL_LOCKS_EXCLUDED(mu_);
  // `shared`: the stream's shared memory offered (null: none), whose slots
  // each ack frees.
  void AckReaderLoop(RawClientStream<RolloutAck>* stream,
                     SharedSegmentWriter* shared) ABSL_LOCKS_EXCLUDED(mu_);
  void PolicyLoop() ABSL_LOCKS_EXCLUDED(mu_);
  // `update`'s networks (the first's, and with several policies every
  // other's, by name) into `out`, on the actor's device.
  absl::Status DecodePolicies(const PolicyUpdate& update,
                              PolicyVersion* out) const;

  // The reconnect delays of a stream (initial_backoff .. max_backoff).
  Backoff MakeBackoff() const;

  const ActorOptions options_;
  // The actor's own seed (spec.seed + 1000003 x actor_id): its envs' and
  // its league's.
  const uint64_t seed_;
  const std::string run_id_;
  const EnvSpec env_spec_;
  const ActorCriticConfig policy_config_;
  // Where the policy acts (resources.actor_device).
  const torch::Device device_;
  const bool sync_mode_;
  // The actors streaming to this actor's learner rank (actor a streams to
  // rank a % num_learners): about as many segments as each update takes.
  const int actors_per_learner_;
  std::unique_ptr<SegmentCollector> collector_;
  // A league run's frozen opponents (the step loop's own; null before the
  // first policy and in other runs).
  std::unique_ptr<League> league_;
  // The league versions the learner sent (PolicyUpdate.league_pool) until
  // the league begins with them; asked for while it has not
  // (league_started_).
  std::vector<std::pair<int64_t, ActorCritic>> learner_league_pool_
      ABSL_GUARDED_BY(mu_);
  bool league_started_ ABSL_GUARDED_BY(mu_) = false;
  // A run of several policies: the version whose networks act (the step
  // loop's own; null: none yet).
  std::shared_ptr<const PolicyVersion> row_policies_of_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<LearnerService::Stub> stub_;
  // Buffer i is written by the step loop while free_[i], read by the sender
  // until it sets free_[i] again.
  std::array<Rollout, 2> buffers_;
  // A GPU collector's segments come to the host in these page-locked
  // buffers, one per buffer above (read by the sender thread only).
  std::array<torch::Tensor, 2> staging_;

  mutable absl::Mutex mu_;
  bool run_called_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool final_received_ ABSL_GUARDED_BY(mu_) = false;
  // Tells the sender and policy threads to wind down.
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  bool sender_done_ ABSL_GUARDED_BY(mu_) = false;
  // Set by the sender when it cannot go on (ends Run with it).
  absl::Status sender_error_ ABSL_GUARDED_BY(mu_);
  std::array<bool, 2> free_ ABSL_GUARDED_BY(mu_) = {true, true};
  std::shared_ptr<const PolicyVersion> policy_ ABSL_GUARDED_BY(mu_);
  std::deque<Handoff> handoffs_ ABSL_GUARDED_BY(mu_);
  // Used only under mu_ (it has no lock of its own).
  const std::unique_ptr<SegmentWindow> window_ ABSL_PT_GUARDED_BY(mu_);
  // Current StreamRollouts stream: whether it broke, whether the learner
  // acked on it.
  bool stream_broken_ ABSL_GUARDED_BY(mu_) = false;
  bool stream_got_ack_ ABSL_GUARDED_BY(mu_) = false;
  bool ack_reader_done_ ABSL_GUARDED_BY(mu_) = false;
  // The learner reads the current stream's segments from shared memory.
  bool stream_shared_ ABSL_GUARDED_BY(mu_) = false;
  // Contexts of the open calls, for TryCancel from other threads.
  grpc::ClientContext* rollout_context_ ABSL_GUARDED_BY(mu_) = nullptr;
  grpc::ClientContext* policy_context_ ABSL_GUARDED_BY(mu_) = nullptr;
  absl::Time last_connected_ ABSL_GUARDED_BY(mu_);
  ActorCounters counters_ ABSL_GUARDED_BY(mu_);
  // Step of the latest collect metrics (collect_metrics.h).
  int64_t metrics_step_ ABSL_GUARDED_BY(mu_) = 0;

  NamedThread sender_thread_;
  NamedThread policy_thread_;
};

}  // namespace rl

#endif  // RL_ACTOR_ACTOR_CLIENT_H_
