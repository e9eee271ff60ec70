// The checked ways into an ActorCritic: its input checks (shapes, dtypes,
// masks), creating one (seeded), acting with every input checked, and the
// weight utilities (the first non-finite weight, copying weights).
// Part of the actor_critic library.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status.h"
#include "policy/actor_critic.h"
#include "policy/torch_status.h"

namespace rl {

absl::Status ActorCriticImpl::CheckObservations(
    const torch::Tensor& observations, absl::string_view name) const {
  return CheckTensor(
      observations, name,
      config_.byte_observations ? torch::kUInt8 : torch::kFloat32,
      {-1, config_.observation_size});
}

absl::Status ActorCriticImpl::CheckActionMasks(
    const torch::Tensor& action_masks, absl::string_view name,
    int64_t batch) const {
  if (!config_.action_masks) {
    if (!action_masks.defined()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": this policy takes no action masks (env.action_mask)"));
  }
  return CheckTensor(action_masks, name, torch::kUInt8,
                     {batch, ActionMaskWidth(config_)});
}

absl::Status ActorCriticImpl::CheckActions(const torch::Tensor& actions,
                                           absl::string_view name,
                                           int64_t batch) const {
  if (discrete()) return CheckTensor(actions, name, torch::kInt64, {batch});
  if (multi_discrete()) {
    return CheckTensor(
        actions, name, torch::kInt64,
        {batch, static_cast<int64_t>(config_.action_nvec.size())});
  }
  return CheckTensor(actions, name, torch::kFloat32,
                     {batch, config_.action_size});
}

absl::StatusOr<ActorCritic> CreateActorCritic(const ActorCriticConfig& config) {
  RETURN_IF_ERROR(CheckActorCriticConfig(config));
  return CatchTorchErrors("creating the policy network",
                          [&] { return ActorCritic(config); });
}

absl::StatusOr<ActorCritic> CreateSeededActorCritic(
    const ActorCriticConfig& config, uint64_t seed) {
  static absl::Mutex mu(absl::kConstInit);
  absl::MutexLock lock(&mu);
  torch::manual_seed(seed);
  return CreateActorCritic(config);
}

absl::StatusOr<PolicyStep> ActChecked(ActorCritic& policy,
                                      const torch::Tensor& observations,
                                      c10::optional<at::Generator> generator,
                                      bool deterministic,
                                      const torch::Tensor& action_masks,
                                      torch::Tensor* state) {
  RETURN_IF_ERROR(policy->CheckObservations(observations, "observations"));
  RETURN_IF_ERROR(policy->CheckActionMasks(action_masks, "action_masks",
                                           observations.size(0)));
  if (const int64_t agents = policy->config().central_value_agents;
      agents > 1 && observations.size(0) % agents != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "observations: a central critic (policy.central_value) acts on whole "
        "copies of ",
        agents, " agents; a batch of ", observations.size(0), " rows is not"));
  }
  if (policy->recurrent()) {
    if (state == nullptr) {
      return absl::InvalidArgumentError(
          "state: a recurrent policy (policy.core) acts from a state");
    }
    RETURN_IF_ERROR(CheckTensor(*state, "state", torch::kFloat32,
                                {observations.size(0), policy->state_size()}));
  }
  return CatchTorchErrors("acting", [&] {
    return policy->Act(observations, generator, deterministic, action_masks,
                       state);
  });
}

absl::StatusOr<std::string> FirstNonFiniteWeight(ActorCritic& policy) {
  return CatchTorchErrors("checking the weights", [&]() -> std::string {
    std::vector<torch::Tensor> checks;
    for (const auto& t : policy->parameters()) {
      checks.push_back(torch::isfinite(t).all());
    }
    for (const auto& t : policy->buffers()) {
      checks.push_back(torch::isfinite(t).all());
    }
    if (checks.empty() || torch::stack(checks).all().item<bool>()) return "";
    for (const auto& item : policy->named_parameters()) {
      if (!torch::isfinite(item.value()).all().item<bool>()) return item.key();
    }
    return "the observation statistics";
  });
}

absl::Status CopyPolicyWeights(ActorCritic& from, ActorCritic& to) {
  return CatchTorchErrors("copying the policy's weights", [&] {
    torch::NoGradGuard no_grad;
    const auto from_parameters = from->parameters();
    const auto to_parameters = to->parameters();
    const auto from_buffers = from->buffers();
    const auto to_buffers = to->buffers();
    TORCH_CHECK(from_parameters.size() == to_parameters.size() &&
                    from_buffers.size() == to_buffers.size(),
                "the two policies are different networks");
    for (size_t i = 0; i < to_parameters.size(); ++i) {
      to_parameters[i].copy_(from_parameters[i]);
    }
    for (size_t i = 0; i < to_buffers.size(); ++i) {
      to_buffers[i].copy_(from_buffers[i]);
    }
  });
}

}  // namespace rl
