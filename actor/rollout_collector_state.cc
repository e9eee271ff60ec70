// RolloutCollector's checkpoint state (SaveState, RestoreState): the
// environments' own bytes, the observations, masks and alive flags they
// left, the sampling stream, a recurrent policy's state and the reward
// scaler, so that a resumed run continues exactly.
#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "actor/rollout_collector.h"
#include "common/status.h"

namespace rl {

std::map<std::string, torch::Tensor> RolloutCollector::SaveState() const {
  std::map<std::string, torch::Tensor> state;
  const std::string env_bytes = env_->SaveState();
  state["collector.env"] =
      torch::from_blob(const_cast<char*>(env_bytes.data()),
                       {static_cast<int64_t>(env_bytes.size())}, torch::kUInt8)
          .clone();
  state["collector.observations"] = current_observations_.clone();
  if (current_masks_.defined()) {
    state["collector.action_masks"] = current_masks_.clone();
  }
  if (current_alive_.defined()) {
    state["collector.alive"] = current_alive_.clone();
  }
  state["collector.generator"] = generator_.get_state();
  if (policy_state_.defined()) {
    state["collector.policy_state"] = policy_state_.clone();
  }
  if (reward_scaler_ != nullptr) {
    const std::vector<double> scaler = reward_scaler_->SaveState();
    state["collector.reward_scaler"] =
        torch::tensor(at::ArrayRef<double>(scaler), torch::kFloat64);
  }
  return state;
}

absl::Status RolloutCollector::RestoreState(
    const std::map<std::string, torch::Tensor>& state) {
  auto get = [&](const std::string& key) -> absl::StatusOr<torch::Tensor> {
    auto it = state.find(key);
    if (it == state.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint state has no ", key));
    }
    return it->second.contiguous();
  };
  if (state.count("collector.env") == 0 &&
      state.count("collector.device_env.state") > 0) {
    return absl::FailedPreconditionError(
        "the checkpoint's envs stepped on a GPU (resources.actor_device: "
        "cuda with a built-in env), this collector's step on the host: "
        "resume it where they can step on the GPU, or start the run afresh");
  }
  ASSIGN_OR_RETURN(const torch::Tensor env_bytes, get("collector.env"));
  if (env_bytes.scalar_type() != torch::kUInt8 || env_bytes.dim() != 1) {
    return absl::InvalidArgumentError(
        "checkpoint collector.env is not the environments' state bytes");
  }
  ASSIGN_OR_RETURN(const torch::Tensor obs, get("collector.observations"));
  if (!obs.sizes().equals(current_observations_.sizes()) ||
      obs.scalar_type() != current_observations_.scalar_type()) {
    return absl::InvalidArgumentError(
        "checkpoint observations do not fit this run's environments (shape "
        "or dtype)");
  }
  // Whether the saved episodes go on (the env saved its state), or new
  // ones began (a plugin without save_state, or one whose save failed):
  // then nothing kept per episode comes back (the policy's state, the
  // reward scaler's running returns).
  const bool episodes_go_on = env_bytes.numel() > 0;
  if (episodes_go_on) {
    RETURN_IF_ERROR(env_->RestoreState(std::string(
        static_cast<const char*>(env_bytes.data_ptr()), env_bytes.numel())));
    current_observations_.copy_(obs);
    if (current_masks_.defined()) {
      ASSIGN_OR_RETURN(const torch::Tensor masks,
                       get("collector.action_masks"));
      if (!masks.sizes().equals(current_masks_.sizes())) {
        return absl::InvalidArgumentError(
            "checkpoint action masks do not fit this run's environments");
      }
      current_masks_.copy_(masks);
    }
    if (current_alive_.defined()) {
      ASSIGN_OR_RETURN(const torch::Tensor alive, get("collector.alive"));
      if (!alive.sizes().equals(current_alive_.sizes()) ||
          alive.scalar_type() != torch::kUInt8) {
        return absl::InvalidArgumentError(
            "checkpoint alive flags do not fit this run's environments");
      }
      current_alive_.copy_(alive);
      env_->RestoreAlive(current_alive_.data_ptr<uint8_t>());
    }
  }
  // Else the environment keeps no state (a plugin without save_state): it
  // began new episodes when it was created, and their observations stay.
  if (policy_state_.defined()) {
    ASSIGN_OR_RETURN(const torch::Tensor policy_state,
                     get("collector.policy_state"));
    if (!policy_state.sizes().equals(policy_state_.sizes()) ||
        policy_state.scalar_type() != torch::kFloat32) {
      return absl::InvalidArgumentError(
          "checkpoint policy state does not fit this run's policy.core");
    }
    // A copy of its own (the state a segment left may be an inference
    // tensor, which takes no in-place write out of InferenceMode).
    policy_state_ =
        episodes_go_on ? policy_state.clone() : torch::zeros_like(policy_state);
  }
  ASSIGN_OR_RETURN(const torch::Tensor generator, get("collector.generator"));
  try {  // a damaged checkpoint's bytes: an error, not an abort
    if (generator.scalar_type() != torch::kUInt8) throw std::runtime_error("");
    generator_.set_state(generator);
  } catch (const std::exception&) {
    return absl::InvalidArgumentError(
        "checkpoint collector.generator is not a random generator's state");
  }
  if (reward_scaler_ != nullptr) {
    ASSIGN_OR_RETURN(const torch::Tensor scaler,
                     get("collector.reward_scaler"));
    if (scaler.scalar_type() != torch::kFloat64 || scaler.dim() != 1) {
      return absl::InvalidArgumentError(
          "checkpoint reward-scaler state does not fit this run (float64 "
          "[envs + 3] expected)");
    }
    const torch::Tensor contiguous = scaler.contiguous();
    const double* p = contiguous.data_ptr<double>();
    std::vector<double> state(p, p + scaler.numel());
    if (!episodes_go_on) {  // returns[E], then the statistics, which stay
      const size_t returns =
          std::min(state.size(), static_cast<size_t>(num_envs_));
      std::fill(state.begin(), state.begin() + returns, 0.0);
    }
    if (!reward_scaler_->RestoreState(state)) {
      return absl::InvalidArgumentError(
          "checkpoint reward-scaler state does not fit this run");
    }
  }
  return absl::OkStatus();
}

}  // namespace rl
