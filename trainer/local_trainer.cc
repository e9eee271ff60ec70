#include "trainer/local_trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "actor/collect_metrics.h"
#include "actor/device_collector.h"
#include "common/status.h"
#include "envs/env_agents.h"
#include "envs/env_plugin.h"
#include "learner/checkpoint.h"
#include "learner/device_self_check.h"
#include "learner/training_state.h"
#include "learner/update_metrics.h"
#include "policy/compute_device.h"
#include "policy/device_act_check.h"
#include "policy/torch_status.h"

namespace rl {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

absl::Status Prefixed(const absl::Status& status, absl::string_view context) {
  return absl::Status(status.code(),
                      absl::StrCat(context, ": ", status.message()));
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
  const ActorCriticConfig config = RunNetworkConfig(spec);
  // A CUDA device's first use in this process checks itself.
  RETURN_IF_ERROR(
      CheckDeviceOnFirstUse(config, spec.ppo(), spec.execution(), device));
  RETURN_IF_ERROR(CheckDeviceActingOnFirstUse(config, acting_device));
  ASSIGN_OR_RETURN(ActorCritic policy,
                   CreateSeededActorCritic(config, spec.seed()));
  RETURN_IF_ERROR(CatchTorchErrors(
      absl::StrCat("moving the policy to ", acting_device.str()),
      [&] { policy->to(acting_device); }));
  ActorCritic learner_policy = policy;
  if (device != acting_device || options.separate_learner_policy_for_testing) {
    ASSIGN_OR_RETURN(learner_policy,
                     CreateSeededActorCritic(config, spec.seed()));
    RETURN_IF_ERROR(
        CatchTorchErrors(absl::StrCat("moving the policy to ", device.str()),
                         [&] { learner_policy->to(device); }));
  }
  ASSIGN_OR_RETURN(
      auto updater, CatchTorchErrors("creating the optimizer", [&] {
        return std::make_unique<PpoUpdater>(learner_policy, spec.ppo(),
                                            spec.total_env_steps(), spec.seed(),
                                            spec.execution());
      }));
  ASSIGN_OR_RETURN(Rollout rollout,
                   CatchTorchErrors("allocating the rollout buffer", [&] {
                     return collector->AllocateRollout();
                   }));
  std::unique_ptr<LocalTrainer> trainer(new LocalTrainer(
      spec, options, std::move(collector), std::move(policy),
      std::move(learner_policy), std::move(updater), std::move(rollout)));
  if (spec.has_league()) {
    ASSIGN_OR_RETURN(
        trainer->league_,
        League::Create(spec, trainer->policy_, trainer->rollout_.num_envs()));
    RETURN_IF_ERROR(trainer->collector_->SetOpponents(trainer->league_.get()));
    trainer->progress_.league = trainer->league_->Describe();
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
  const torch::Device learner_device = learner_policy_->device();
  const torch::Device rollout_device = rollout_.rewards.device();
  // With a league only the trained seats are learned from.
  const Rollout trained =
      league_ != nullptr ? rollout_.Rows(league_->learner_rows()) : rollout_;
  absl::StatusOr<UpdateStats> update = updater_->Update(
      rollout_device.is_cpu() || rollout_device == learner_device
          ? trained
          : trained.To(learner_device),
      progress_.env_steps);
  if (!update.ok()) {
    return Prefixed(update.status(),
                    absl::StrCat("update ", progress_.updates + 1, " (after ",
                                 progress_.env_steps, " steps)"));
  }
  progress_.last_update = *update;
  if (learner_policy_.ptr() != policy_.ptr()) {
    RETURN_IF_ERROR(CopyPolicyWeights(learner_policy_, policy_));
  }
  time_.gae += progress_.last_update.gae_seconds;
  time_.update += SecondsSince(start) - progress_.last_update.gae_seconds;

  const double update_seconds = SecondsSince(start);
  start = Clock::now();
  const int64_t segment_steps = rollout_.num_steps() * rollout_.num_envs();
  progress_.env_steps += segment_steps;
  progress_.updates += 1;
  // The episodes that count: every row's, or with a league the trained
  // seats' (its matches go to <run_dir>/league/matches.csv).
  std::vector<float> league_returns;
  std::vector<int32_t> league_lengths;
  if (league_ != nullptr) {
    league_returns = league_->TakeLearnerReturns();
    league_lengths = league_->TakeLearnerLengths();
    const std::vector<LeagueMatch> matches = league_->TakeMatches();
    if (!options_.run_dir.empty()) {
      RETURN_IF_ERROR(AppendLeagueMatches(
          (std::filesystem::path(options_.run_dir) / "league" / "matches.csv")
              .string(),
          matches));
    }
    RETURN_IF_ERROR(
        league_->AfterUpdate(progress_.updates, progress_.env_steps, policy_));
    progress_.league = league_->Describe();
  }
  const std::vector<float>& episode_returns =
      league_ != nullptr ? league_returns : collector_->episode_returns();
  const std::vector<int32_t>& episode_lengths =
      league_ != nullptr ? league_lengths : collector_->episode_lengths();
  if (options_.emitter != nullptr) {
    EmitCollectMetrics(options_.emitter, progress_.env_steps, segment_steps,
                       collect_seconds, timings, episode_returns,
                       episode_lengths, {{"actor", "0"}});
    EmitUpdateMetrics(options_.emitter, progress_.env_steps,
                      progress_.last_update, update_seconds, progress_.updates,
                      /*grad_norm_interval=*/10);
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

absl::StatusOr<TrainResult> LocalTrainer::Train(
    const std::function<void(const TrainerProgress&)>& on_update,
    int64_t max_updates) {
  const auto start = Clock::now();
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
  ASSIGN_OR_RETURN(
      last_checkpoint_,
      rl::WriteCheckpoint(
          (std::filesystem::path(options_.run_dir) / "checkpoints").string(),
          progress_.updates, learner_policy_, updater_->optimizer(), extra,
          spec_.keep_checkpoints()));
  return last_checkpoint_;
}

absl::Status LocalTrainer::Restore(const std::string& checkpoint_dir) {
  TensorMap extra;
  RETURN_IF_ERROR(ReadCheckpoint(checkpoint_dir, learner_policy_,
                                 &updater_->optimizer(), &extra));
  if (learner_policy_.ptr() != policy_.ptr()) {
    RETURN_IF_ERROR(CopyPolicyWeights(learner_policy_, policy_));
  }
  RETURN_IF_ERROR(collector_->RestoreState(extra));
  if (league_ != nullptr) {
    RETURN_IF_ERROR(league_->RestoreState(extra));
    progress_.league = league_->Describe();
  }
  const std::string source = absl::StrCat("checkpoint ", checkpoint_dir);
  ASSIGN_OR_RETURN(const TrainingState state, TakeTrainingState(extra, source));
  RETURN_IF_ERROR(SetGeneratorState(state.updater_generator(),
                                    updater_->generator(), source));
  progress_.env_steps = state.env_steps();
  progress_.updates = state.updates();
  progress_.episodes = state.episodes();
  target_reached_ = state.target_reached();
  target_reached_at_ = state.target_reached_at_steps();
  seconds_before_resume_ = state.seconds();
  recent_returns_.Assign(state.recent_returns().begin(),
                         state.recent_returns().end());
  if (!recent_returns_.empty()) progress_.mean_return = recent_returns_.Mean();
  return absl::OkStatus();
}

absl::StatusOr<double> EvaluatePolicy(const RunSpec& spec, ActorCritic& policy,
                                      int episodes, uint64_t seed,
                                      std::vector<double>* returns) {
  // The rows EvaluateActions opens: whole environments of several agents.
  const int64_t E = WholeCopies(std::min(episodes, 64), spec.env());
  torch::Tensor state = policy->InitialState(E);
  return EvaluateActions(
      spec,
      [&](const torch::Tensor& obs, const torch::Tensor& masks,
          const torch::Tensor& starts) -> absl::StatusOr<torch::Tensor> {
        if (state.defined()) state = state * starts.eq(0).unsqueeze(1);
        ASSIGN_OR_RETURN(const PolicyStep step,
                         ActChecked(policy, obs, c10::nullopt, true, masks,
                                    state.defined() ? &state : nullptr));
        RETURN_IF_ERROR(policy->CheckActions(step.actions, "actions", E));
        return step.actions.to(torch::kCPU);  // the envs read them here
      },
      episodes, seed, returns);
}

absl::StatusOr<double> EvaluateActions(const RunSpec& spec,
                                       const EvaluationActor& act, int episodes,
                                       uint64_t seed,
                                       std::vector<double>* finished_returns) {
  if (episodes < 1) {
    return absl::InvalidArgumentError("episodes must be >= 1");
  }
  RunSpec eval_spec = spec;
  // Whole environments: several agents each are as many rows.
  eval_spec.set_envs_per_actor(WholeCopies(std::min(episodes, 64), spec.env()));
  EnvOpenOptions options;
  options.num_envs = eval_spec.envs_per_actor();
  options.seed = seed;
  ASSIGN_OR_RETURN(auto env, OpenEnv(spec.env(), options));
  const EnvSpec& info = env->spec();
  const int64_t E = eval_spec.envs_per_actor();
  torch::Tensor obs = torch::zeros(
      {E, info.observation_size()},
      ObservationsAreBytes(info) ? torch::kUInt8 : torch::kFloat32);
  torch::Tensor returns = torch::zeros({E});
  torch::Tensor lengths = torch::zeros({E}, torch::kInt32);
  torch::Tensor rewards = torch::zeros({E});
  torch::Tensor term = torch::zeros({E}, torch::kUInt8);
  torch::Tensor trunc = torch::zeros({E}, torch::kUInt8);
  // The env's action masks, when it writes them: a masked action is never
  // taken, in evaluation either.
  torch::Tensor masks;
  if (info.action_mask()) {
    masks = torch::ones({E, ActionMaskSize(info)}, torch::kUInt8);
  }
  RETURN_IF_ERROR(env->Reset(
      obs.data_ptr(), masks.defined() ? masks.data_ptr<uint8_t>() : nullptr));
  // Each env slot plays episodes until `episodes` have finished in total;
  // only the first `episodes` completions count, in slot order per step.
  std::vector<double> finished;
  c10::InferenceMode inference;
  // The actions the env takes: int64 [E] or [E, parts], float [E, A].
  std::vector<int64_t> action_shape = {E};
  if (IsMultiDiscrete(info)) action_shape.push_back(info.action_nvec_size());
  if (!IsDiscrete(info)) action_shape.push_back(info.continuous_action_size());
  // Every env begins an episode at the reset, then wherever one ended.
  torch::Tensor starts = torch::ones({E}, torch::kUInt8);
  while (static_cast<int>(finished.size()) < episodes) {
    ASSIGN_OR_RETURN(const torch::Tensor chosen, act(obs, masks, starts));
    RETURN_IF_ERROR(CheckTensor(
        chosen, "actions", IsDiscrete(info) ? torch::kInt64 : torch::kFloat32,
        action_shape));
    StepOutputs out;
    out.observations = obs.data_ptr();
    if (masks.defined()) out.action_masks = masks.data_ptr<uint8_t>();
    out.rewards = rewards.data_ptr<float>();
    out.terminated = term.data_ptr<uint8_t>();
    out.truncated = trunc.data_ptr<uint8_t>();
    out.episode_returns = returns.data_ptr<float>();
    out.episode_lengths = lengths.data_ptr<int32_t>();
    // The envs read the actions' memory on the host.
    const torch::Tensor actions = chosen.to(torch::kCPU).contiguous();
    RETURN_IF_ERROR(IsDiscrete(info)
                        ? env->StepDiscrete(actions.data_ptr<int64_t>(), out)
                        : env->StepContinuous(actions.data_ptr<float>(), out));
    starts.copy_(term | trunc);
    for (int64_t e = 0; e < E; ++e) {
      // With env.episodic_life an episode is a game, over every life.
      if (info.episodic_life()
              ? lengths.data_ptr<int32_t>()[e] > 0
              : (term.data_ptr<uint8_t>()[e] | trunc.data_ptr<uint8_t>()[e])) {
        if (static_cast<int>(finished.size()) < episodes) {
          finished.push_back(returns.data_ptr<float>()[e]);
        }
      }
    }
  }
  if (finished_returns != nullptr) *finished_returns = finished;
  return std::accumulate(finished.begin(), finished.end(), 0.0) /
         finished.size();
}

std::string DescribeGameOutcomes(const std::vector<double>& returns) {
  double won = 0, drew = 0, lost = 0;
  for (const double r : returns) {
    if (r == 1) {
      ++won;
    } else if (r == 0) {
      ++drew;
    } else if (r == -1) {
      ++lost;
    } else {
      return "";
    }
  }
  if (returns.empty()) return "";
  const double n = static_cast<double>(returns.size()) / 100;
  return absl::StrFormat("won %.1f%%, drew %.1f%%, lost %.1f%%", won / n,
                         drew / n, lost / n);
}

}  // namespace rl
