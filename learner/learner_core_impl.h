// LearnerCore's implementation, shared by learner_core.cc (the update loop)
// and learner_core_state.cc (checkpoints and the start state); private to the
// learner_core library.
#ifndef RL_LEARNER_LEARNER_CORE_IMPL_H_
#define RL_LEARNER_LEARNER_CORE_IMPL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/thread.h"
#include "learner/actor_returns.h"
#include "learner/checkpoint.h"
#include "learner/checkpoint_keeper.h"
#include "learner/league_games.h"
#include "learner/learner_core.h"
#include "learner/learner_progress.h"
#include "learner/other_policies.h"
#include "learner/policy_publisher.h"
#include "learner/ppo_updater.h"
#include "learner/return_window.h"
#include "learner/segment_intake.h"
#include "learner/segment_ledger.h"
#include "policy/actor_critic.h"
#include "policy/segment_codec.h"
#include "proto/training_state.pb.h"
#include "runspec/run_spec.h"

namespace rl {

class LearnerCore::Impl {
 public:
  explicit Impl(const LearnerOptions& options);

  absl::Status Start();

  ~Impl();

  void Stop();

  SegmentIntake& intake() { return *intake_; }
  PolicyPublisher& publisher() { return publisher_; }

  LearnerStatus GetStatus() const;

  LearnerFaultCounts fault_counts() const;

  bool WaitUntilDone(absl::Duration timeout);

  absl::Status final_status() const {
    absl::MutexLock lock(&mu_);
    return final_status_;
  }

 private:
  // Rank 0 learns, for the checkpoint it writes for the gang, which
  // segments the actors of every rank have had acknowledged.
  absl::Status GatherAckedSegments();

  // The audit trail of which segments each update used (segment_ledger.h);
  // a learner that cannot open it trains on without it.
  void OpenLedger();

  bool StopRequested() const {
    absl::MutexLock lock(&mu_);
    return stop_;
  }

  void Run();

  absl::Status Loop();

  // A trace that cannot be written is the operator's to fix; the run goes
  // on.
  static void LogProfileError(const absl::Status& status);

  std::string ProfilePath() const;

  Rollout OnDevice(Rollout rollout) const;

  // A CUDA learner takes the rollout onto its device in one packed copy,
  // so that GAE and the epochs' shuffles run there as for a rollout
  // collected on the device: on the host, a permutation of a GPU-scale
  // batch per epoch cost more than the update (measured on an H200).
  // Recurrent policies shuffle whole env sequences on the host.
  absl::StatusOr<Rollout> ToUpdateDevice(Rollout rollout) const;

  absl::Status UpdateFromStaged();

  // Counts a successful update, tells the intake the new version, and
  // emits its figures.
  void RecordUpdate(
      const SegmentBatch& batch,
      const std::vector<std::vector<std::vector<float>>>& segment_returns,
      const UpdateStats& stats, int64_t steps, bool target_here,
      ReturnWindow returns_after, double seconds);

  absl::Status CheckWeightsFinite(int64_t update);

  bool Finished() {
    absl::MutexLock lock(&mu_);
    return progress_.Finished();
  }

  // Encodes the weights once and hands the same message to every subscriber.
  absl::Status Publish(bool final);

  // The checkpoint of the gang's state now; rank 0 writes it, through
  // `write` (one of CheckpointKeeper's).
  using WriteFn = absl::Status (CheckpointKeeper::*)(int64_t, int64_t,
                                                     ActorCritic&,
                                                     torch::optim::Optimizer&,
                                                     const TensorMap&);
  absl::Status Checkpoint(WriteFn write = &CheckpointKeeper::Write);

  // The learner's state beyond the weights and the optimizer.
  TensorMap StateTensors();

  // Rank 0's start: its own newest checkpoint, else another run's
  // (options_.start_from), else none (a new run).
  absl::Status LoadStartState();

  // Another run's newest checkpoint, under <dir>/checkpoints.
  absl::Status StartFrom(const std::string& dir);

  // `source` names where `extra` came from in errors. Not `own_run`: the
  // segment watermarks are another run's actors' and stay out.
  absl::Status ApplyState(const TensorMap& extra, const std::string& source,
                          bool own_run = true);

  // Puts a checkpoint's kept league versions back in the publisher,
  // moving them out of `state`.
  absl::Status RestoreLeaguePool(LeaguePoolState* state,
                                 const std::string& source);

  // The policy version and env steps, read under mu_ (for log lines).
  std::pair<int64_t, int64_t> VersionAndSteps() const;

  const LearnerOptions options_;
  RunSpec own_run_;  // the first policy's run (NamedPolicyRun), or the run
  ActorCriticConfig policy_config_;
  SegmentShape shape_;
  int rank_ = 0;
  int world_size_ = 1;
  int actors_here_ = 1;  // actors streaming to this rank
  std::unique_ptr<SegmentIntake> intake_;
  CheckpointKeeper checkpoints_;
  ActorCritic policy_{nullptr};
  std::unique_ptr<PpoUpdater> updater_;
  OtherPolicies others_;                 // a policies block's second policy on
  std::optional<SegmentLedger> ledger_;  // the PPO thread's, once started
  // A league run's games (rank 0's PPO thread).
  std::optional<LeagueGames> league_games_;
  NamedThread thread_;

  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;  // Stop() ran
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status final_status_ ABSL_GUARDED_BY(mu_);
  // The counters; the segment counts are the intake's (GetStatus).
  LearnerProgress progress_ ABSL_GUARDED_BY(mu_);
  // Rank 0: every rank's actors' watermarks at the last gather.
  std::vector<AckWatermark> gathered_ ABSL_GUARDED_BY(mu_);
  LearnerFaultCounts faults_ ABSL_GUARDED_BY(mu_);
  // Each actor's episodes of the last updates (this rank's actors).
  static constexpr int kActorReturnsWindow = 20;
  ActorReturns actor_returns_ ABSL_GUARDED_BY(mu_){
      ActorReturns::Options{kActorReturnsWindow}};

  PolicyPublisher publisher_;
};

}  // namespace rl

#endif  // RL_LEARNER_LEARNER_CORE_IMPL_H_
