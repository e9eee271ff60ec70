#include "trainer/local_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <future>
#include <limits>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "actor/collect_metrics.h"
#include "actor/device_collector.h"
#include "common/logging.h"
#include "common/status.h"
#include "envs/env_agents.h"
#include "envs/env_plugin.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/util/message_differencer.h"
#include "learner/checkpoint.h"
#include "learner/device_self_check.h"
#include "learner/other_policies.h"
#include "learner/training_state.h"
#include "learner/update_metrics.h"
#include "policy/compute_device.h"
#include "policy/device_act_check.h"
#include "policy/tensor_bytes.h"
#include "policy/torch_status.h"
#include "runspec/named_policies.h"

namespace rl {

namespace {

// The run file a checkpoint was written under, kept beside its state.
constexpr char kRunSpecKey[] = "run.spec";

// What `now` changes of `before`, a line each, the budget left out.
std::vector<std::string> RunSpecChanges(const RunSpec& before,
                                        const RunSpec& now) {
  std::string report;
  {
    google::protobuf::io::StringOutputStream out(&report);
    google::protobuf::util::MessageDifferencer::StreamReporter reporter(&out);
    google::protobuf::util::MessageDifferencer differ;
    differ.ReportDifferencesTo(&reporter);
    differ.Compare(before, now);
  }
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(report, '\n')) {
    if (line.empty() || absl::StrContains(line, "total_env_steps")) continue;
    lines.emplace_back(line);
  }
  return lines;
}

}  // namespace
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

namespace {

// A policy's acting and trained copies and its updater.
struct PolicyParts {
  ActorCritic policy{nullptr};
  ActorCritic learner_policy{nullptr};
  std::unique_ptr<PpoUpdater> updater;
};

// `own`'s network seeded with `seed`, acting on `acting_device`, trained on
// `device` (the same network where the two are one device).
absl::StatusOr<PolicyParts> CreatePolicyParts(const RunSpec& own, uint64_t seed,
                                              torch::Device device,
                                              torch::Device acting_device,
                                              bool separate) {
  const ActorCriticConfig config = RunNetworkConfig(own);
  // A CUDA device's first use in this process checks itself.
  RETURN_IF_ERROR(
      CheckDeviceOnFirstUse(config, own.ppo(), own.execution(), device));
  RETURN_IF_ERROR(CheckDeviceActingOnFirstUse(config, acting_device));
  PolicyParts parts;
  ASSIGN_OR_RETURN(parts.policy, CreateSeededActorCritic(config, seed));
  RETURN_IF_ERROR(CatchTorchErrors(
      absl::StrCat("moving the policy to ", acting_device.str()),
      [&] { parts.policy->to(acting_device); }));
  parts.learner_policy = parts.policy;
  if (device != acting_device || separate) {
    ASSIGN_OR_RETURN(parts.learner_policy,
                     CreateSeededActorCritic(config, seed));
    RETURN_IF_ERROR(
        CatchTorchErrors(absl::StrCat("moving the policy to ", device.str()),
                         [&] { parts.learner_policy->to(device); }));
  }
  ASSIGN_OR_RETURN(
      parts.updater, CatchTorchErrors("creating the optimizer", [&] {
        return std::make_unique<PpoUpdater>(parts.learner_policy, own.ppo(),
                                            own.total_env_steps(), seed,
                                            own.execution());
      }));
  return parts;
}

// The rows of policy `index`'s agents in a batch of `rows` rows.
torch::Tensor PolicyRows(const RunSpec& spec, int index, int64_t rows) {
  return torch::tensor(RowsOfPolicy(spec, index, rows), torch::kInt64);
}

}  // namespace

absl::StatusOr<std::unique_ptr<LocalTrainer>> LocalTrainer::Create(
    const RunSpec& spec, const TrainerOptions& options) {
  ASSIGN_OR_RETURN(
      const torch::Device device,
      ResolveComputeDevice(spec.resources().learner_device(),
                           "resources.learner_device", "rl_local"));
  ASSIGN_OR_RETURN(const torch::Device acting_device,
                   ResolveComputeDevice(spec.resources().actor_device(),
                                        "resources.actor_device", "rl_local"));
  // Built-in envs act on a GPU with the policy (DeviceCollector); the
  // others step on the host.
  ASSIGN_OR_RETURN(
      auto collector,
      CreateSegmentCollector(spec, spec.seed(),
                             std::max(1, options.env_threads), acting_device));
  // With several policies the first is the run's own (its checkpoints are
  // the run's); the others follow.
  const bool several = spec.policies_size() > 0;
  ASSIGN_OR_RETURN(
      PolicyParts first,
      CreatePolicyParts(PolicyRun(spec, 0), spec.seed(), device, acting_device,
                        options.separate_learner_policy_for_testing));
  ASSIGN_OR_RETURN(Rollout rollout,
                   CatchTorchErrors("allocating the rollout buffer", [&] {
                     return collector->AllocateRollout();
                   }));
  std::unique_ptr<LocalTrainer> trainer(
      new LocalTrainer(spec, options, std::move(collector),
                       std::move(first.policy), std::move(first.learner_policy),
                       std::move(first.updater), std::move(rollout)));
  if (several) {
    const int64_t rows = trainer->rollout_.num_envs();
    std::vector<RowPolicy> acting = {
        {trainer->policy_, PolicyRows(spec, 0, rows)}};
    trainer->first_rows_ = acting[0].rows;
    trainer->progress_.policies.resize(spec.policies_size());
    trainer->policy_windows_.resize(spec.policies_size());
    for (int i = 0; i < spec.policies_size(); ++i) {
      trainer->progress_.policies[i].name = spec.policies(i).name();
    }
    for (int i = 1; i < spec.policies_size(); ++i) {
      OtherPolicy other;
      other.name = spec.policies(i).name();
      other.rows = PolicyRows(spec, i, rows);
      ASSIGN_OR_RETURN(
          PolicyParts parts,
          CreatePolicyParts(NamedPolicyRun(spec, i), spec.seed() + i, device,
                            acting_device,
                            options.separate_learner_policy_for_testing));
      other.policy = parts.policy;
      other.learner_policy = parts.learner_policy;
      other.updater = std::move(parts.updater);
      acting.push_back({other.policy, other.rows});
      trainer->others_.push_back(std::move(other));
    }
    RETURN_IF_ERROR(trainer->collector_->SetRowPolicies(std::move(acting)));
  }
  if (spec.has_league()) {
    ASSIGN_OR_RETURN(
        trainer->league_,
        League::Create(spec, trainer->policy_, trainer->rollout_.num_envs()));
    RETURN_IF_ERROR(trainer->collector_->SetOpponents(trainer->league_.get()));
    trainer->progress_.league = trainer->league_->Describe();
    trainer->league_games_.emplace(options.run_dir, options.emitter);
  }
  return trainer;
}

LocalTrainer::LocalTrainer(const RunSpec& spec, const TrainerOptions& options,
                           std::unique_ptr<SegmentCollector> collector,
                           ActorCritic policy, ActorCritic learner_policy,
                           std::unique_ptr<PpoUpdater> updater, Rollout rollout)
    : spec_(spec),
      options_(options),
      collector_(std::move(collector)),
      policy_(std::move(policy)),
      learner_policy_(std::move(learner_policy)),
      updater_(std::move(updater)),
      rollout_(std::move(rollout)) {
  progress_.total_env_steps = spec.total_env_steps();
  progress_.mean_return = std::numeric_limits<double>::quiet_NaN();
}

bool LocalTrainer::Done() const {
  return progress_.env_steps >= spec_.total_env_steps() || target_reached_;
}

absl::Status LocalTrainer::Step() {
  auto start = Clock::now();
  CollectTimings timings;
  RETURN_IF_ERROR(collector_->Collect(policy_, &rollout_, &timings));
  time_.env += timings.env_seconds;
  time_.inference += timings.inference_seconds;
  const double collect_seconds = SecondsSince(start);

  start = Clock::now();
  // A rollout collected on one GPU for a learner elsewhere goes there whole
  // (one on the host is the learner's to copy, packed).
  const torch::Device rollout_device = rollout_.rewards.device();
  const auto on_device = [&](const Rollout& r, const ActorCritic& learner) {
    const torch::Device device = learner->device();
    return rollout_device.is_cpu() || rollout_device == device ? r
                                                               : r.To(device);
  };
  // With a league only the trained seats are learned from; with several
  // policies each learns from its own agents' rows.
  const Rollout trained = league_ != nullptr
                              ? rollout_.Rows(league_->learner_rows())
                          : first_rows_.defined() ? rollout_.Rows(first_rows_)
                                                  : rollout_;
  // The other policies update at once, each on a thread of its own, as
  // each would on a learner of its own.
  std::vector<std::future<absl::StatusOr<UpdateStats>>> others_updates;
  for (OtherPolicy& other : others_) {
    others_updates.push_back(std::async(std::launch::async, [&] {
      return other.updater->Update(
          on_device(rollout_.Rows(other.rows), other.learner_policy),
          progress_.env_steps);
    }));
  }
  absl::StatusOr<UpdateStats> update = updater_->Update(
      on_device(trained, learner_policy_), progress_.env_steps);
  std::vector<absl::StatusOr<UpdateStats>> others_done;
  for (auto& f : others_updates) others_done.push_back(f.get());
  if (!update.ok()) {
    return Prefixed(
        update.status(),
        absl::StrCat(PolicyPrefix(0), "update ", progress_.updates + 1,
                     " (after ", progress_.env_steps, " steps)"));
  }
  progress_.last_update = *update;
  if (learner_policy_.ptr() != policy_.ptr()) {
    RETURN_IF_ERROR(CopyPolicyWeights(learner_policy_, policy_));
  }
  // The others ran beside it: their time is in the wall time, as update.
  const double gae_seconds = progress_.last_update.gae_seconds;
  for (size_t i = 0; i < others_.size(); ++i) {
    OtherPolicy& other = others_[i];
    const absl::StatusOr<UpdateStats>& own = others_done[i];
    if (!own.ok()) {
      return Prefixed(
          own.status(),
          absl::StrCat(PolicyPrefix(i + 1), "update ", progress_.updates + 1,
                       " (after ", progress_.env_steps, " steps)"));
    }
    other.last_update = *own;
    if (other.learner_policy.ptr() != other.policy.ptr()) {
      RETURN_IF_ERROR(CopyPolicyWeights(other.learner_policy, other.policy));
    }
  }
  time_.gae += gae_seconds;
  time_.update += SecondsSince(start) - gae_seconds;

  const double update_seconds = SecondsSince(start);
  start = Clock::now();
  const int64_t segment_steps = rollout_.num_steps() * rollout_.num_envs();
  progress_.env_steps += segment_steps;
  progress_.updates += 1;
  // The episodes that count: every row's, or with a league the trained
  // seats' (its matches go to <run_dir>/league/matches.csv), or with
  // several policies the first's (each one's apart in progress().policies
  // and telemetry).
  std::vector<float> league_returns;
  std::vector<int32_t> league_lengths;
  if (league_ != nullptr) {
    league_returns = league_->TakeLearnerReturns();
    league_lengths = league_->TakeLearnerLengths();
    RETURN_IF_ERROR(
        league_games_->Record(league_->TakeMatches(), progress_.env_steps));
    RETURN_IF_ERROR(
        league_->AfterUpdate(progress_.updates, progress_.env_steps, policy_));
    progress_.league = league_->Describe();
    if (league_games_->games() > 0) {
      absl::StrAppendFormat(&progress_.league, "; rating %.1f",
                            league_games_->rating().mu);
    }
  }
  const size_t num_policies = 1 + others_.size();
  std::vector<std::vector<float>> policy_returns(num_policies);
  std::vector<std::vector<int32_t>> policy_lengths(num_policies);
  if (first_rows_.defined()) {
    std::vector<PolicyEpisodes> episodes = EpisodesByPolicy(
        spec_, collector_->episode_rows(), collector_->episode_returns(),
        collector_->episode_lengths());
    for (size_t i = 0; i < num_policies; ++i) {
      policy_returns[i] = std::move(episodes[i].returns);
      policy_lengths[i] = std::move(episodes[i].lengths);
    }
  }
  const std::vector<float>& episode_returns =
      league_ != nullptr      ? league_returns
      : first_rows_.defined() ? policy_returns[0]
                              : collector_->episode_returns();
  const std::vector<int32_t>& episode_lengths =
      league_ != nullptr      ? league_lengths
      : first_rows_.defined() ? policy_lengths[0]
                              : collector_->episode_lengths();
  if (options_.emitter != nullptr) {
    if (first_rows_.defined()) {
      // The segment's rates and times once; each policy's episodes apart.
      EmitCollectMetrics(options_.emitter, progress_.env_steps, segment_steps,
                         collect_seconds, timings, {}, {}, {{"actor", "0"}});
      for (size_t i = 0; i < num_policies; ++i) {
        const MetricLabelList labels = {{"actor", "0"},
                                        {"policy", spec_.policies(i).name()}};
        EmitEpisodeMetrics(options_.emitter, progress_.env_steps,
                           policy_returns[i], policy_lengths[i], labels);
        EmitUpdateMetrics(
            options_.emitter, progress_.env_steps,
            i == 0 ? progress_.last_update : others_[i - 1].last_update,
            update_seconds, progress_.updates, /*grad_norm_interval=*/10,
            {{"policy", spec_.policies(i).name()}});
      }
    } else {
      EmitCollectMetrics(options_.emitter, progress_.env_steps, segment_steps,
                         collect_seconds, timings, episode_returns,
                         episode_lengths, {{"actor", "0"}});
      EmitUpdateMetrics(options_.emitter, progress_.env_steps,
                        progress_.last_update, update_seconds,
                        progress_.updates,
                        /*grad_norm_interval=*/10);
    }
  }
  for (size_t i = 0; first_rows_.defined() && i < num_policies; ++i) {
    PolicyProgress& p = progress_.policies[i];
    p.name = spec_.policies(i).name();
    for (float r : policy_returns[i]) policy_windows_[i].Add(r);
    p.episodes += policy_returns[i].size();
    if (!policy_windows_[i].empty()) p.mean_return = policy_windows_[i].Mean();
    p.last_update = i == 0 ? progress_.last_update : others_[i - 1].last_update;
  }
  for (float r : episode_returns) recent_returns_.Add(r);
  progress_.episodes += episode_returns.size();
  if (!recent_returns_.empty()) progress_.mean_return = recent_returns_.Mean();
  if (spec_.has_target_return() && !target_reached_ &&
      recent_returns_.Reaches(spec_.target_return())) {
    target_reached_ = true;
    target_reached_at_ = progress_.env_steps;
  }
  time_.other += SecondsSince(start) + collect_seconds - timings.env_seconds -
                 timings.inference_seconds;
  return absl::OkStatus();
}

std::string LocalTrainer::PolicyPrefix(size_t index) const {
  if (spec_.policies_size() == 0) return "";
  return absl::StrCat("policy ", spec_.policies(index).name(), ": ");
}

absl::StatusOr<TrainResult> LocalTrainer::Train(
    const std::function<void(const TrainerProgress&)>& on_update,
    int64_t max_updates) {
  const auto start = Clock::now();
  // A run resumed already done trains no more: its time is the saved one
  // (the checkpoint written below keeps it).
  progress_.seconds = std::max(progress_.seconds, seconds_before_resume_);
  if (progress_.seconds > 0) {
    progress_.steps_per_second = progress_.env_steps / progress_.seconds;
  }
  int64_t updates = 0;
  while (!Done() && (max_updates == 0 || updates < max_updates)) {
    RETURN_IF_ERROR(Step());
    ++updates;
    progress_.seconds = seconds_before_resume_ + SecondsSince(start);
    progress_.steps_per_second = progress_.env_steps / progress_.seconds;
    if (!options_.run_dir.empty() && spec_.checkpoint_interval() > 0 &&
        progress_.updates % spec_.checkpoint_interval() == 0) {
      const auto ckpt_start = Clock::now();
      RETURN_IF_ERROR(WriteCheckpoint().status());
      time_.other += SecondsSince(ckpt_start);
    }
    if (on_update) on_update(progress_);
  }
  if (!options_.run_dir.empty()) RETURN_IF_ERROR(WriteCheckpoint().status());
  TrainResult result;
  result.progress = progress_;
  result.target_reached = target_reached_;
  result.target_reached_at_steps = target_reached_at_;
  result.time = time_;
  result.last_checkpoint = last_checkpoint_;
  return result;
}

absl::StatusOr<std::string> LocalTrainer::WriteCheckpoint() {
  TensorMap extra = collector_->SaveState();
  if (league_ != nullptr) league_->SaveState(&extra);
  TrainingState state;
  state.set_env_steps(progress_.env_steps);
  state.set_updates(progress_.updates);
  state.set_episodes(progress_.episodes);
  state.set_target_reached(target_reached_);
  state.set_target_reached_at_steps(target_reached_at_);
  state.set_seconds(progress_.seconds);
  state.mutable_recent_returns()->Add(recent_returns_.begin(),
                                      recent_returns_.end());
  state.set_updater_generator(GeneratorStateBytes(updater_->generator()));
  PutTrainingState(state, &extra);
  extra[kRunSpecKey] = BytesTensor(spec_.SerializeAsString());
  // The other policies' first: the run's checkpoint, written last, is
  // what a resume looks for, and theirs must be there by then. They keep
  // every one until the run's is written, and then keep what it kept (as
  // the service's learner does): pruned on their own, a failed write of
  // the run's would leave theirs without the one a resume falls back to.
  for (OtherPolicy& other : others_) {
    RETURN_IF_ERROR(WritePolicyCheckpoint(
        options_.run_dir, other.name, progress_.updates, other.learner_policy,
        *other.updater, std::numeric_limits<int>::max()));
  }
  for (size_t i = 0; i < policy_windows_.size(); ++i) {
    extra[absl::StrCat("policy.", i, ".returns")] =
        torch::tensor(std::vector<float>(policy_windows_[i].begin(),
                                         policy_windows_[i].end()),
                      torch::kFloat32);
    extra[absl::StrCat("policy.", i, ".episodes")] =
        torch::tensor({progress_.policies[i].episodes}, torch::kInt64);
  }
  const std::string root =
      (std::filesystem::path(options_.run_dir) / "checkpoints").string();
  absl::StatusOr<std::string> written = rl::WriteCheckpoint(
      root, progress_.updates, learner_policy_, updater_->optimizer(), extra,
      spec_.keep_checkpoints());
  if (!others_.empty()) {
    // Whether or not the run's was written: those its failure or its
    // pruning left without a run checkpoint go. The write's own error is
    // the one to return; a pruning error after it is only logged.
    absl::Status pruned = [&]() -> absl::Status {
      ASSIGN_OR_RETURN(const std::set<int64_t> kept, CheckpointCounters(root));
      for (const OtherPolicy& other : others_) {
        RETURN_IF_ERROR(PruneCheckpoints(
            PolicyCheckpointRoot(options_.run_dir, other.name), kept));
      }
      return absl::OkStatus();
    }();
    if (!pruned.ok()) {
      if (written.ok()) return pruned;
      RL_LOG_WARNING("pruning the policies' checkpoints: {}",
                     std::string(pruned.message()));
    }
  }
  if (!written.ok()) return written.status();
  last_checkpoint_ = *std::move(written);
  return last_checkpoint_;
}

absl::Status LocalTrainer::Restore(const std::string& checkpoint_dir) {
  TensorMap extra;
  RETURN_IF_ERROR(ReadCheckpoint(checkpoint_dir, learner_policy_,
                                 &updater_->optimizer(), &extra));
  run_file_changes_.clear();
  if (auto saved = extra.find(kRunSpecKey); saved != extra.end()) {
    RunSpec before;
    if (saved->second.scalar_type() != torch::kUInt8 ||
        !before.ParseFromString(TensorBytes(saved->second))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint ", checkpoint_dir, ": its run.spec does not read"));
    }
    run_file_changes_ = RunSpecChanges(before, spec_);
  }
  if (learner_policy_.ptr() != policy_.ptr()) {
    RETURN_IF_ERROR(CopyPolicyWeights(learner_policy_, policy_));
  }
  // The other policies from their checkpoints of the same number, beside
  // the run's (<run_dir>/checkpoints/ckpt-N ->
  // <run_dir>/policies/<name>/checkpoints/ckpt-N), before the environments'
  // and the league's state: one that is damaged (the checkpoint before is
  // tried next) has left nothing of this one's in them.
  for (OtherPolicy& other : others_) {
    RETURN_IF_ERROR(ReadPolicyCheckpoint(checkpoint_dir, other.name,
                                         other.learner_policy, *other.updater));
    if (other.learner_policy.ptr() != other.policy.ptr()) {
      RETURN_IF_ERROR(CopyPolicyWeights(other.learner_policy, other.policy));
    }
  }
  RETURN_IF_ERROR(collector_->RestoreState(extra));
  if (league_ != nullptr) {
    RETURN_IF_ERROR(league_->RestoreState(extra));
    progress_.league = league_->Describe();
  }
  for (size_t i = 0; i < policy_windows_.size(); ++i) {
    auto returns = extra.find(absl::StrCat("policy.", i, ".returns"));
    auto episodes = extra.find(absl::StrCat("policy.", i, ".episodes"));
    if (returns == extra.end() || episodes == extra.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint ", checkpoint_dir, " has no policy.", i,
                       ".returns: written by a run without these policies?"));
    }
    if (returns->second.scalar_type() != torch::kFloat32 ||
        episodes->second.scalar_type() != torch::kInt64 ||
        episodes->second.numel() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint ", checkpoint_dir, ": policy.", i,
                       ".returns or .episodes is not what a run writes "
                       "(float32 returns, one int64 count)"));
    }
    const torch::Tensor r = returns->second.contiguous();
    policy_windows_[i].Assign(r.data_ptr<float>(),
                              r.data_ptr<float>() + r.numel());
    progress_.policies[i].episodes = episodes->second.item<int64_t>();
    if (!policy_windows_[i].empty()) {
      progress_.policies[i].mean_return = policy_windows_[i].Mean();
    }
  }
  const std::string source = absl::StrCat("checkpoint ", checkpoint_dir);
  ASSIGN_OR_RETURN(const TrainingState state, TakeTrainingState(extra, source));
  RETURN_IF_ERROR(SetGeneratorState(state.updater_generator(),
                                    updater_->generator(), source));
  progress_.env_steps = state.env_steps();
  if (league_games_.has_value()) league_games_->StartAt(progress_.env_steps);
  progress_.updates = state.updates();
  progress_.episodes = state.episodes();
  target_reached_ = state.target_reached();
  target_reached_at_ = state.target_reached_at_steps();
  seconds_before_resume_ = state.seconds();
  recent_returns_.Assign(state.recent_returns().begin(),
                         state.recent_returns().end());
  if (!recent_returns_.empty()) progress_.mean_return = recent_returns_.Mean();
  if (league_ != nullptr) {
    // Version k is the policy after k x snapshot_interval updates: a run
    // file whose interval changed since the checkpoint would number the
    // versions to come otherwise than the ones kept.
    const int64_t interval = spec_.league().snapshot_interval();
    const int64_t versions = league_->next_version() - 1;
    if (progress_.updates / interval != versions) {
      return absl::InvalidArgumentError(absl::StrCat(
          "league.snapshot_interval: ", interval, " does not fit ", source,
          " (its league froze ", versions, " versions in ", progress_.updates,
          " updates); resume with the interval the run was trained with"));
    }
  }
  return absl::OkStatus();
}

}  // namespace rl
