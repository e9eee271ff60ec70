#include "learner/rollout_check.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "policy/torch_status.h"

namespace rl {

absl::Status CheckRolloutForUpdate(const Rollout& r,
                                   const ActorCriticImpl& policy,
                                   const PPOConfig& config) {
  if (config.num_epochs() < 1 || config.num_minibatches() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ppo.num_epochs (", config.num_epochs(), ") and ppo.num_minibatches (",
        config.num_minibatches(), ") must be >= 1"));
  }
  RETURN_IF_ERROR(
      CheckTensor(r.rewards, "rollout.rewards", torch::kFloat32, {-1, -1}));
  const int64_t T = r.num_steps(), E = r.num_envs();
  if (T * E < config.num_minibatches()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rollout: ", T, " x ", E, " steps cannot make ppo.num_minibatches (",
        config.num_minibatches(), ") minibatches"));
  }
  const ActorCriticConfig& c = policy.config();
  RETURN_IF_ERROR(
      CheckTensor(r.observations, "rollout.observations",
                  c.byte_observations ? torch::kUInt8 : torch::kFloat32,
                  {T, E, c.observation_size}));
  if (policy.discrete()) {
    RETURN_IF_ERROR(
        CheckTensor(r.actions, "rollout.actions", torch::kInt64, {T, E}));
  } else if (policy.multi_discrete()) {
    RETURN_IF_ERROR(
        CheckTensor(r.actions, "rollout.actions", torch::kInt64,
                    {T, E, static_cast<int64_t>(c.action_nvec.size())}));
  } else {
    RETURN_IF_ERROR(CheckTensor(r.actions, "rollout.actions", torch::kFloat32,
                                {T, E, c.action_size}));
  }
  for (const auto& [name, tensor] :
       {std::pair<const char*, const torch::Tensor*>{"rollout.log_probs",
                                                     &r.log_probs},
        {"rollout.values", &r.values},
        {"rollout.truncated_values", &r.truncated_values}}) {
    RETURN_IF_ERROR(CheckTensor(*tensor, name, torch::kFloat32, {T, E}));
  }
  RETURN_IF_ERROR(
      CheckTensor(r.next_values, "rollout.next_values", torch::kFloat32, {E}));
  RETURN_IF_ERROR(
      CheckTensor(r.terminated, "rollout.terminated", torch::kUInt8, {T, E}));
  RETURN_IF_ERROR(
      CheckTensor(r.truncated, "rollout.truncated", torch::kUInt8, {T, E}));
  if (r.alive.defined()) {
    RETURN_IF_ERROR(
        CheckTensor(r.alive, "rollout.alive", torch::kUInt8, {T, E}));
  }
  RETURN_IF_ERROR(policy.CheckActionMasks(
      r.action_masks.defined() ? r.action_masks.reshape({T * E, -1})
                               : r.action_masks,
      "rollout.action_masks", T * E));
  if (policy.recurrent()) {
    RETURN_IF_ERROR(CheckTensor(r.initial_state, "rollout.initial_state",
                                torch::kFloat32, {E, policy.state_size()}));
    RETURN_IF_ERROR(CheckFinite(r.initial_state, "rollout.initial_state"));
    // Minibatches of whole env sequences.
    if (E % config.num_minibatches() != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rollout: ", E, " envs do not split into ppo.num_minibatches ",
          config.num_minibatches(),
          " minibatches of whole env sequences (a recurrent policy)"));
    }
  } else if (r.initial_state.defined()) {
    return absl::InvalidArgumentError(
        "rollout.initial_state: this policy has no recurrent core");
  }
  // A central critic: minibatches of whole environment copies.
  // With a core, of whole copies' sequences.
  if (const int64_t agents = c.central_value_agents;
      agents > 1 &&
      (E % agents != 0 ||
       ((policy.recurrent() ? 1 : T) * E / agents) % config.num_minibatches() !=
           0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rollout: ", T, " x ", E,
        " steps do not split into ppo.num_minibatches ",
        config.num_minibatches(), " minibatches of whole copies of ", agents,
        " agents (a central critic, policy.central_value",
        policy.recurrent() ? ", beside a recurrent core: whole sequences" : "",
        ")"));
  }
  // GAE reads these through raw pointers on the host, or as tensors on
  // the policy's device (a rollout collected there).
  const torch::Device where = r.rewards.device();
  if (!where.is_cpu() && where != policy.device()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rollout: on ", where.str(), ", the policy on ", policy.device().str(),
        " (a rollout lies on the host or on the policy's device)"));
  }
  for (const auto& [name, tensor] :
       {std::pair<const char*, const torch::Tensor*>{"rollout.observations",
                                                     &r.observations},
        {"rollout.actions", &r.actions},
        {"rollout.log_probs", &r.log_probs},
        {"rollout.next_observations", &r.next_observations},
        {"rollout.action_masks", &r.action_masks},
        {"rollout.alive", &r.alive}}) {
    if (tensor->defined() && tensor->device() != where) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": on ", tensor->device().str(), ", the rollout on ",
          where.str(), " (as rollout.rewards)"));
    }
  }
  for (const auto& [name, tensor] :
       {std::pair<const char*, const torch::Tensor*>{"rollout.rewards",
                                                     &r.rewards},
        {"rollout.values", &r.values},
        {"rollout.next_values", &r.next_values},
        {"rollout.terminated", &r.terminated},
        {"rollout.truncated", &r.truncated},
        {"rollout.truncated_values", &r.truncated_values}}) {
    if (tensor->device() != where || !tensor->is_contiguous()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": must be a contiguous tensor on ", where.str(),
                       " (as rollout.rewards)"));
    }
  }
  const std::pair<const char*, const torch::Tensor*> floats[] = {
      {"rollout.observations", &r.observations},
      {"rollout.log_probs", &r.log_probs},
      {"rollout.values", &r.values},
      {"rollout.rewards", &r.rewards},
      {"rollout.truncated_values", &r.truncated_values},
      {"rollout.next_values", &r.next_values}};
  // One read-back for all the value checks; the tensor at fault is looked
  // for only when one failed.
  ASSIGN_OR_RETURN(
      const bool valid, CatchTorchErrors("checking the rollout", [&] {
        std::vector<torch::Tensor> checks;
        for (const auto& [name, tensor] : floats) {
          checks.push_back(torch::isfinite(*tensor).all());
        }
        if (policy.discrete()) {
          checks.push_back(
              ((r.actions >= 0) & (r.actions < c.num_actions)).all());
        } else if (policy.multi_discrete()) {
          const torch::Tensor nvec =
              torch::tensor(c.action_nvec).to(r.actions.device());
          checks.push_back(((r.actions >= 0) & (r.actions < nvec)).all());
        } else {
          checks.push_back(torch::isfinite(r.actions).all());
        }
        return torch::stack(checks).all().item<bool>();
      }));
  if (valid) return absl::OkStatus();
  for (const auto& [name, tensor] : floats) {
    RETURN_IF_ERROR(CheckFinite(*tensor, name));
  }
  if (policy.multi_discrete()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rollout.actions: part j must be in [0, action_nvec[j]) (action_nvec ",
        absl::StrJoin(c.action_nvec, ", "), ")"));
  }
  if (!policy.discrete()) return CheckFinite(r.actions, "rollout.actions");
  return absl::InvalidArgumentError(
      absl::StrCat("rollout.actions: must be in [0, ", c.num_actions, ")"));
}

}  // namespace rl
