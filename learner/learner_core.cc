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
#include <set>
#include <tuple>
#include <vector>

#include "absl/base/casts.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/log_limiter.h"
#include "common/logging.h"
#include "common/status.h"
#include "common/thread.h"
#include "envs/env_registry.h"
#include "learner/checkpoint.h"
#include "learner/ppo_updater.h"
#include "learner/segment_ledger.h"
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

// A validated segment waiting in the queue or the staging area.
struct LearnerCore::Staged {
  ~Staged() { GiveBudget(); }
  // Called once the PPO thread has taken it from the queue.
  void GiveBudget() {
    if (budget != nullptr) budget->Give(budget_bytes);
    budget = nullptr;
  }

  std::shared_ptr<SegmentBudget> budget;  // null once given back
  int64_t budget_bytes = 0;
  int actor_id = 0;
  uint64_t incarnation = 0;
  int64_t sequence_number = 0;
  int64_t policy_version = 0;
  std::unique_ptr<RolloutSegment> proto;  // owns the bytes `rollout` views
  Rollout rollout;
};

class LearnerCore::Impl {
 public:
  Impl(const LearnerOptions& options, const EnvInfo& info)
      : options_(options), info_(info) {
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
    credits_ = std::max(2, spec.resources().num_actors() + 1);
    if (options.collective != nullptr) {
      rank_ = options.collective->rank();
      world_size_ = options.collective->world_size();
    }
    actors_here_ =
        ActorsOfLearnerRank(rank_, world_size_, spec.resources().num_actors());
    queue_capacity_ = static_cast<size_t>(
        credits_ * std::max(1, spec.resources().num_actors()) * 2);
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
        RETURN_IF_ERROR(Restore(*latest));
        RL_LOG_INFO("resumed from {} at version {}, {} env steps", *latest,
                    status_.policy_version(), status_.env_steps());
      }
    }
    if (options_.collective != nullptr) RETURN_IF_ERROR(ShareRankZeroState());
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

  int credits() const { return credits_; }

  int64_t OpenStream(int actor_id, AckCallback on_ack) {
    absl::MutexLock lock(&mu_);
    const int64_t id = ++next_stream_id_;
    streams_[id] = Stream{actor_id, std::move(on_ack)};
    actor_stream_[actor_id] = id;
    status_.set_connected_actors(ConnectedActors());
    return id;
  }

  void CloseStream(int64_t stream_id) {
    absl::MutexLock lock(&mu_);
    auto it = streams_.find(stream_id);
    if (it == streams_.end()) return;
    const int actor = it->second.actor_id;
    streams_.erase(it);
    auto a = actor_stream_.find(actor);
    if (a != actor_stream_.end() && a->second == stream_id) {
      actor_stream_.erase(a);
    }
    status_.set_connected_actors(ConnectedActors());
  }

  // Counts a segment refused before it became one (unparseable, oversized)
  // with the others refused.
  absl::Status RejectSegment(absl::Status status) {
    absl::MutexLock lock(&mu_);
    status_.set_segments_rejected(status_.segments_rejected() + 1);
    return status;
  }

  absl::Status SubmitSegment(int64_t stream_id,
                             std::unique_ptr<RolloutSegment> segment) {
    auto reject = [&](absl::Status status) {
      absl::MutexLock lock(&mu_);
      status_.set_segments_rejected(status_.segments_rejected() + 1);
      return status;
    };
    if (!options_.run_id.empty() && !segment->run_id().empty() &&
        segment->run_id() != options_.run_id) {
      return reject(absl::InvalidArgumentError(absl::StrCat(
          "segment.run_id: this learner serves \"", options_.run_id,
          "\" (got \"", segment->run_id(), "\")")));
    }
    if (segment->sequence_number() < 1) {
      return reject(absl::InvalidArgumentError(
          absl::StrCat("segment.sequence_number: must be >= 1 (got ",
                       segment->sequence_number(), ")")));
    }
    if (segment->policy_version() < kFirstVersion) {
      return reject(absl::InvalidArgumentError(
          absl::StrCat("segment.policy_version: must be >= 1 (got ",
                       segment->policy_version(), ")")));
    }
    int actor_id;
    {
      absl::MutexLock lock(&mu_);
      auto it = streams_.find(stream_id);
      if (it == streams_.end()) {
        return absl::FailedPreconditionError("stream is closed");
      }
      actor_id = it->second.actor_id;
    }
    if (segment->actor_id() != actor_id) {
      return reject(absl::InvalidArgumentError(absl::StrCat(
          "segment.actor_id: a stream carries one actor's segments (opened by ",
          actor_id, ", got ", segment->actor_id(), ")")));
    }
    {
      absl::MutexLock lock(&mu_);
      if (streamed_here_.insert(actor_id).second &&
          static_cast<int>(streamed_here_.size()) == actors_here_ + 1) {
        // Said once: more actors than the run declares make updates wait
        // for none of them (SYNC) or drop their segments as stale (ASYNC).
        RL_LOG_WARNING(
            "run {}: actor {} is the {}th actor to stream to this learner, "
            "which expects {} (resources.num_actors: {} over {} learner(s)); "
            "segments beyond what the run declares are dropped as stale: "
            "set resources.num_actors to the actors you start",
            options_.run_id, actor_id, streamed_here_.size(), actors_here_,
            options_.spec.resources().num_actors(), world_size_);
      }
    }
    auto rollout = DecodeSegment(*segment, shape_);
    if (!rollout.ok()) return reject(rollout.status());
    const int64_t bytes = static_cast<int64_t>(segment->ByteSizeLong());

    absl::MutexLock lock(&mu_);
    status_.set_segments_received(status_.segments_received() + 1);
    auto incarnation = incarnation_.find(actor_id);
    std::deque<uint64_t>& replaced = replaced_incarnations_[actor_id];
    if (std::find(replaced.begin(), replaced.end(),
                  segment->actor_incarnation()) != replaced.end()) {
      // A process this actor id moved on from streams again: two processes
      // stream as one actor (a stale one, or an impostor). Taking it back
      // would restart the numbering of both, and neither would be
      // acknowledged again: the newer keeps the id.
      status_.set_segments_rejected(status_.segments_rejected() + 1);
      const absl::Status refused = absl::FailedPreconditionError(absl::StrCat(
          "actor ", actor_id, ": process ", segment->actor_incarnation(),
          " was replaced by process ", incarnation->second,
          " under this actor id; only the newest streams as it"));
      static LogLimiter* const limiter = new LogLimiter();
      std::string left_out;
      if (limiter->Allow(absl::StrCat(options_.run_id, "/", actor_id),
                         &left_out)) {
        RL_LOG_WARNING("run {}: {}{}", options_.run_id,
                       std::string(refused.message()), left_out);
      }
      return refused;
    }
    if (incarnation == incarnation_.end() ||
        incarnation->second != segment->actor_incarnation()) {
      // A new actor process under this id: its numbering starts afresh.
      if (incarnation != incarnation_.end()) {
        RL_LOG_INFO("run {}: actor {} is now process {} (was {})",
                    options_.run_id, actor_id, segment->actor_incarnation(),
                    incarnation->second);
        replaced.push_back(incarnation->second);
        if (replaced.size() > kMaxReplacedIncarnations) replaced.pop_front();
      }
      incarnation_[actor_id] = segment->actor_incarnation();
      last_sequence_[actor_id] = 0;
      acked_[actor_id] = 0;
    }
    int64_t& last = last_sequence_[actor_id];
    if (segment->sequence_number() <= last) {
      // Resent after a reconnect: already queued or processed.
      status_.set_segments_duplicate(status_.segments_duplicate() + 1);
      if (segment->sequence_number() <= acked_[actor_id]) SendAck(actor_id);
      return absl::OkStatus();
    }
    if (queue_.size() >= queue_capacity_) {
      return absl::ResourceExhaustedError(
          absl::StrCat("segment queue full: actor ", actor_id, " exceeded its ",
                       credits_, " credits"));
    }
    // The run is over (or failed): no PPO thread would take it, and it
    // would hold its share of the segment budget until the core goes.
    if (done_) return absl::OkStatus();
    auto staged = std::make_unique<Staged>();
    if (options_.segment_budget != nullptr) {
      RETURN_IF_ERROR(options_.segment_budget->Take(bytes));
      staged->budget = options_.segment_budget;
      staged->budget_bytes = bytes;
    }
    last = segment->sequence_number();
    staged->actor_id = actor_id;
    staged->incarnation = segment->actor_incarnation();
    staged->sequence_number = segment->sequence_number();
    staged->policy_version = segment->policy_version();
    staged->rollout = *std::move(rollout);
    staged->proto = std::move(segment);
    queue_.push_back(std::move(staged));
    return absl::OkStatus();
  }

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
    absl::MutexLock lock(&mu_);
    return status_;
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
  struct Stream {
    int actor_id;
    AckCallback on_ack;
  };

  // Rank 0 learns, for the checkpoint it writes for the gang, which
  // segments the actors of every rank have had acknowledged (each rank
  // broadcasts its own actors' watermarks in turn; a few bytes each).
  absl::Status GatherAckedSegments() {
    Collective& c = *options_.collective;
    std::string mine;
    {
      absl::MutexLock lock(&mu_);
      for (int actor : streamed_here_) {
        absl::StrAppend(&mine, actor, " ", incarnation_[actor], " ",
                        acked_[actor], "\n");
      }
    }
    std::map<int, std::pair<uint64_t, int64_t>> gathered;
    for (int root = 0; root < world_size_; ++root) {
      std::string bytes = root == rank_ ? mine : std::string();
      RETURN_IF_ERROR(BroadcastBytes(c, &bytes, root));
      for (absl::string_view line :
           absl::StrSplit(bytes, '\n', absl::SkipEmpty())) {
        const std::vector<absl::string_view> f = absl::StrSplit(line, ' ');
        int actor;
        uint64_t incarnation;
        int64_t sequence;
        if (f.size() != 3 || !absl::SimpleAtoi(f[0], &actor) ||
            !absl::SimpleAtoi(f[1], &incarnation) ||
            !absl::SimpleAtoi(f[2], &sequence)) {
          return absl::InternalError(absl::StrCat(
              "rank ", root, " sent a malformed acknowledgement: ", line));
        }
        gathered[actor] = {incarnation, sequence};
      }
    }
    if (rank_ == 0) {
      absl::MutexLock lock(&mu_);
      for (const auto& [actor, watermark] : gathered) {
        gathered_acked_[actor] = watermark;
      }
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

  int ConnectedActors() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return static_cast<int>(actor_stream_.size());
  }

  // Sends actor `actor_id` its current ack, if it has a stream.
  void SendAck(int actor_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto s = actor_stream_.find(actor_id);
    if (s == actor_stream_.end()) return;
    RolloutAck ack;
    ack.set_acked_sequence_number(acked_[actor_id]);
    ack.set_credits(credits_);
    ack.set_dropped_stale(dropped_stale_[actor_id]);
    ack.set_latest_policy_version(status_.policy_version());
    streams_[s->second].on_ack(ack);
  }

  // Marks `s` processed, unless its actor process has been replaced since.
  void Acknowledge(const Staged& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (incarnation_[s.actor_id] != s.incarnation) return;
    acked_[s.actor_id] = std::max(acked_[s.actor_id], s.sequence_number);
  }

  void Run() {
    absl::Status status = Loop();
    absl::MutexLock lock(&mu_);
    // Done (or failed): what still waits is never used; it frees its share
    // of the learner's segment budget now, not when the core goes.
    queue_.clear();
    if (!status.ok()) {
      RL_LOG_ERROR("learner stopped: {}", std::string(status.message()));
    }
    final_status_ = status;
    done_ = true;
  }

  absl::Status Loop() {
    while (true) {
      std::unique_ptr<Staged> next;
      {
        absl::MutexLock lock(&mu_);
        auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stop_ || !queue_.empty();
        };
        mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(50));
        if (stop_) return absl::OkStatus();
        if (!queue_.empty()) {
          next = std::move(queue_.front());
          queue_.pop_front();
          next->GiveBudget();
          StageOrDrop(std::move(next));
        }
        if (!BatchComplete()) continue;
      }
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

  void StageOrDrop(std::unique_ptr<Staged> segment)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const int64_t version = status_.policy_version();
    const int64_t lag = version - segment->policy_version;
    const int64_t max_lag =
        options_.spec.sync_mode() == ASYNC ? options_.spec.max_policy_lag() : 0;
    // A version from the future comes from before a learner restart (the
    // checkpoint is older than the actor's policy): as unusable as a stale one.
    if (lag > max_lag || lag < 0) {
      status_.set_segments_dropped_stale(status_.segments_dropped_stale() + 1);
      dropped_stale_[segment->actor_id] += 1;
      if (ledger_.has_value()) {
        ledger_->Drop({segment->actor_id, segment->incarnation,
                       segment->sequence_number});
      }
      Acknowledge(*segment);
      SendAck(segment->actor_id);
      return;
    }
    staged_steps_ += segment->rollout.num_steps() * segment->rollout.num_envs();
    staged_.push_back(std::move(segment));
  }

  bool BatchComplete() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (staged_.empty()) return false;
    const RunSpec& spec = options_.spec;
    const int64_t batch_steps = static_cast<int64_t>(spec.segment_length()) *
                                spec.envs_per_actor() * actors_here_;
    if (staged_steps_ >= batch_steps) return true;
    if (spec.sync_mode() == ASYNC) return false;
    // SYNC: every connected actor has contributed (the others wait for us).
    std::set<int> contributed;
    for (const auto& s : staged_) contributed.insert(s->actor_id);
    for (const auto& [actor, stream] : actor_stream_) {
      if (contributed.count(actor) == 0) return false;
    }
    return true;
  }

  absl::Status UpdateFromStaged() {
    std::vector<std::unique_ptr<Staged>> batch;
    int64_t env_steps_before;
    {
      absl::MutexLock lock(&mu_);
      batch.swap(staged_);
      staged_steps_ = 0;
      env_steps_before = status_.env_steps();
    }
    std::vector<Rollout> parts;
    parts.reserve(batch.size());
    for (const auto& s : batch) parts.push_back(s->rollout);
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
    {
      absl::MutexLock lock(&mu_);
      recent_returns_ = std::move(returns_after);
      for (const auto& s : batch) {
        episodes_ += s->proto->episode_returns_size();
      }
    }

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
    {
      absl::MutexLock lock(&mu_);
      status_.set_env_steps(status_.env_steps() + steps);
      status_.set_updates(status_.updates() + 1);
      status_.set_policy_version(status_.policy_version() + 1);
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
      faults_.consecutive_nonfinite_updates =
          stats.consecutive_nonfinite_updates;
      RL_LOG_DEBUG("update {}: {} segments, {:.3f} s, kl {:.4f}",
                   status_.updates(), batch.size(), seconds, stats.approx_kl);
      if (Emitter* e = options_.emitter) {
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
        figures.queue_depth = static_cast<int64_t>(queue_.size());
        figures.segments = static_cast<int64_t>(batch.size());
        figures.segments_dropped_stale = status_.segments_dropped_stale();
        figures.policy_version = status_.policy_version();
        figures.connected_actors = static_cast<int64_t>(actor_stream_.size());
        figures.has_mean_return = !recent_returns_.empty();
        if (figures.has_mean_return) figures.mean_return = MeanReturn();
        EmitLearnerUpdateFigures(e, step, figures);
      }
    }
    if (ledger_.has_value()) {
      std::vector<SegmentKey> used;
      used.reserve(batch.size());
      for (const auto& s : batch) {
        used.push_back({s->actor_id, s->incarnation, s->sequence_number});
      }
      ledger_->Update(GetStatus().updates(), used);
    }
    RETURN_IF_ERROR(Publish(/*final=*/false));
    {
      // The batch's segments are used: acknowledge them.
      absl::MutexLock lock(&mu_);
      std::set<int> actors;
      for (const auto& s : batch) {
        Acknowledge(*s);
        actors.insert(s->actor_id);
      }
      for (int actor : actors) SendAck(actor);
    }
    const int64_t updates = GetStatus().updates();
    if (options_.collective != nullptr && options_.sync_check_interval > 0 &&
        updates % options_.sync_check_interval == 0) {
      RETURN_IF_ERROR(
          CheckInSync(*options_.collective, WeightsAndStatistics(),
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
    const std::vector<torch::Tensor> all = WeightsAndStatistics();
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

  std::vector<torch::Tensor> WeightsAndStatistics() {
    std::vector<torch::Tensor> all = policy_->parameters();
    for (const auto& b : policy_->buffers()) all.push_back(b);
    return all;
  }

  // Every rank takes rank 0's state (resumed or fresh), then checks it.
  absl::Status ShareRankZeroState() {
    Collective& c = *options_.collective;
    std::string bytes;
    if (rank_ == 0) {
      ASSIGN_OR_RETURN(
          bytes,
          EncodeTrainingState(policy_, updater_->optimizer(), StateTensors()));
    }
    RETURN_IF_ERROR(BroadcastBytes(c, &bytes, 0));
    if (rank_ != 0) {
      TensorMap extra;
      RETURN_IF_ERROR(
          DecodeTrainingState(bytes, policy_, &updater_->optimizer(), &extra));
      RETURN_IF_ERROR(ApplyStateTensors(extra, "rank 0's state"));
    }
    return CheckInSync(c, WeightsAndStatistics(), "at start, the weights");
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
    TensorMap extra;
    {
      absl::MutexLock lock(&mu_);
      extra["learner.counters"] = torch::tensor(
          {status_.env_steps(), status_.policy_version(), status_.updates(),
           episodes_, static_cast<int64_t>(target_reached_),
           target_reached_at_},
          torch::kInt64);
      extra["learner.recent_returns"] = torch::tensor(
          std::vector<float>(recent_returns_.begin(), recent_returns_.end()),
          torch::kFloat32);
      // Which segments the updates so far used: per actor process, the
      // highest sequence number acknowledged. A learner resumed here counts
      // an actor's resend of one of them as a duplicate (its ack may have
      // been lost with the old learner) instead of using it twice.
      // Actors of other ranks: as gathered at this checkpoint (rank 0
      // writes the gang's); this rank's own: as they are now.
      std::map<int, std::pair<uint64_t, int64_t>> all = gathered_acked_;
      for (const auto& [actor, sequence] : acked_) {
        if (all.count(actor) == 0 || streamed_here_.count(actor) != 0) {
          all[actor] = {incarnation_[actor], sequence};
        }
      }
      std::vector<int64_t> acked;
      for (const auto& [actor, watermark] : all) {
        if (watermark.second <= 0) continue;
        acked.push_back(actor);
        acked.push_back(absl::bit_cast<int64_t>(watermark.first));
        acked.push_back(watermark.second);
      }
      extra["learner.acked_segments"] =
          torch::tensor(acked, torch::kInt64)
              .reshape({static_cast<int64_t>(acked.size() / 3), 3});
    }
    extra["updater.generator"] = updater_->generator().get_state();
    return extra;
  }

  absl::Status Restore(const std::string& dir) {
    TensorMap extra;
    RETURN_IF_ERROR(
        ReadCheckpoint(dir, policy_, &updater_->optimizer(), &extra));
    return ApplyStateTensors(extra, absl::StrCat("checkpoint ", dir));
  }

  // `source` names where `extra` came from in errors.
  absl::Status ApplyStateTensors(TensorMap& extra, const std::string& source) {
    for (const auto& [key, dtype, shape] :
         {std::tuple<const char*, c10::ScalarType, std::vector<int64_t>>{
              "learner.counters", torch::kInt64, {6}},
          {"learner.recent_returns", torch::kFloat32, {-1}},
          {"updater.generator", torch::kUInt8, {-1}}}) {
      if (extra.count(key) == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(source, " has no ", key));
      }
      RETURN_IF_ERROR(CheckTensor(extra[key], absl::StrCat(source, ": ", key),
                                  dtype, shape));
    }
    if (extra.count("learner.acked_segments") != 0) {
      RETURN_IF_ERROR(
          CheckTensor(extra["learner.acked_segments"],
                      absl::StrCat(source, ": learner.acked_segments"),
                      torch::kInt64, {-1, 3}));
    }
    return CatchTorchErrors(
        absl::StrCat(source, ": learner state"),
        [&] {
          const torch::Tensor c = extra["learner.counters"];
          absl::MutexLock lock(&mu_);
          status_.set_env_steps(c[0].item<int64_t>());
          status_.set_policy_version(c[1].item<int64_t>());
          status_.set_updates(c[2].item<int64_t>());
          episodes_ = c[3].item<int64_t>();
          target_reached_ = c[4].item<int64_t>() != 0;
          target_reached_at_ = c[5].item<int64_t>();
          const torch::Tensor r = extra["learner.recent_returns"].contiguous();
          recent_returns_.assign(r.data_ptr<float>(),
                                 r.data_ptr<float>() + r.numel());
          updater_->generator().set_state(extra["updater.generator"]);
          // Absent from checkpoints written before it existed.
          auto acked = extra.find("learner.acked_segments");
          if (acked != extra.end()) {
            const torch::Tensor a = acked->second.contiguous();
            const int64_t* row = a.data_ptr<int64_t>();
            for (int64_t i = 0; i < a.size(0); ++i, row += 3) {
              const int actor = static_cast<int>(row[0]);
              incarnation_[actor] = absl::bit_cast<uint64_t>(row[1]);
              last_sequence_[actor] = row[2];
              acked_[actor] = row[2];
            }
          }
          steps_at_start_ = status_.env_steps();
          checkpointed_updates_ = status_.updates();
        },
        absl::StatusCode::kInvalidArgument);
  }

  const LearnerOptions options_;
  ActorCriticConfig policy_config_;
  const EnvInfo info_;
  SegmentShape shape_;
  int credits_ = 2;
  size_t queue_capacity_ = 8;
  int rank_ = 0;
  int world_size_ = 1;
  int actors_here_ = 1;  // actors streaming to this rank
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
  LearnerStatus status_ ABSL_GUARDED_BY(mu_);
  int64_t next_stream_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int64_t, Stream> streams_ ABSL_GUARDED_BY(mu_);
  std::map<int, int64_t> actor_stream_ ABSL_GUARDED_BY(mu_);
  std::map<int, uint64_t> incarnation_ ABSL_GUARDED_BY(mu_);
  // Per actor id, the processes it moved on from (newest last, at most
  // kMaxReplacedIncarnations): their segments are refused.
  static constexpr size_t kMaxReplacedIncarnations = 16;
  std::map<int, std::deque<uint64_t>> replaced_incarnations_
      ABSL_GUARDED_BY(mu_);
  std::map<int, int64_t> last_sequence_ ABSL_GUARDED_BY(mu_);
  std::map<int, int64_t> acked_ ABSL_GUARDED_BY(mu_);
  std::map<int, int64_t> dropped_stale_ ABSL_GUARDED_BY(mu_);
  // Actors that sent this process segments; on rank 0, every rank's
  // actors' (incarnation, acked sequence number) at the last gather.
  std::set<int> streamed_here_ ABSL_GUARDED_BY(mu_);
  std::map<int, std::pair<uint64_t, int64_t>> gathered_acked_
      ABSL_GUARDED_BY(mu_);
  std::deque<std::unique_ptr<Staged>> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Staged>> staged_ ABSL_GUARDED_BY(mu_);
  int64_t staged_steps_ ABSL_GUARDED_BY(mu_) = 0;
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
    : impl_(std::move(impl)), credits_(impl_->credits()) {}

LearnerCore::~LearnerCore() = default;

void LearnerCore::Stop() { impl_->Stop(); }

int64_t LearnerCore::OpenStream(int actor_id, AckCallback on_ack) {
  return impl_->OpenStream(actor_id, std::move(on_ack));
}
void LearnerCore::CloseStream(int64_t stream_id) {
  impl_->CloseStream(stream_id);
}
absl::Status LearnerCore::RejectSegment(absl::Status status) {
  return impl_->RejectSegment(std::move(status));
}

absl::Status LearnerCore::SubmitSegment(
    int64_t stream_id, std::unique_ptr<RolloutSegment> segment) {
  return impl_->SubmitSegment(stream_id, std::move(segment));
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
