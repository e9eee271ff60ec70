#include "learner/learner_core.h"

#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <filesystem>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "common/thread.h"
#include "envs/env_registry.h"
#include "learner/checkpoint.h"
#include "learner/gang_sync.h"
#include "learner/ppo_updater.h"
#include "learner/segment_intake.h"
#include "learner/segment_ledger.h"
#include "learner/training_state.h"
#include "learner/update_metrics.h"
#include "policy/actor_critic.h"
#include "policy/compute_device.h"
#include "policy/policy_codec.h"
#include "policy/segment_codec.h"
#include "policy/torch_status.h"
#include "runspec/run_footprint.h"
#include "runspec/run_spec.h"
#include "telemetry/emitter.h"

namespace rl {
namespace {

constexpr size_t kReturnWindow = 100;
constexpr int64_t kFirstVersion = 1;

}  // namespace

// A segment's rollout, decoded against the run's shapes at intake.
struct DecodedRollout : SegmentPayload {
  Rollout rollout;
};

const Rollout& RolloutOf(const IntakeSegment& s) {
  return static_cast<const DecodedRollout&>(*s.payload).rollout;
}

class LearnerCore::Impl {
 public:
  Impl(const LearnerOptions& options, const EnvInfo& info) : options_(options) {
    const RunSpec& spec = options.spec;
    shape_.env.set_id(info.id);
    shape_.env.set_max_episode_steps(info.max_episode_steps);
    shape_.env.set_observation_size(info.observation_size);
    shape_.env.set_num_discrete_actions(info.num_actions);
    shape_.env.set_continuous_action_size(info.action_size);
    shape_.num_steps = spec.segment_length();
    shape_.num_envs = spec.envs_per_actor();
    // Rewards within the env's declared range; scaled ones (divided by a
    // running standard deviation of at least 1e-4, actor/reward_scaler.h)
    // within 1e4 times it. Episode returns are the raw rewards' sums.
    const float scale = spec.ppo().normalize_rewards() ? 1e4f : 1.0f;
    const float reach =
        std::max(std::fabs(info.reward_low), std::fabs(info.reward_high));
    shape_.min_reward =
        spec.ppo().normalize_rewards() ? -reach * scale : info.reward_low;
    shape_.max_reward =
        spec.ppo().normalize_rewards() ? reach * scale : info.reward_high;
    shape_.min_step_return = info.reward_low;
    shape_.max_step_return = info.reward_high;
    if (options.collective != nullptr) {
      rank_ = options.collective->rank();
      world_size_ = options.collective->world_size();
    }
    const int num_actors = spec.resources().num_actors();
    actors_here_ = ActorsOfLearnerRank(rank_, world_size_, num_actors);
    SegmentIntakeOptions intake;
    intake.run_id = options.run_id;
    intake.credits = std::max(2, num_actors + 1);
    intake.queue_capacity =
        static_cast<size_t>(intake.credits * std::max(1, num_actors) * 2);
    intake.actors_here = actors_here_;
    intake.num_actors = num_actors;
    intake.num_learners = world_size_;
    intake.async = spec.sync_mode() == ASYNC;
    intake.max_policy_lag = spec.max_policy_lag();
    intake.batch_steps = static_cast<int64_t>(spec.segment_length()) *
                         spec.envs_per_actor() * actors_here_;
    intake.budget = options.segment_budget;
    intake.decode =
        [this](
            const RolloutSegment& segment) -> absl::StatusOr<DecodedSegment> {
      ASSIGN_OR_RETURN(Rollout rollout, DecodeSegment(segment, shape_));
      DecodedSegment decoded;
      decoded.env_steps = rollout.num_steps() * rollout.num_envs();
      auto payload = std::make_unique<DecodedRollout>();
      payload->rollout = std::move(rollout);
      decoded.payload = std::move(payload);
      return decoded;
    };
    intake.on_stale = [this](const SegmentKey& key) {
      if (ledger_.has_value()) ledger_->Drop(key);
    };
    intake_ = std::make_unique<SegmentIntake>(std::move(intake));
    policy_config_ =
        MakeActorCriticConfig(info.observation_size, info.num_actions,
                              info.action_size, spec.policy(), spec.ppo());
    status_.set_run_id(options.run_id);
    status_.set_policy_version(kFirstVersion);
  }

  absl::Status Start() {
    const RunSpec& spec = options_.spec;
    if (actors_here_ < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "resources.num_actors (", spec.resources().num_actors(),
          ") must be at least resources.num_learners (", world_size_,
          "): learner rank ", rank_, " would get no actor"));
    }
    torch::manual_seed(spec.seed());
    ASSIGN_OR_RETURN(policy_, CreateActorCritic(policy_config_));
    updater_ = std::make_unique<PpoUpdater>(
        policy_, spec.ppo(), spec.total_env_steps(), spec.seed());
    updater_->set_collective(options_.collective.get());
    updater_->set_max_nonfinite_updates(options_.max_nonfinite_updates);
    if (!options_.run_dir.empty() && rank_ == 0) {
      auto latest = LatestCheckpoint(CheckpointRoot());
      if (latest.ok()) {
        TensorMap extra;
        RETURN_IF_ERROR(
            ReadCheckpoint(*latest, policy_, &updater_->optimizer(), &extra));
        RETURN_IF_ERROR(
            ApplyState(extra, absl::StrCat("checkpoint ", *latest)));
        RL_LOG_INFO("resumed from {} at version {}, {} env steps", *latest,
                    status_.policy_version(), status_.env_steps());
      }
    }
    if (options_.collective != nullptr) {
      TensorMap extra;
      if (rank_ == 0) extra = StateTensors();
      RETURN_IF_ERROR(ShareRankZeroState(*options_.collective, policy_,
                                         updater_->optimizer(), &extra));
      if (rank_ != 0) RETURN_IF_ERROR(ApplyState(extra, "rank 0's state"));
    }
    if (!options_.run_dir.empty()) OpenLedger();
    RETURN_IF_ERROR(Publish(/*final=*/false));
    thread_ = StartThread("learner-ppo", [this] { Run(); });
    return absl::OkStatus();
  }

  ~Impl() { Stop(); }

  void Stop() {
    {
      absl::MutexLock lock(&mu_);
      if (stopped_) return;
      stopped_ = true;
      stop_ = true;
    }
    if (thread_.joinable()) thread_.join();
    // Stopped from outside (SIGTERM, a new assignment): keep the updates
    // made since the last checkpoint, unless training had failed (a gang
    // that broke mid-update may hold half an update).
    bool keep = false;
    {
      absl::MutexLock lock(&mu_);
      keep = final_status_.ok() && status_.updates() > checkpointed_updates_;
    }
    if (keep && !options_.run_dir.empty() && rank_ == 0) {
      const absl::Status written = Checkpoint();
      if (!written.ok()) {
        RL_LOG_ERROR("checkpoint on stop failed: {}", written.ToString());
      } else {
        RL_LOG_INFO("checkpoint on stop at update {}", GetStatus().updates());
      }
    }
  }

  SegmentIntake& intake() { return *intake_; }

  int64_t Subscribe(PolicyCallback on_update,
                    std::shared_ptr<const PolicyUpdate>* latest) {
    absl::MutexLock lock(&subscribers_mu_);
    const int64_t id = ++next_subscriber_id_;
    subscribers_[id] = std::move(on_update);
    *latest = latest_policy_;
    return id;
  }

  void Unsubscribe(int64_t id) {
    absl::MutexLock lock(&subscribers_mu_);
    subscribers_.erase(id);
  }

  std::shared_ptr<const PolicyUpdate> LatestPolicy() const {
    absl::MutexLock lock(&subscribers_mu_);
    return latest_policy_;
  }

  LearnerStatus GetStatus() const {
    LearnerStatus status;
    {
      absl::MutexLock lock(&mu_);
      status = status_;
    }
    const IntakeCounts counts = intake_->counts();
    status.set_segments_received(counts.received);
    status.set_segments_rejected(counts.rejected);
    status.set_segments_duplicate(counts.duplicate);
    status.set_segments_dropped_stale(counts.dropped_stale);
    status.set_connected_actors(counts.connected_actors);
    return status;
  }

  LearnerFaultCounts fault_counts() const {
    absl::MutexLock lock(&mu_);
    return faults_;
  }

  bool WaitUntilDone(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&done_), timeout);
  }

  absl::Status final_status() const {
    absl::MutexLock lock(&mu_);
    return final_status_;
  }

 private:
  // Rank 0 learns, for the checkpoint it writes for the gang, which
  // segments the actors of every rank have had acknowledged.
  absl::Status GatherAckedSegments() {
    ASSIGN_OR_RETURN(
        std::vector<AckWatermark> all,
        GatherWatermarks(*options_.collective, intake_->Watermarks(true)));
    if (rank_ == 0) {
      absl::MutexLock lock(&mu_);
      gathered_ = MergeWatermarks(gathered_, all, {});
    }
    return absl::OkStatus();
  }

  // The audit trail of which segments each update used (segment_ledger.h);
  // a learner that cannot open it trains on without it.
  void OpenLedger() {
    std::error_code error;
    std::filesystem::create_directories(options_.run_dir, error);
    absl::StatusOr<SegmentLedger> ledger =
        SegmentLedger::Open(SegmentLedgerPath(options_.run_dir, rank_));
    if (!ledger.ok()) {
      RL_LOG_WARNING("no segment ledger: {}", ledger.status().ToString());
      return;
    }
    ledger_.emplace(*std::move(ledger));
    ledger_->Resume(GetStatus().updates());
  }

  std::string CheckpointRoot() const {
    return (std::filesystem::path(options_.run_dir) / "checkpoints").string();
  }

  bool StopRequested() const {
    absl::MutexLock lock(&mu_);
    return stop_;
  }

  void Run() {
    absl::Status status = Loop();
    // Done (or failed): what still waits is never used; it frees its share
    // of the learner's segment budget now, not when the core goes.
    intake_->Close();
    absl::MutexLock lock(&mu_);
    if (!status.ok()) {
      RL_LOG_ERROR("learner stopped: {}", std::string(status.message()));
    }
    final_status_ = status;
    done_ = true;
  }

  absl::Status Loop() {
    while (true) {
      const bool complete = intake_->StageNext(absl::Milliseconds(50));
      if (StopRequested()) return absl::OkStatus();
      if (!complete) continue;
      RETURN_IF_ERROR(UpdateFromStaged());
      if (Finished()) {
        RETURN_IF_ERROR(Publish(/*final=*/true));
        // Every rank finishes at the same update (the steps are the gang's).
        if (options_.collective != nullptr) {
          RETURN_IF_ERROR(GatherAckedSegments());
        }
        if (!options_.run_dir.empty()) {
          // No later interval to try again at: the run's end is not
          // durable, so the run fails (its last checkpoint is resumable).
          const absl::Status written = Checkpoint();
          if (!written.ok()) {
            return absl::Status(
                written.code(),
                absl::StrCat("the final checkpoint failed (",
                             LatestCheckpointText(), "): ", written.message()));
          }
        }
        return absl::OkStatus();
      }
    }
  }

  absl::Status UpdateFromStaged() {
    const SegmentBatch batch = intake_->TakeBatch();
    int64_t env_steps_before;
    {
      absl::MutexLock lock(&mu_);
      env_steps_before = status_.env_steps();
    }
    std::vector<Rollout> parts;
    parts.reserve(batch.size());
    for (const auto& s : batch) parts.push_back(RolloutOf(*s));
    ASSIGN_OR_RETURN(const Rollout rollout, ConcatenateRollouts(parts));
    // The returns window after this batch, and whether it reaches the
    // target; the window is kept only once the update succeeded.
    int64_t steps = rollout.num_steps() * rollout.num_envs();
    std::deque<float> returns_after;
    bool target_here = false;
    {
      absl::MutexLock lock(&mu_);
      returns_after = recent_returns_;
      for (const auto& s : batch) {
        for (float r : s->proto->episode_returns()) {
          returns_after.push_back(r);
          if (returns_after.size() > kReturnWindow) returns_after.pop_front();
        }
      }
      const RunSpec& spec = options_.spec;
      target_here = spec.has_target_return() &&
                    returns_after.size() >= kReturnWindow &&
                    Mean(returns_after) >= spec.target_return();
    }
    // In a gang: the gang's steps, and whether any rank reached the target,
    // summed in the update's planning all-reduce, so that every rank counts
    // the same steps and ends at the same update.
    std::vector<double> gang_sums{static_cast<double>(steps),
                                  target_here ? 1.0 : 0.0};
    const auto start = std::chrono::steady_clock::now();
    ASSIGN_OR_RETURN(
        const UpdateStats stats,
        updater_->Update(
            rollout, env_steps_before,
            options_.collective != nullptr ? &gang_sums : nullptr));
    steps = static_cast<int64_t>(gang_sums[0]);
    target_here = gang_sums[1] > 0;
    const int64_t update = GetStatus().updates() + 1;
    if (options_.after_update_for_testing) {
      options_.after_update_for_testing(update, policy_);
    }
    // Never publish (or checkpoint) weights that are not finite.
    RETURN_IF_ERROR(CheckWeightsFinite(update));
    if (stats.nonfinite_minibatches > 0) {
      RL_LOG_WARNING(
          "update {}: the loss or gradient was not finite in {} minibatches; "
          "their gradients were not applied ({} such updates in a row, the "
          "run fails at {})",
          update, stats.nonfinite_minibatches,
          stats.consecutive_nonfinite_updates,
          std::max(1, options_.max_nonfinite_updates));
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    RecordUpdate(batch, stats, steps, target_here, std::move(returns_after),
                 seconds);
    if (ledger_.has_value()) {
      std::vector<SegmentKey> used;
      used.reserve(batch.size());
      for (const auto& s : batch) used.push_back(s->key());
      ledger_->Update(GetStatus().updates(), used);
    }
    RETURN_IF_ERROR(Publish(/*final=*/false));
    // The batch's segments are used: acknowledge them.
    intake_->AcknowledgeUsed(batch);
    const int64_t updates = GetStatus().updates();
    if (options_.collective != nullptr && options_.sync_check_interval > 0 &&
        updates % options_.sync_check_interval == 0) {
      RETURN_IF_ERROR(
          CheckInSync(*options_.collective, WeightsAndStatistics(policy_),
                      absl::StrCat("after update ", updates, ", the weights")));
    }
    const int interval = options_.spec.checkpoint_interval();
    const bool checkpoint_due = interval > 0 && updates % interval == 0;
    // Every rank takes part, whether or not it has a run directory: the
    // gather is a collective.
    if (options_.collective != nullptr && checkpoint_due) {
      RETURN_IF_ERROR(GatherAckedSegments());
    }
    if (!options_.run_dir.empty() && checkpoint_due) {
      RETURN_IF_ERROR(PeriodicCheckpoint());
    }
    return absl::OkStatus();
  }

  // Counts a successful update, tells the intake the new version, and
  // emits its figures.
  void RecordUpdate(const SegmentBatch& batch, const UpdateStats& stats,
                    int64_t steps, bool target_here,
                    std::deque<float> returns_after, double seconds) {
    const IntakeCounts intake = intake_->counts();
    absl::MutexLock lock(&mu_);
    recent_returns_ = std::move(returns_after);
    for (const auto& s : batch) episodes_ += s->proto->episode_returns_size();
    status_.set_env_steps(status_.env_steps() + steps);
    status_.set_updates(status_.updates() + 1);
    status_.set_policy_version(status_.policy_version() + 1);
    intake_->SetPolicyVersion(status_.policy_version());
    RunProgress* progress = status_.mutable_progress();
    progress->set_env_steps(status_.env_steps());
    progress->set_policy_version(status_.policy_version());
    progress->set_episodes(episodes_);
    progress->set_mean_return(MeanReturn());
    const double elapsed = absl::ToDoubleSeconds(absl::Now() - started_);
    progress->set_steps_per_second(
        elapsed > 0 ? (status_.env_steps() - steps_at_start_) / elapsed : 0);
    if (target_here && !target_reached_) {
      target_reached_ = true;
      target_reached_at_ = status_.env_steps();
    }
    progress->set_target_reached_at_steps(target_reached_ ? target_reached_at_
                                                          : 0);
    if (stats.nonfinite_minibatches > 0) ++faults_.nonfinite_updates;
    faults_.consecutive_nonfinite_updates = stats.consecutive_nonfinite_updates;
    RL_LOG_DEBUG("update {}: {} segments, {:.3f} s, kl {:.4f}",
                 status_.updates(), batch.size(), seconds, stats.approx_kl);
    Emitter* e = options_.emitter;
    if (e == nullptr) return;
    const int64_t step = status_.env_steps();
    double lag = 0;
    for (const auto& seg : batch) {
      lag += static_cast<double>(status_.policy_version() - 1 -
                                 seg->policy_version);
    }
    EmitUpdateMetrics(e, step, stats, seconds, status_.updates(),
                      options_.grad_norm_interval);
    LearnerUpdateFigures figures;
    figures.nonfinite_updates = faults_.nonfinite_updates;
    figures.steps_per_second = progress->steps_per_second();
    figures.mean_policy_lag =
        batch.empty() ? 0 : lag / static_cast<double>(batch.size());
    figures.queue_depth = intake.queued;
    figures.segments = static_cast<int64_t>(batch.size());
    figures.segments_dropped_stale = intake.dropped_stale;
    figures.policy_version = status_.policy_version();
    figures.connected_actors = intake.connected_actors;
    figures.has_mean_return = !recent_returns_.empty();
    if (figures.has_mean_return) figures.mean_return = MeanReturn();
    EmitLearnerUpdateFigures(e, step, figures);
  }

  // A failed write is counted (by Checkpoint) and tried again at the next
  // interval: a full disk may be freed meanwhile. Only
  // max_checkpoint_failures in a row end the run, with the write's status.
  absl::Status PeriodicCheckpoint() {
    const absl::Status written = Checkpoint();
    if (written.ok()) return absl::OkStatus();
    const int64_t in_a_row = fault_counts().consecutive_checkpoint_failures;
    const int limit = std::max(1, options_.max_checkpoint_failures);
    if (in_a_row < limit) {
      RL_LOG_ERROR(
          "checkpoint failed ({} in a row; the run fails at {}), training "
          "goes on and the next interval tries again: {}",
          in_a_row, limit, written.ToString());
      return absl::OkStatus();
    }
    return absl::Status(written.code(),
                        absl::StrCat(in_a_row,
                                     " checkpoints in a row failed (the limit, "
                                     "max_checkpoint_failures, is ",
                                     limit, "; ", LatestCheckpointText(),
                                     "): ", written.message()));
  }

  // Where a restart would resume, for messages.
  std::string LatestCheckpointText() const {
    const absl::StatusOr<std::string> latest =
        LatestCheckpoint(CheckpointRoot());
    return latest.ok()
               ? absl::StrCat("the latest complete checkpoint is still ",
                              *latest)
               : "there is no complete checkpoint";
  }

  absl::Status CheckWeightsFinite(int64_t update) {
    const std::vector<torch::Tensor> all = WeightsAndStatistics(policy_);
    ASSIGN_OR_RETURN(const bool finite,
                     CatchTorchErrors("checking the weights", [&] {
                       std::vector<torch::Tensor> checks;
                       for (const auto& t : all) {
                         checks.push_back(torch::isfinite(t).all());
                       }
                       return torch::stack(checks).all().item<bool>();
                     }));
    if (finite) return absl::OkStatus();
    std::string where;
    for (const auto& item : policy_->named_parameters()) {
      if (!torch::isfinite(item.value()).all().item<bool>()) {
        where = item.key();
        break;
      }
    }
    if (where.empty()) where = "the observation statistics";
    return absl::InternalError(absl::StrCat(
        "after update ", update, " the policy's weights are not finite (NaN ",
        "or inf in ", where, "); they were not published or checkpointed ",
        "(the last published policy is version ", GetStatus().policy_version(),
        "). Lower ppo.learning_rate, or check ", "the scale of the rewards"));
  }

  static double Mean(const std::deque<float>& returns) {
    if (returns.empty()) return std::numeric_limits<double>::quiet_NaN();
    return std::accumulate(returns.begin(), returns.end(), 0.0) /
           returns.size();
  }
  double MeanReturn() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return Mean(recent_returns_);
  }

  bool Finished() {
    absl::MutexLock lock(&mu_);
    return status_.env_steps() >= options_.spec.total_env_steps() ||
           target_reached_;
  }

  // Encodes the weights once and hands the same message to every subscriber.
  absl::Status Publish(bool final) {
    auto update = std::make_shared<PolicyUpdate>();
    RETURN_IF_ERROR(EncodePolicy(policy_, update.get()));
    {
      absl::MutexLock lock(&mu_);
      update->set_version(status_.policy_version());
      update->set_env_steps(status_.env_steps());
    }
    update->set_final(final);
    std::shared_ptr<const PolicyUpdate> shared = std::move(update);
    absl::MutexLock lock(&subscribers_mu_);
    latest_policy_ = shared;
    for (const auto& [id, callback] : subscribers_) callback(shared);
    return absl::OkStatus();
  }

  // Writes and counts a checkpoint (rank 0 only).
  absl::Status Checkpoint() {
    if (rank_ != 0) return absl::OkStatus();  // rank 0 writes the gang's
    const LearnerStatus status = GetStatus();
    const absl::StatusOr<std::string> dir = WriteCheckpoint(
        CheckpointRoot(), status.updates(), policy_, updater_->optimizer(),
        StateTensors(), options_.spec.keep_checkpoints());
    int64_t failures, recovered_after = 0;
    {
      absl::MutexLock lock(&mu_);
      if (dir.ok()) {
        checkpointed_updates_ = status.updates();
        ++faults_.checkpoints_written;
        recovered_after = faults_.consecutive_checkpoint_failures;
        faults_.consecutive_checkpoint_failures = 0;
      } else {
        ++faults_.checkpoint_failures;
        ++faults_.consecutive_checkpoint_failures;
      }
      failures = faults_.checkpoint_failures;
    }
    if (options_.emitter != nullptr) {
      options_.emitter->Emit("learner/checkpoint_failures", status.env_steps(),
                             static_cast<double>(failures));
    }
    if (!dir.ok()) return dir.status();
    if (recovered_after > 0) {
      RL_LOG_INFO("checkpoint {} written after {} failed attempts", *dir,
                  recovered_after);
    }
    RL_LOG_DEBUG("checkpoint {}", *dir);
    return absl::OkStatus();
  }

  // The learner's state beyond the weights and the optimizer.
  TensorMap StateTensors() {
    TrainingState state;
    // Which segments the updates so far used: per actor process, the
    // highest sequence number acknowledged. A learner resumed here counts
    // an actor's resend of one of them as a duplicate (its ack may have
    // been lost with the old learner) instead of using it twice. Actors of
    // other ranks: as gathered at this checkpoint (rank 0 writes the
    // gang's); this rank's own: as they are now.
    const std::vector<AckWatermark> known = intake_->Watermarks(false);
    const std::vector<AckWatermark> here = intake_->Watermarks(true);
    {
      absl::MutexLock lock(&mu_);
      state.set_env_steps(status_.env_steps());
      state.set_policy_version(status_.policy_version());
      state.set_updates(status_.updates());
      state.set_episodes(episodes_);
      state.set_target_reached(target_reached_);
      state.set_target_reached_at_steps(target_reached_at_);
      state.mutable_recent_returns()->Add(recent_returns_.begin(),
                                          recent_returns_.end());
      for (const AckWatermark& w : MergeWatermarks(known, gathered_, here)) {
        *state.add_acked_segments() = w;
      }
    }
    state.set_updater_generator(GeneratorStateBytes(updater_->generator()));
    TensorMap extra;
    PutTrainingState(state, &extra);
    return extra;
  }

  // `source` names where `extra` came from in errors.
  absl::Status ApplyState(const TensorMap& extra, const std::string& source) {
    ASSIGN_OR_RETURN(const TrainingState state,
                     TakeTrainingState(extra, source));
    RETURN_IF_ERROR(SetGeneratorState(state.updater_generator(),
                                      updater_->generator(), source));
    intake_->RestoreWatermarks(
        {state.acked_segments().begin(), state.acked_segments().end()});
    intake_->SetPolicyVersion(state.policy_version());
    absl::MutexLock lock(&mu_);
    status_.set_env_steps(state.env_steps());
    status_.set_policy_version(state.policy_version());
    status_.set_updates(state.updates());
    episodes_ = state.episodes();
    target_reached_ = state.target_reached();
    target_reached_at_ = state.target_reached_at_steps();
    recent_returns_.assign(state.recent_returns().begin(),
                           state.recent_returns().end());
    steps_at_start_ = status_.env_steps();
    checkpointed_updates_ = status_.updates();
    return absl::OkStatus();
  }

  const LearnerOptions options_;
  ActorCriticConfig policy_config_;
  SegmentShape shape_;
  int rank_ = 0;
  int world_size_ = 1;
  int actors_here_ = 1;  // actors streaming to this rank
  std::unique_ptr<SegmentIntake> intake_;
  ActorCritic policy_{nullptr};
  std::unique_ptr<PpoUpdater> updater_;
  std::optional<SegmentLedger> ledger_;  // the PPO thread's, once started
  NamedThread thread_;
  const absl::Time started_ = absl::Now();

  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;  // Stop() ran
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status final_status_ ABSL_GUARDED_BY(mu_);
  // The counters; the segment counts are the intake's (GetStatus).
  LearnerStatus status_ ABSL_GUARDED_BY(mu_);
  // Rank 0: every rank's actors' watermarks at the last gather.
  std::vector<AckWatermark> gathered_ ABSL_GUARDED_BY(mu_);
  std::deque<float> recent_returns_ ABSL_GUARDED_BY(mu_);
  int64_t episodes_ ABSL_GUARDED_BY(mu_) = 0;
  bool target_reached_ ABSL_GUARDED_BY(mu_) = false;
  int64_t target_reached_at_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t steps_at_start_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t checkpointed_updates_ ABSL_GUARDED_BY(mu_) = 0;
  LearnerFaultCounts faults_ ABSL_GUARDED_BY(mu_);

  mutable absl::Mutex subscribers_mu_;
  int64_t next_subscriber_id_ ABSL_GUARDED_BY(subscribers_mu_) = 0;
  std::map<int64_t, PolicyCallback> subscribers_
      ABSL_GUARDED_BY(subscribers_mu_);
  std::shared_ptr<const PolicyUpdate> latest_policy_
      ABSL_GUARDED_BY(subscribers_mu_);
};

absl::StatusOr<std::unique_ptr<LearnerCore>> LearnerCore::Create(
    const LearnerOptions& options) {
  // Specs arrive resolved (runspec/); resolving again only checks them.
  ASSIGN_OR_RETURN(const EnvInfo info, DescribeEnvSpec(options.spec.env()));
  RETURN_IF_ERROR(CheckComputeDevice(options.spec.resources().learner_device(),
                                     "resources.learner_device",
                                     "this learner"));
  auto impl = std::make_unique<Impl>(options, info);
  RETURN_IF_ERROR(impl->Start());
  auto core = std::unique_ptr<LearnerCore>(new LearnerCore(std::move(impl)));
  core->run_id_ = options.run_id;
  // Twice the estimate and a MiB of headroom: a segment larger than that
  // was not made for this run, and is refused before it is parsed.
  core->max_segment_bytes_ = static_cast<int64_t>(std::min(
      2 * EstimateRunFootprint(options.spec).segment_bytes + (1 << 20), 9e18));
  return core;
}

LearnerCore::LearnerCore(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)), credits_(impl_->intake().credits()) {}

LearnerCore::~LearnerCore() = default;

void LearnerCore::Stop() { impl_->Stop(); }

int64_t LearnerCore::OpenStream(int actor_id, AckCallback on_ack) {
  return impl_->intake().OpenStream(actor_id, std::move(on_ack));
}
void LearnerCore::CloseStream(int64_t stream_id) {
  impl_->intake().CloseStream(stream_id);
}
absl::Status LearnerCore::RejectSegment(absl::Status status) {
  return impl_->intake().Reject(std::move(status));
}

absl::Status LearnerCore::SubmitSegment(
    int64_t stream_id, std::unique_ptr<RolloutSegment> segment) {
  return impl_->intake().Submit(stream_id, std::move(segment));
}
int64_t LearnerCore::Subscribe(PolicyCallback on_update,
                               std::shared_ptr<const PolicyUpdate>* latest) {
  return impl_->Subscribe(std::move(on_update), latest);
}
void LearnerCore::Unsubscribe(int64_t id) { impl_->Unsubscribe(id); }
std::shared_ptr<const PolicyUpdate> LearnerCore::LatestPolicy() const {
  return impl_->LatestPolicy();
}
LearnerStatus LearnerCore::GetStatus() const { return impl_->GetStatus(); }
LearnerFaultCounts LearnerCore::fault_counts() const {
  return impl_->fault_counts();
}
bool LearnerCore::WaitUntilDone(absl::Duration timeout) {
  return impl_->WaitUntilDone(timeout);
}
absl::Status LearnerCore::final_status() const { return impl_->final_status(); }

}  // namespace rl
