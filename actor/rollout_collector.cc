#include "actor/rollout_collector.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "policy/torch_status.h"
#include "runspec/policy_rules.h"

namespace rl {
namespace {

using Clock = std::chrono::steady_clock;

// Whether `rows` is a [K] int64 CPU tensor of rows in [0, num_envs) (K may
// be 0): the rows a policy acts for.
bool RowsOfBatch(const torch::Tensor& rows, int64_t num_envs) {
  return rows.defined() && rows.dim() == 1 &&
         rows.scalar_type() == torch::kInt64 && rows.device().is_cpu() &&
         (rows.numel() == 0 || (rows.min().item<int64_t>() >= 0 &&
                                rows.max().item<int64_t>() < num_envs));
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

uint64_t SamplingSeed(uint64_t seed) {
  return seed * 0x9E3779B97F4A7C15ull + 17;
}

int EnvThreads(const RunSpec& spec, int worker_threads) {
  const int asked = spec.resources().actor_threads();
  if (asked <= 1) return std::max(1, worker_threads);
  return worker_threads > 1 ? std::min(asked, worker_threads) : asked;
}

absl::StatusOr<std::unique_ptr<RolloutCollector>> RolloutCollector::Create(
    const RunSpec& spec, uint64_t seed, int env_threads,
    const std::vector<std::string>& plugin_dirs) {
  EnvOpenOptions options;
  options.num_envs = spec.envs_per_actor();
  options.seed = seed;
  options.num_threads = EnvThreads(spec, env_threads);
  options.allowed_dirs = plugin_dirs;
  ASSIGN_OR_RETURN(std::unique_ptr<BatchedEnv> env,
                   OpenEnv(spec.env(), options));
  std::unique_ptr<RolloutCollector> collector(
      new RolloutCollector(spec, std::move(env), seed));
  RETURN_IF_ERROR(
      collector->env_->Reset(collector->current_observations_.data_ptr(),
                             collector->current_masks_.defined()
                                 ? collector->current_masks_.data_ptr<uint8_t>()
                                 : nullptr));
  return collector;
}

RolloutCollector::RolloutCollector(const RunSpec& spec,
                                   std::unique_ptr<BatchedEnv> env,
                                   uint64_t seed)
    : spec_(spec),
      env_(std::move(env)),
      num_steps_(spec.segment_length()),
      num_envs_(spec.envs_per_actor()),
      generator_(at::make_generator<at::CPUGeneratorImpl>(SamplingSeed(seed))) {
  const int64_t obs = env_->spec().observation_size();
  const torch::Dtype dtype = ObservationDtype();
  current_observations_ = torch::zeros({num_envs_, obs}, dtype);
  final_observations_ = torch::zeros({num_steps_, num_envs_, obs}, dtype);
  episode_return_rows_ = torch::zeros({num_steps_, num_envs_});
  episode_length_rows_ = torch::zeros({num_steps_, num_envs_}, torch::kInt32);
  if (env_->spec().action_mask()) {
    const int64_t n = ActionMaskSize(env_->spec());
    current_masks_ = torch::ones({num_envs_, n}, torch::kUInt8);
    next_masks_ = torch::ones({num_envs_, n}, torch::kUInt8);
  }
  if (env_->spec().agents_leave()) {
    current_alive_ = torch::ones({num_envs_}, torch::kUInt8);
    next_alive_ = torch::ones({num_envs_}, torch::kUInt8);
  }
  if (const int64_t state_size = RecurrentStateSize(spec.policy());
      state_size > 0) {
    policy_state_ = torch::zeros({num_envs_, state_size});
    step_states_ = torch::zeros({num_steps_, num_envs_, state_size});
  }
  if (spec.ppo().normalize_rewards()) {
    reward_scaler_ =
        std::make_unique<RewardScaler>(num_envs_, spec.ppo().gamma());
  }
}

Rollout RolloutCollector::AllocateRollout() const {
  const EnvSpec& env = env_->spec();
  return Rollout::Allocate(num_steps_, num_envs_, env.observation_size(),
                           env.continuous_action_size(),
                           env.action_mask() ? ActionMaskSize(env) : 0,
                           env.action_nvec_size(), ObservationDtype(),
                           policy_state_.defined() ? policy_state_.size(1) : 0,
                           current_alive_.defined());
}

torch::Dtype RolloutCollector::ObservationDtype() const {
  return ObservationsAreBytes(env_->spec()) ? torch::kUInt8 : torch::kFloat32;
}

absl::Status RolloutCollector::Collect(ActorCritic& policy, Rollout* rollout,
                                       CollectTimings* timings) {
  // LibTorch errors (a policy that does not fit the observations, say)
  // become a Status here; the step loop itself stays free of checks.
  return CatchTorchErrors("collecting a segment", [&] {
    return CollectSegment(policy, rollout, timings);
  });
}

absl::Status RolloutCollector::SetOpponents(RowOpponents* opponents) {
  if (opponents == nullptr) {
    if (opponents_ != nullptr) row_policies_.clear();
    opponents_ = nullptr;
    return absl::OkStatus();
  }
  if (opponents_ == nullptr && !row_policies_.empty()) {
    return absl::InvalidArgumentError(
        "league: opponents beside several policies (policies:)");
  }
  if (policy_state_.defined()) {
    return absl::InvalidArgumentError(
        "league: opponents play only beside a feed-forward network "
        "(policy.core none)");
  }
  const torch::Tensor& rows = opponents->policy_rows();
  if (!RowsOfBatch(rows, num_envs_) || rows.numel() == 0 ||
      std::get<0>(torch::_unique(rows)).numel() != rows.numel()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "league: the trained policy's rows must be a non-empty [K] int64 CPU "
        "tensor of distinct rows in [0, ",
        num_envs_, ")"));
  }
  row_owner_ = torch::full({num_envs_}, -1, torch::kInt64);
  row_owner_.index_fill_(0, rows, 0);
  // The trained policy's handle is Collect's own, set there.
  row_policies_ = {RowPolicy{ActorCritic(nullptr), rows}};
  row_fused_.clear();
  opponents_ = opponents;
  return absl::OkStatus();
}

absl::Status RolloutCollector::SetRowPolicies(std::vector<RowPolicy> policies) {
  if (opponents_ != nullptr) {
    return absl::InvalidArgumentError(
        "policies: several policies beside a league's opponents");
  }
  // Each carries the run's recurrent state for its rows (every policy the
  // run's policy.core, in this version).
  const int64_t state_size =
      policy_state_.defined() ? policy_state_.size(1) : 0;
  for (size_t i = 0; i < policies.size(); ++i) {
    if (policies[i].policy && policies[i].policy->state_size() != state_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("row policy ", i, ": a recurrent state of ",
                       policies[i].policy->state_size(),
                       " numbers per row, the run's policy.core carries ",
                       state_size, " (every policy carries the run's core)"));
    }
  }
  torch::Tensor owner = torch::full({num_envs_}, -1, torch::kInt64);
  for (size_t i = 0; i < policies.size(); ++i) {
    const torch::Tensor& rows = policies[i].rows;
    if (!RowsOfBatch(rows, num_envs_)) {
      return absl::InvalidArgumentError(
          absl::StrCat("row policy ", i,
                       ": rows must be a [K] int64 CPU tensor of rows "
                       "in [0, ",
                       num_envs_, ")"));
    }
    if (owner.index_select(0, rows).ne(-1).any().item<bool>()) {
      return absl::InvalidArgumentError(
          absl::StrCat("row policy ", i, ": a row has another policy"));
    }
    owner.index_fill_(0, rows, static_cast<int64_t>(i));
  }
  if (!policies.empty() && owner.eq(-1).any().item<bool>()) {
    return absl::InvalidArgumentError("row policies: every row needs a policy");
  }
  row_policies_ = std::move(policies);
  row_owner_ = owner;
  row_fused_.clear();  // sized for the old rows
  return absl::OkStatus();
}

absl::Status RolloutCollector::CollectSegment(ActorCritic& policy,
                                              Rollout* rollout,
                                              CollectTimings* timings) {
  if (rollout->num_steps() != num_steps_ || rollout->num_envs() != num_envs_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rollout has shape [", rollout->num_steps(), ", ", rollout->num_envs(),
        "], the run needs [", num_steps_, ", ", num_envs_, "]"));
  }
  c10::InferenceMode inference;
  CollectTimings local;
  const bool discrete = IsDiscrete(env_->spec());
  rollout->observations[0].copy_(current_observations_);
  const bool masked = current_masks_.defined();
  if (masked != rollout->action_masks.defined()) {
    return absl::InvalidArgumentError(
        "rollout.action_masks: allocated exactly when the env writes masks "
        "(AllocateRollout)");
  }
  uint8_t* masks = nullptr;
  int64_t mask_size = 0;
  if (masked) {
    rollout->action_masks[0].copy_(current_masks_);
    masks = rollout->action_masks.data_ptr<uint8_t>();
    mask_size = current_masks_.size(1);
  }
  const bool leave = current_alive_.defined();
  if (leave != rollout->alive.defined()) {
    return absl::InvalidArgumentError(
        "rollout.alive: allocated exactly when the env's agents may leave "
        "(AllocateRollout)");
  }
  uint8_t* alive = nullptr;
  if (leave) {
    rollout->alive[0].copy_(current_alive_);
    alive = rollout->alive.data_ptr<uint8_t>();
  }
  const bool recurrent = policy_state_.defined();
  if (policy->state_size() != (recurrent ? policy_state_.size(1) : 0) ||
      recurrent != rollout->initial_state.defined()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "policy: a recurrent state of ", policy->state_size(),
        " numbers per env, the run's policy.core carries ",
        recurrent ? policy_state_.size(1) : 0,
        " (and the rollout's initial_state must be allocated exactly then: "
        "AllocateRollout)"));
  }
  if (recurrent) rollout->initial_state.copy_(policy_state_);
  // Against opponents the trained policy acts for its rows alone.
  if (opponents_ != nullptr) row_policies_[0].policy = policy;
  // The fused path reads the weights as they are now (a publication may
  // have replaced their storage since the last segment).
  const bool rows_apart = !row_policies_.empty();
  bool use_fused = false;
  if (!rows_apart) {
    ASSIGN_OR_RETURN(use_fused,
                     UseFusedPolicy(spec_.execution().cpu_kernels(), policy));
  } else {
    // Each row policy on the fused kernels where they run it (float
    // observations, no masks: as for one policy).
    row_fused_.resize(row_policies_.size());
    for (size_t i = 0; i < row_policies_.size(); ++i) {
      ASSIGN_OR_RETURN(const bool fused,
                       UseFusedPolicy(spec_.execution().cpu_kernels(),
                                      row_policies_[i].policy));
      if (!fused || masked || ObservationDtype() != torch::kFloat32) {
        row_fused_[i].reset();
        continue;
      }
      if (row_fused_[i] == nullptr) {
        row_fused_[i] = std::make_unique<FusedRows>();
      }
      RETURN_IF_ERROR(row_fused_[i]->Bind(row_policies_[i].policy));
    }
  }
  if (use_fused) {
    if (fused_ == nullptr) fused_ = std::make_unique<FusedPolicy>();
    RETURN_IF_ERROR(fused_->Bind(policy));
  }
  at::CPUGeneratorImpl* generator = generator_.get<at::CPUGeneratorImpl>();
  // Bytes of one env's observation (float32 or uint8 elements).
  const int64_t obs_size =
      env_->spec().observation_size() * ObservationElementBytes(env_->spec());
  // Elements of one env's action: 1 (Discrete), its parts (MultiDiscrete)
  // or its floats.
  const int64_t action_size = discrete
                                  ? std::max(1, env_->spec().action_nvec_size())
                                  : env_->spec().continuous_action_size();
  for (const torch::Tensor* t :
       {&rollout->observations, &rollout->actions, &rollout->log_probs,
        &rollout->values, &rollout->rewards, &rollout->terminated,
        &rollout->truncated, &rollout->next_observations}) {
    if (!t->is_contiguous() || !t->device().is_cpu()) {
      return absl::InvalidArgumentError(
          "rollout: the collector fills contiguous CPU tensors");
    }
  }
  if (rollout->observations.scalar_type() != ObservationDtype() ||
      rollout->next_observations.scalar_type() != ObservationDtype()) {
    return absl::InvalidArgumentError(
        "rollout.observations, rollout.next_observations: not of the env's "
        "observation dtype (AllocateRollout)");
  }
  // Observation rows are addressed in bytes.
  char* observations = static_cast<char*>(rollout->observations.data_ptr());
  float* rewards = rollout->rewards.data_ptr<float>();
  uint8_t* terminated = rollout->terminated.data_ptr<uint8_t>();
  uint8_t* truncated_rows = rollout->truncated.data_ptr<uint8_t>();
  char* final_observations = static_cast<char*>(final_observations_.data_ptr());
  float* episode_returns = episode_return_rows_.data_ptr<float>();
  int32_t* episode_lengths = episode_length_rows_.data_ptr<int32_t>();
  int64_t* discrete_actions =
      discrete ? rollout->actions.data_ptr<int64_t>() : nullptr;
  float* continuous_actions =
      discrete ? nullptr : rollout->actions.data_ptr<float>();

  for (int64_t t = 0; t < num_steps_; ++t) {
    auto start = Clock::now();
    if (use_fused) {
      fused_->Act(reinterpret_cast<const float*>(observations +
                                                 t * num_envs_ * obs_size),
                  num_envs_, generator, false,
                  discrete
                      ? static_cast<void*>(discrete_actions + t * num_envs_)
                      : static_cast<void*>(continuous_actions +
                                           t * num_envs_ * action_size),
                  rollout->log_probs.data_ptr<float>() + t * num_envs_,
                  rollout->values.data_ptr<float>() + t * num_envs_);
    } else if (rows_apart) {
      // Each policy for its rows, in the order given (one random stream).
      const torch::Tensor obs_t = rollout->observations[t];
      for (size_t i = 0; i < row_policies_.size(); ++i) {
        RowPolicy& rp = row_policies_[i];
        if (row_fused_[i] != nullptr) {
          row_fused_[i]->Act(obs_t, rp.rows, generator, rollout->actions[t],
                             rollout->log_probs[t], rollout->values[t]);
          continue;
        }
        // A recurrent policy steps its rows' states.
        torch::Tensor state = recurrent ? policy_state_.index_select(0, rp.rows)
                                        : torch::Tensor();
        const PolicyStep step = rp.policy->Act(
            obs_t.index_select(0, rp.rows), generator_, false,
            masked ? rollout->action_masks[t].index_select(0, rp.rows)
                   : torch::Tensor(),
            recurrent ? &state : nullptr);
        if (recurrent) {
          policy_state_.index_copy_(0, rp.rows, state.to(torch::kCPU));
        }
        rollout->actions[t].index_copy_(0, rp.rows,
                                        step.actions.to(torch::kCPU));
        rollout->log_probs[t].index_copy_(0, rp.rows,
                                          step.log_probs.to(torch::kCPU));
        rollout->values[t].index_copy_(0, rp.rows, step.values.to(torch::kCPU));
      }
      if (recurrent) step_states_[t].copy_(policy_state_);
    } else {
      const PolicyStep step =
          policy->Act(rollout->observations[t], generator_, false,
                      masked ? rollout->action_masks[t] : torch::Tensor(),
                      recurrent ? &policy_state_ : nullptr);
      rollout->actions[t].copy_(step.actions);
      rollout->log_probs[t].copy_(step.log_probs);
      rollout->values[t].copy_(step.values);
      if (recurrent) step_states_[t].copy_(policy_state_);
    }
    if (opponents_ != nullptr) {
      RETURN_IF_ERROR(
          opponents_->Act(rollout->observations[t],
                          masked ? rollout->action_masks[t] : torch::Tensor(),
                          rollout->actions[t]));
    }
    local.inference_seconds += SecondsSince(start);

    start = Clock::now();
    // Row t of each [T, E, ...] buffer by pointer arithmetic: a LibTorch
    // select per buffer and step cost more than stepping CartPole.
    const int64_t row = t * num_envs_;
    StepOutputs out;
    out.observations = t + 1 < num_steps_
                           ? observations + (row + num_envs_) * obs_size
                           : rollout->next_observations.data_ptr();
    out.rewards = rewards + row;
    out.terminated = terminated + row;
    out.truncated = truncated_rows + row;
    out.final_observations = final_observations + row * obs_size;
    out.episode_returns = episode_returns + row;
    out.episode_lengths = episode_lengths + row;
    if (masked) {
      out.action_masks = t + 1 < num_steps_
                             ? masks + (row + num_envs_) * mask_size
                             : next_masks_.data_ptr<uint8_t>();
    }
    if (leave) {
      out.alive = t + 1 < num_steps_ ? alive + row + num_envs_
                                     : next_alive_.data_ptr<uint8_t>();
    }
    const absl::Status status =
        discrete
            ? env_->StepDiscrete(discrete_actions + row * action_size, out)
            : env_->StepContinuous(continuous_actions + row * action_size, out);
    local.env_seconds += SecondsSince(start);
    RETURN_IF_ERROR(status);
    if (opponents_ != nullptr) {
      opponents_->StepEnded(terminated + row, truncated_rows + row,
                            episode_returns + row, episode_lengths + row,
                            leave ? out.alive : nullptr);
    }
    if (recurrent) {
      // A new episode starts from a zero state. With agents that leave
      // early, so does every step after padding: the state never runs on
      // from a row's padding into its next episode (the learner resets
      // where rollout.alive is 0 too: PpoUpdater's episode ends).
      torch::Tensor carry =
          (rollout->terminated[t] | rollout->truncated[t]).eq(0);
      if (leave) carry = carry & rollout->alive[t].ne(0);
      policy_state_.mul_(carry.unsqueeze(1));
    }
  }

  auto start = Clock::now();
  current_observations_.copy_(rollout->next_observations);
  if (masked) current_masks_.copy_(next_masks_);
  if (leave) current_alive_.copy_(next_alive_);
  if (use_fused) {
    fused_->Values(rollout->next_observations.data_ptr<float>(), num_envs_,
                   rollout->next_values.data_ptr<float>());
  } else if (rows_apart) {
    for (RowPolicy& rp : row_policies_) {
      rollout->next_values.index_copy_(
          0, rp.rows,
          rp.policy
              ->Value(rollout->next_observations.index_select(0, rp.rows),
                      recurrent ? policy_state_.index_select(0, rp.rows)
                                : torch::Tensor())
              .to(torch::kCPU));
    }
  } else {
    rollout->next_values.copy_(
        policy->Value(rollout->next_observations, policy_state_));
  }
  // Bootstrap values of truncated episodes: one forward over just those rows.
  rollout->truncated_values.zero_();
  const torch::Tensor truncated = rollout->truncated.to(torch::kBool);
  const torch::Tensor rows = truncated.nonzero();
  if (rows.size(0) > 0 && rows_apart) {
    // Each policy values its own rows' final observations.
    for (size_t i = 0; i < row_policies_.size(); ++i) {
      const torch::Tensor mine =
          truncated & row_owner_.eq(static_cast<int64_t>(i)).unsqueeze(0);
      if (!mine.any().item<bool>()) continue;
      // With a core, each from the state its step left.
      rollout->truncated_values.index_put_(
          {mine},
          row_policies_[i]
              .policy
              ->Value(final_observations_.index({mine}),
                      recurrent ? step_states_.index({mine}) : torch::Tensor())
              .to(torch::kCPU));
    }
  } else if (rows.size(0) > 0 && policy->config().central_value_agents > 1) {
    // A central critic values the truncated rows with their copies (with
    // a core, each from the state its step left).
    rollout->truncated_values.copy_(
        CentralTruncatedValues(*policy, *rollout, final_observations_,
                               recurrent ? step_states_ : torch::Tensor())
            .to(torch::kCPU));
  } else if (rows.size(0) > 0) {
    const torch::Tensor final_obs =
        final_observations_.index({truncated});  // [K, obs]
    // In the state the truncated step left (before its zeroing).
    const torch::Tensor final_state =
        recurrent ? step_states_.index({truncated}) : torch::Tensor();
    rollout->truncated_values.index_put_(
        {truncated}, policy->Value(final_obs, final_state).to(torch::kCPU));
  }
  local.inference_seconds += SecondsSince(start);

  // Episode statistics (raw rewards, from the environments): one per
  // terminated or truncated step, or with env.episodic_life one per game
  // the environment reports (length > 0), each on such a step.
  episode_returns_.clear();
  episode_lengths_.clear();
  episode_rows_.clear();
  const uint8_t* term = rollout->terminated.data_ptr<uint8_t>();
  const uint8_t* trunc = rollout->truncated.data_ptr<uint8_t>();
  const float* returns = episode_return_rows_.data_ptr<float>();
  const int32_t* lengths = episode_length_rows_.data_ptr<int32_t>();
  const bool games = env_->spec().episodic_life();
  for (int64_t i = 0; i < num_steps_ * num_envs_; ++i) {
    const bool ended = term[i] | trunc[i];
    if (games && lengths[i] > 0 && !ended) {
      return absl::InvalidArgumentError(absl::StrCat(
          "env.episodic_life: the environment reported a game's end (env ",
          i % num_envs_, ", step ", i / num_envs_,
          ") on a step that was neither terminated nor truncated"));
    }
    if (games ? lengths[i] > 0 : ended) {
      episode_returns_.push_back(returns[i]);
      episode_lengths_.push_back(lengths[i]);
      episode_rows_.push_back(i % num_envs_);
    }
  }
  if (reward_scaler_ != nullptr) {
    reward_scaler_->Apply(rollout->rewards.data_ptr<float>(), term, trunc,
                          num_steps_, alive);
  }
  if (timings != nullptr) {
    timings->env_seconds += local.env_seconds;
    timings->inference_seconds += local.inference_seconds;
  }
  return absl::OkStatus();
}

}  // namespace rl
