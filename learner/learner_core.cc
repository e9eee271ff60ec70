#include "learner/learner_core.h"

#include <torch/types.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <future>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "envs/env_registry.h"
#include "learner/device_self_check.h"
#include "learner/gang_sync.h"
#include "learner/learner_core_impl.h"
#include "learner/learner_metrics.h"
#include "learner/run_intake.h"
#include "learner/update_metrics.h"
#include "policy/compute_device.h"
#include "policy/device_transfer.h"
#include "policy/policy_codec.h"
#include "policy/step_profiler.h"
#include "policy/torch_status.h"
#include "runspec/named_policies.h"
#include "telemetry/client/emitter.h"

namespace rl {

LearnerCore::Impl::Impl(const LearnerOptions& options)
    : options_(options),
      checkpoints_({options.run_dir, options.spec.keep_checkpoints(),
                    options.max_checkpoint_failures, options.emitter}),
      progress_(options.spec, options.stop_env_steps) {
  const RunSpec& spec = options.spec;
  shape_ = RunSegmentShape(spec);
  if (options.collective != nullptr) {
    rank_ = options.collective->rank();
    world_size_ = options.collective->world_size();
  }
  SegmentIntakeOptions intake =
      RunIntakeOptions(spec, options.run_id, rank_, world_size_,
                       options.segment_budget, &shape_);
  actors_here_ = intake.actors_here;
  intake.on_stale = [this](const SegmentKey& key) {
    if (ledger_.has_value()) ledger_->Drop(key);
  };
  intake_ = std::make_unique<SegmentIntake>(std::move(intake));
  // With several policies the learner's own is the first (its
  // checkpoints are the run's); others_ holds the rest.
  own_run_ = PolicyRun(spec, 0);
  policy_config_ = RunNetworkConfig(own_run_);
}

absl::Status LearnerCore::Impl::Start() {
  const RunSpec& spec = options_.spec;
  if (spec.has_league()) {
    // An actor that starts again begins with the league's pool.
    publisher_.KeepLeagueVersions(spec.league().snapshot_interval(),
                                  spec.league().pool_size());
  }
  if (actors_here_ < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("resources.num_actors (", spec.resources().num_actors(),
                     ") must be at least resources.num_learners (", world_size_,
                     "): learner rank ", rank_, " would get no actor"));
  }
  // The device the updates run on; a CUDA device's first use in this
  // process checks itself against the CPU (learner/device_self_check.h).
  ASSIGN_OR_RETURN(
      const torch::Device device,
      ResolveComputeDevice(spec.resources().learner_device(),
                           "resources.learner_device", "this learner"));
  RETURN_IF_ERROR(CheckDeviceOnFirstUse(policy_config_, own_run_.ppo(),
                                        own_run_.execution(), device));
  ASSIGN_OR_RETURN(policy_,
                   CreateSeededActorCritic(policy_config_, spec.seed()));
  RETURN_IF_ERROR(
      CatchTorchErrors(absl::StrCat("moving the policy to ", device.str()),
                       [&] { policy_->to(device); }));
  updater_ = std::make_unique<PpoUpdater>(policy_, own_run_.ppo(),
                                          own_run_.total_env_steps(),
                                          spec.seed(), own_run_.execution());
  updater_->set_collective(options_.collective.get());
  updater_->set_max_nonfinite_updates(options_.max_nonfinite_updates);
  OtherPolicies::Remotes remotes;
  remotes.addresses = options_.policy_learners;
  remotes.client.run_id = options_.run_id;
  remotes.client.run_key = options_.run_key;
  remotes.client.gang_id = options_.gang_id;
  remotes.client.cancelled = options_.cancelled;
  ASSIGN_OR_RETURN(
      others_, OtherPolicies::Create(spec, device, options_.collective.get(),
                                     options_.max_nonfinite_updates, remotes));
  if (rank_ == 0 && spec.has_league()) {
    league_games_.emplace(options_.run_dir, options_.emitter);
  }
  if (!others_.empty()) {
    checkpoints_.set_write_first([this](int64_t updates) {
      return others_.Write(options_.run_dir, updates);
    });
  }
  absl::Status loaded = absl::OkStatus();
  if (!options_.run_dir.empty() && rank_ == 0) loaded = LoadStartState();
  if (options_.collective != nullptr) {
    // The other ranks wait for rank 0's state: tell them whether there
    // is one, so that a rank 0 that cannot resume (or start from another
    // run) fails the gang at once, not at the rendezvous's timeout.
    std::string failure(loaded.message());
    if (rank_ == 0 && !loaded.ok() && failure.empty()) failure = "failed";
    RETURN_IF_ERROR(BroadcastBytes(*options_.collective, &failure, 0));
    if (rank_ != 0 && !failure.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "rank 0 of the gang could not take its start state: ", failure));
    }
  }
  RETURN_IF_ERROR(loaded);
  if (league_games_.has_value()) {
    league_games_->StartAt(GetStatus().env_steps());
  }
  if (options_.collective != nullptr) {
    TensorMap extra;
    if (rank_ == 0) extra = StateTensors();
    // Every collective call first, on every rank, then what can fail
    // on one rank alone: a rank that returned between them would leave
    // the others waiting in a broadcast.
    RETURN_IF_ERROR(ShareRankZeroState(*options_.collective, policy_,
                                       updater_->optimizer(), &extra));
    RETURN_IF_ERROR(others_.ShareRankZeroState(*options_.collective));
    if (rank_ != 0) RETURN_IF_ERROR(ApplyState(extra, "rank 0's state"));
  }
  if (!options_.run_dir.empty()) OpenLedger();
  RETURN_IF_ERROR(Publish(/*final=*/false));
  thread_ = StartThread("learner-ppo", [this] { Run(); });
  return absl::OkStatus();
}

LearnerCore::Impl::~Impl() { Stop(); }

void LearnerCore::Impl::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
    stop_ = true;
  }
  // An update waiting on a policy's learner of its own ends now.
  others_.StopWaiting();
  if (thread_.joinable()) thread_.join();
  // Stopped from outside (SIGTERM, a new assignment): keep the updates
  // made since the last checkpoint, unless training had failed (a gang
  // that broke mid-update may hold half an update).
  bool keep = false;
  {
    absl::MutexLock lock(&mu_);
    keep = final_status_.ok() &&
           progress_.updates() > checkpoints_.counts().updates;
  }
  if (keep && checkpoints_.enabled() && rank_ == 0) {
    const absl::Status written = Checkpoint();
    if (!written.ok()) {
      RL_LOG_ERROR("checkpoint on stop failed: {}", written.ToString());
    } else {
      RL_LOG_INFO("checkpoint on stop at update {}", GetStatus().updates());
    }
  }
}

LearnerStatus LearnerCore::Impl::GetStatus() const {
  LearnerStatus status;
  status.set_run_id(options_.run_id);
  {
    absl::MutexLock lock(&mu_);
    progress_.FillStatus(&status);
  }
  intake_->counts().FillStatus(&status);
  return status;
}

LearnerFaultCounts LearnerCore::Impl::fault_counts() const {
  LearnerFaultCounts faults;
  {
    absl::MutexLock lock(&mu_);
    faults = faults_;
  }
  const CheckpointCounts written = checkpoints_.counts();
  faults.checkpoints_written = written.written;
  faults.checkpoint_failures = written.failures;
  faults.consecutive_checkpoint_failures = written.consecutive_failures;
  return faults;
}

bool LearnerCore::Impl::WaitUntilDone(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&done_), timeout);
}

void LearnerCore::Impl::Run() {
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

absl::Status LearnerCore::Impl::Loop() {
  StepProfiler profiler(ProfilePath(), options_.profile_updates,
                        policy_->device().is_cuda());
  while (true) {
    const bool complete = intake_->StageNext(absl::Milliseconds(50));
    if (StopRequested()) {
      LogProfileError(profiler.Finish());
      return absl::OkStatus();
    }
    if (!complete) continue;
    LogProfileError(profiler.BeforeStep());
    RETURN_IF_ERROR(UpdateFromStaged());
    if (Finished()) {
      RETURN_IF_ERROR(Publish(/*final=*/true));
      // Every rank finishes at the same update (the steps are the gang's).
      if (options_.collective != nullptr) {
        RETURN_IF_ERROR(GatherAckedSegments());
      }
      LogProfileError(profiler.Finish());
      return Checkpoint(&CheckpointKeeper::WriteFinal);
    }
  }
}

void LearnerCore::Impl::LogProfileError(const absl::Status& status) {
  if (!status.ok()) {
    RL_LOG_ERROR("profile: {}", std::string(status.message()));
  }
}

std::string LearnerCore::Impl::ProfilePath() const {
  if (!options_.profile_path.empty()) return options_.profile_path;
  if (options_.run_dir.empty()) {
    return absl::StrCat("profile-", options_.run_id, ".json");
  }
  return (std::filesystem::path(options_.run_dir) / "profile.json").string();
}

Rollout LearnerCore::Impl::OnDevice(Rollout rollout) const {
  std::vector<torch::Tensor> host;
  for (torch::Tensor* t : rollout.Tensors()) host.push_back(*t);
  const std::vector<torch::Tensor> moved = ToDevice(host, policy_->device());
  size_t i = 0;
  for (torch::Tensor* t : rollout.Tensors()) *t = moved[i++];
  return rollout;
}

absl::StatusOr<Rollout> LearnerCore::Impl::ToUpdateDevice(
    Rollout rollout) const {
  if (!policy_->device().is_cuda() || policy_->recurrent()) return rollout;
  RETURN_IF_ERROR(CatchTorchErrors("the rollout to the learner's device",
                                   [&] { rollout = OnDevice(rollout); }));
  return rollout;
}

absl::Status LearnerCore::Impl::UpdateFromStaged() {
  const SegmentBatch batch = intake_->TakeBatch();
  int64_t env_steps_before;
  {
    absl::MutexLock lock(&mu_);
    env_steps_before = progress_.env_steps();
  }
  std::vector<Rollout> parts;
  parts.reserve(batch.size());
  for (const auto& s : batch) parts.push_back(RolloutOf(*s));
  ASSIGN_OR_RETURN(const Rollout all, ConcatenateRollouts(parts));
  // With several policies the learner's own updates on its agents' rows.
  Rollout rollout = others_.FirstRows(all);
  ASSIGN_OR_RETURN(rollout, ToUpdateDevice(std::move(rollout)));
  // The returns window after this batch, and whether it reaches the
  // target; the window is kept only once the update succeeded.
  // Every row's steps, a league's segments' left-out rows too.
  int64_t steps = 0;
  for (const auto& s : batch) steps += s->env_steps;
  // Each segment's episodes by policy (SegmentReturnsByPolicy); [0]
  // counts for the run's return.
  std::vector<std::vector<std::vector<float>>> segment_returns;
  segment_returns.reserve(batch.size());
  for (const auto& s : batch) {
    segment_returns.push_back(SegmentReturnsByPolicy(options_.spec, *s->proto));
  }
  ReturnWindow returns_after;
  bool target_here = false;
  {
    absl::MutexLock lock(&mu_);
    returns_after = progress_.returns();
    for (const auto& by_policy : segment_returns) {
      for (float r : by_policy[0]) returns_after.Add(r);
    }
    target_here = progress_.Reaches(returns_after);
  }
  // In a gang: the gang's steps, and whether any rank reached the target,
  // summed in the update's planning all-reduce, so that every rank counts
  // the same steps and ends at the same update.
  std::vector<double> gang_sums{static_cast<double>(steps),
                                target_here ? 1.0 : 0.0};
  const auto start = std::chrono::steady_clock::now();
  const int64_t update = GetStatus().updates() + 1;
  // The other policies' updates on the same batch: alone, at once beside
  // the first's, on a thread of their own (as rl_local runs them); in a
  // gang after it, in the run's order (every rank runs the same
  // all-reduces in the same order on the one collective), unless each is
  // trained by a gang of its own (learner_per_policy): then beside it too.
  const auto update_others = [&] {
    return others_.Update(all, env_steps_before, update, [this](Rollout part) {
      return ToUpdateDevice(std::move(part));
    });
  };
  std::future<absl::Status> others_beside;
  if (!others_.empty() &&
      (options_.collective == nullptr || others_.remote())) {
    others_beside = std::async(std::launch::async, update_others);
  }
  absl::StatusOr<UpdateStats> first =
      updater_->Update(rollout, env_steps_before,
                       options_.collective != nullptr ? &gang_sums : nullptr);
  const absl::Status others_done = others_beside.valid() ? others_beside.get()
                                   : first.ok()          ? update_others()
                                                         : absl::OkStatus();
  if (!first.ok() && !others_.empty()) {
    return Prefixed(first.status(),
                    absl::StrCat("policy ", options_.spec.policies(0).name()));
  }
  RETURN_IF_ERROR(first.status());
  RETURN_IF_ERROR(others_done);
  const UpdateStats stats = *first;
  steps = static_cast<int64_t>(gang_sums[0]);
  target_here = gang_sums[1] > 0;
  if (options_.after_update_for_testing) {
    options_.after_update_for_testing(update, policy_);
  }
  // Never publish (or checkpoint) weights that are not finite.
  RETURN_IF_ERROR(CheckWeightsFinite(update));
  RETURN_IF_ERROR(others_.CheckWeightsFinite(update));
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
  RecordUpdate(batch, segment_returns, stats, steps, target_here,
               std::move(returns_after), seconds);
  if (league_games_.has_value()) {
    RETURN_IF_ERROR(league_games_->Record(batch, GetStatus().env_steps()));
  }
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
    RETURN_IF_ERROR(others_.CheckInSync(*options_.collective, updates));
  }
  const int interval = options_.spec.checkpoint_interval();
  const bool checkpoint_due = interval > 0 && updates % interval == 0;
  // Every rank takes part, whether or not it has a run directory: the
  // gather is a collective.
  if (options_.collective != nullptr && checkpoint_due) {
    RETURN_IF_ERROR(GatherAckedSegments());
  }
  if (checkpoint_due) {
    RETURN_IF_ERROR(Checkpoint(&CheckpointKeeper::WritePeriodic));
  }
  return absl::OkStatus();
}

void LearnerCore::Impl::RecordUpdate(
    const SegmentBatch& batch,
    const std::vector<std::vector<std::vector<float>>>& segment_returns,
    const UpdateStats& stats, int64_t steps, bool target_here,
    ReturnWindow returns_after, double seconds) {
  const IntakeCounts intake = intake_->counts();
  absl::MutexLock lock(&mu_);
  int64_t episodes = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const std::vector<std::vector<float>>& by_policy = segment_returns[i];
    episodes += static_cast<int64_t>(by_policy[0].size());
    actor_returns_.Add(batch[i]->proto->actor_id(), by_policy[0]);
    if (!others_.empty()) progress_.CountPolicyEpisodes(by_policy);
  }
  actor_returns_.EndUpdate();
  for (const ActorReturns::Summary& apart : actor_returns_.NewlyApart()) {
    RL_LOG_WARNING(
        "{}: its episodes stand apart from the other actors' (a faulty "
        "env or an actor reporting forged episodes moves "
        "learner/mean_return; learner/actor_mean_return shows each "
        "actor's)",
        ActorReturns::Describe(apart, kActorReturnsWindow));
  }
  progress_.CountUpdate(steps, episodes, std::move(returns_after), target_here);
  const int64_t version = progress_.policy_version();
  intake_->SetPolicyVersion(version);
  if (stats.nonfinite_minibatches > 0) ++faults_.nonfinite_updates;
  faults_.consecutive_nonfinite_updates = stats.consecutive_nonfinite_updates;
  RL_LOG_DEBUG("update {}: {} segments, {:.3f} s, kl {:.4f}",
               progress_.updates(), batch.size(), seconds, stats.approx_kl);
  Emitter* e = options_.emitter;
  if (e == nullptr) return;
  const int64_t step = progress_.env_steps();
  double lag = 0;
  for (const auto& seg : batch) lag += version - 1 - seg->policy_version;
  // With several policies each one's figures carry its name.
  MetricLabelList labels;
  if (!others_.empty()) {
    labels = {{"policy", options_.spec.policies(0).name()}};
  }
  EmitUpdateMetrics(e, step, stats, seconds, progress_.updates(),
                    options_.grad_norm_interval, labels);
  others_.EmitUpdates(e, step, seconds, progress_.updates(),
                      options_.grad_norm_interval);
  LearnerFigures figures;
  progress_.FillStatus(&figures.status);
  intake.FillStatus(&figures.status);
  figures.nonfinite_updates = static_cast<double>(faults_.nonfinite_updates);
  figures.mean_policy_lag =
      batch.empty() ? 0 : lag / static_cast<double>(batch.size());
  figures.queue_depth = static_cast<double>(intake.queued);
  figures.segments_per_update = static_cast<double>(batch.size());
  EmitLearnerFigures(e, step, figures);
  // Each actor's episodes of the window, by actor (the learner's view of
  // what the actor reported), and how many stand apart.
  int apart = 0;
  for (const ActorReturns::Summary& a : actor_returns_.Summaries()) {
    e->Emit("learner/actor_mean_return", step, a.mean,
            {{"actor", absl::StrCat(a.actor_id)}});
    apart += a.stands_apart ? 1 : 0;
  }
  e->Emit("learner/actors_apart", step, apart);
}

absl::Status LearnerCore::Impl::CheckWeightsFinite(int64_t update) {
  ASSIGN_OR_RETURN(const std::string where, FirstNonFiniteWeight(policy_));
  if (where.empty()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(
      "after update ", update, " the policy's weights are not finite (NaN ",
      "or inf in ", where, "); they were not published or checkpointed ",
      "(the last published policy is version ", GetStatus().policy_version(),
      "). Lower ppo.learning_rate, or check ", "the scale of the rewards"));
}

absl::Status LearnerCore::Impl::Publish(bool final) {
  auto update = std::make_shared<PolicyUpdate>();
  RETURN_IF_ERROR(EncodePolicy(policy_, update.get()));
  RETURN_IF_ERROR(others_.Encode(update.get()));
  {
    absl::MutexLock lock(&mu_);
    update->set_version(progress_.policy_version());
    update->set_env_steps(progress_.env_steps());
  }
  update->set_final(final);
  publisher_.Publish(std::move(update));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<LearnerCore>> LearnerCore::Create(
    const LearnerOptions& options) {
  // Specs arrive resolved (runspec/): checked, never filled in again.
  RETURN_IF_ERROR(CheckResolvedEnvSpec(options.spec.env()));
  auto impl = std::make_unique<Impl>(options);
  RETURN_IF_ERROR(impl->Start());
  auto core = std::unique_ptr<LearnerCore>(new LearnerCore(std::move(impl)));
  core->run_id_ = options.run_id;
  core->max_segment_bytes_ = MaxSegmentBytes(options.spec);
  return core;
}

LearnerCore::LearnerCore(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)),
      intake_(&impl_->intake()),
      publisher_(&impl_->publisher()) {}

LearnerCore::~LearnerCore() = default;

void LearnerCore::Stop() { impl_->Stop(); }

LearnerStatus LearnerCore::GetStatus() const { return impl_->GetStatus(); }
LearnerFaultCounts LearnerCore::fault_counts() const {
  return impl_->fault_counts();
}
bool LearnerCore::WaitUntilDone(absl::Duration timeout) {
  return impl_->WaitUntilDone(timeout);
}
absl::Status LearnerCore::final_status() const { return impl_->final_status(); }

}  // namespace rl
