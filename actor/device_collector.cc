#include "actor/device_collector.h"

#include <ATen/detail/CUDAHooksInterface.h>

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "actor/device_plugin_envs.h"
#include "common/logging.h"
#include "common/status.h"
#include "envs/device_env_plugin.h"
#include "envs/env_plugin.h"
#include "envs/env_registry.h"
#include "policy/torch_status.h"
#include "runspec/policy_rules.h"

namespace rl {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

at::Generator SamplingGenerator(uint64_t seed, const torch::Device& device) {
  if (device.is_cuda()) {
    at::Generator generator =
        at::detail::getCUDAHooks().getNewGenerator(device.index());
    generator.set_current_seed(SamplingSeed(seed));
    return generator;
  }
  return at::make_generator<at::CPUGeneratorImpl>(SamplingSeed(seed));
}

}  // namespace

absl::Status DeviceCollector::Supports(const RunSpec& spec) {
  if (RecurrentStateSize(spec.policy()) > 0) {
    return absl::InvalidArgumentError(
        "policy.core: a recurrent policy collects with its envs on the host "
        "for now");
  }
  if (spec.ppo().normalize_rewards()) {
    return absl::InvalidArgumentError(
        "ppo.normalize_rewards: the reward scaler runs on the host; it "
        "collects with its envs there for now");
  }
  if (spec.env().agents_leave()) {
    return absl::InvalidArgumentError(
        "env.agents_leave: agents that leave early step on the host");
  }
  return absl::OkStatus();
}

namespace {

// The run's envs on `device`, after their first-use self-check there.
absl::StatusOr<std::unique_ptr<DeviceEnvBatch>> OpenDeviceEnvs(
    const RunSpec& spec, uint64_t seed, torch::Device device,
    const std::vector<std::string>& plugin_dirs) {
  const EnvSpec& env = spec.env();
  if (env.plugin().empty()) {
    RETURN_IF_ERROR(CheckDeviceEnvsOnFirstUse(env.id(), device));
    return DeviceEnvs::Create(env.id(), spec.envs_per_actor(), seed, device,
                              env.max_episode_steps());
  }
  ASSIGN_OR_RETURN(const EnvPluginRef plugin,
                   FindEnvPlugin(env, std::nullopt, plugin_dirs));
  const rl_device_env_plugin* table = DeviceEnvTableOf(plugin.table);
  if (table == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "env.plugin: ", env.plugin(),
        " is not a device env (envs/plugin_api/rl_device_env.h): its envs "
        "step on the host, with the policy on the device"));
  }
  RETURN_IF_ERROR(
      CheckDevicePluginEnvsOnFirstUse(table, plugin.origin, env, device));
  return DevicePluginEnvs::Create(table, plugin.origin, env,
                                  spec.envs_per_actor(), seed, device);
}

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceCollector>> DeviceCollector::Create(
    const RunSpec& spec, uint64_t seed, torch::Device device,
    const std::vector<std::string>& plugin_dirs) {
  RETURN_IF_ERROR(Supports(spec));
  ASSIGN_OR_RETURN(std::unique_ptr<DeviceEnvBatch> envs,
                   OpenDeviceEnvs(spec, seed, device, plugin_dirs));
  std::unique_ptr<DeviceCollector> collector(new DeviceCollector(
      spec, std::move(envs), SamplingGenerator(seed, device)));
  RETURN_IF_ERROR(
      collector->envs_->Reset(collector->current_observations_.data_ptr()));
  return collector;
}

DeviceCollector::DeviceCollector(const RunSpec& spec,
                                 std::unique_ptr<DeviceEnvBatch> envs,
                                 at::Generator generator)
    : envs_(std::move(envs)),
      num_steps_(spec.segment_length()),
      num_envs_(spec.envs_per_actor()),
      generator_(std::move(generator)) {
  const bool bytes = ObservationsAreBytes(envs_->spec());
  const auto on = torch::TensorOptions().device(envs_->device());
  const auto obs_on = on.dtype(bytes ? torch::kUInt8 : torch::kFloat32);
  const int64_t obs = envs_->spec().observation_size();
  observation_bytes_ = obs * (bytes ? 1 : 4);
  current_observations_ = torch::zeros({num_envs_, obs}, obs_on);
  final_observations_ = torch::zeros({num_steps_, num_envs_, obs}, obs_on);
  episode_return_rows_ = torch::zeros({num_steps_, num_envs_}, on);
  episode_length_rows_ =
      torch::zeros({num_steps_, num_envs_}, on.dtype(torch::kInt32));
}

Rollout DeviceCollector::AllocateRollout() const {
  const EnvSpec& env = envs_->spec();
  return Rollout::Allocate(num_steps_, num_envs_, env.observation_size(),
                           env.continuous_action_size(), 0,
                           env.action_nvec_size(),
                           current_observations_.scalar_type(), 0)
      .To(envs_->device());
}

absl::Status DeviceCollector::Collect(ActorCritic& policy, Rollout* rollout,
                                      CollectTimings* timings) {
  return CatchTorchErrors("collecting a segment on the device", [&] {
    return CollectSegment(policy, rollout, timings);
  });
}

absl::Status DeviceCollector::CollectSegment(ActorCritic& policy,
                                             Rollout* rollout,
                                             CollectTimings* timings) {
  const torch::Device& device = envs_->device();
  if (rollout->num_steps() != num_steps_ || rollout->num_envs() != num_envs_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rollout has shape [", rollout->num_steps(), ", ", rollout->num_envs(),
        "], the run needs [", num_steps_, ", ", num_envs_, "]"));
  }
  for (const torch::Tensor* t : rollout->Tensors()) {
    if (t->defined() && (!t->is_contiguous() || t->device() != device)) {
      return absl::InvalidArgumentError(
          absl::StrCat("rollout: the collector fills contiguous tensors on ",
                       device.str(), " (AllocateRollout)"));
    }
  }
  if (policy->device() != device) {
    return absl::InvalidArgumentError(
        absl::StrCat("the policy is on ", policy->device().str(),
                     ", the envs on ", device.str()));
  }
  c10::InferenceMode inference;
  CollectTimings local;
  rollout->observations[0].copy_(current_observations_);
  const int64_t obs_bytes = observation_bytes_;
  char* observations = static_cast<char*>(rollout->observations.data_ptr());
  float* rewards = rollout->rewards.data_ptr<float>();
  uint8_t* terminated = rollout->terminated.data_ptr<uint8_t>();
  uint8_t* truncated_rows = rollout->truncated.data_ptr<uint8_t>();
  char* final_observations = static_cast<char*>(final_observations_.data_ptr());
  float* episode_returns = episode_return_rows_.data_ptr<float>();
  int32_t* episode_lengths = episode_length_rows_.data_ptr<int32_t>();
  char* actions = static_cast<char*>(rollout->actions.data_ptr());
  // One env's actions: [E] for Discrete, [E, parts] for MultiDiscrete
  // (int64), [E, A] float32 for Box: the rollout's own layout.
  const int64_t action_bytes = rollout->actions.numel() /
                               (num_steps_ * num_envs_) *
                               rollout->actions.element_size();

  if (step_loop_observer_) step_loop_observer_(true);
  for (int64_t t = 0; t < num_steps_; ++t) {
    auto start = Clock::now();
    const PolicyStep step =
        policy->Act(rollout->observations[t], generator_, false);
    rollout->actions[t].copy_(step.actions);
    rollout->log_probs[t].copy_(step.log_probs);
    rollout->values[t].copy_(step.values);
    local.inference_seconds += SecondsSince(start);

    start = Clock::now();
    const int64_t row = t * num_envs_;
    rl_env_buffers out{};
    out.observations = t + 1 < num_steps_
                           ? observations + (row + num_envs_) * obs_bytes
                           : rollout->next_observations.data_ptr();
    out.rewards = rewards + row;
    out.terminated = terminated + row;
    out.truncated = truncated_rows + row;
    out.final_observations = final_observations + row * obs_bytes;
    out.episode_returns = episode_returns + row;
    out.episode_lengths = episode_lengths + row;
    const absl::Status stepped = envs_->Step(actions + row * action_bytes, out);
    local.env_seconds += SecondsSince(start);
    RETURN_IF_ERROR(stepped);
  }
  if (step_loop_observer_) step_loop_observer_(false);

  auto start = Clock::now();
  current_observations_.copy_(rollout->next_observations);
  rollout->next_values.copy_(
      policy->Value(rollout->next_observations, torch::Tensor()));
  // Bootstrap values of truncated episodes: one forward over those rows, or
  // a central critic's over the segment (finding whether there are any is
  // the segment's one synchronisation).
  rollout->truncated_values.zero_();
  const torch::Tensor truncated = rollout->truncated.to(torch::kBool);
  if (policy->config().central_value_agents > 1) {
    // A central critic values the truncated rows with their copies.
    if (truncated.any().item<bool>()) {
      rollout->truncated_values.copy_(CentralTruncatedValues(
          *policy, *rollout, final_observations_,
          /*step_states=*/torch::Tensor()));  // no core here (Supports)
    }
  } else if (const torch::Tensor final_obs =
                 final_observations_.index({truncated});
             final_obs.size(0) > 0) {
    rollout->truncated_values.index_put_(
        {truncated}, policy->Value(final_obs, torch::Tensor()));
  }
  // The episodes that ended (a built-in env reports a length exactly
  // there), in the host collector's order.
  const torch::Tensor ended = episode_length_rows_ > 0;
  const torch::Tensor returns = episode_return_rows_.masked_select(ended).cpu();
  const torch::Tensor lengths = episode_length_rows_.masked_select(ended).cpu();
  local.inference_seconds += SecondsSince(start);
  episode_returns_.assign(returns.data_ptr<float>(),
                          returns.data_ptr<float>() + returns.numel());
  episode_lengths_.assign(lengths.data_ptr<int32_t>(),
                          lengths.data_ptr<int32_t>() + lengths.numel());
  if (timings != nullptr) {
    timings->env_seconds += local.env_seconds;
    timings->inference_seconds += local.inference_seconds;
  }
  return absl::OkStatus();
}

std::map<std::string, torch::Tensor> DeviceCollector::SaveState() const {
  std::map<std::string, torch::Tensor> state =
      envs_->SaveState("collector.device_env.");
  state["collector.observations"] =
      current_observations_.to(torch::TensorOptions().device(torch::kCPU),
                               /*non_blocking=*/false, /*copy=*/true);
  state["collector.generator"] = generator_.get_state();
  return state;
}

absl::Status DeviceCollector::RestoreState(
    const std::map<std::string, torch::Tensor>& state) {
  if (state.count("collector.env") > 0) {
    return absl::FailedPreconditionError(
        "the checkpoint's envs stepped on the host (written with "
        "resources.actor_device: cpu, or where the envs could not step on the "
        "GPU), this collector's step on the GPU: resume it with "
        "resources.actor_device: cpu, or start the run afresh");
  }
  auto obs = state.find("collector.observations");
  auto generator = state.find("collector.generator");
  if (obs == state.end() || generator == state.end()) {
    return absl::InvalidArgumentError(
        "checkpoint state has no collector.observations or "
        "collector.generator");
  }
  if (!obs->second.sizes().equals(current_observations_.sizes()) ||
      obs->second.scalar_type() != current_observations_.scalar_type()) {
    return absl::InvalidArgumentError(
        "checkpoint observations do not fit this run's environments (shape "
        "or dtype)");
  }
  // The generator first (a state of another kind of generator throws):
  // nothing is changed unless everything fits.
  const torch::Tensor saved_generator = generator_.get_state();
  RETURN_IF_ERROR(CatchTorchErrors(
      "checkpoint state collector.generator",
      [&] { generator_.set_state(generator->second); },
      absl::StatusCode::kInvalidArgument));
  if (absl::Status envs = envs_->RestoreState(state, "collector.device_env.");
      !envs.ok()) {
    generator_.set_state(saved_generator);
    return envs;
  }
  torch::NoGradGuard no_grad;
  current_observations_.copy_(obs->second);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<SegmentCollector>> CreateSegmentCollector(
    const RunSpec& spec, uint64_t seed, int env_threads,
    torch::Device acting_device, const std::vector<std::string>& plugin_dirs) {
  if (acting_device.is_cuda()) {
    absl::Status supported = DeviceCollector::Supports(spec);
    if (supported.ok()) {
      // Envs on the GPU are a speed-up, not the run's request: where their
      // kernels cannot load or fail their self-check (recorded, shown by
      // `rlctl workers`), or a plugin is no device env, the envs step on
      // the host as before.
      absl::StatusOr<std::unique_ptr<DeviceCollector>> collector =
          DeviceCollector::Create(spec, seed, acting_device, plugin_dirs);
      if (collector.ok()) {
        RL_LOG_INFO("{} x {} envs step on {} with the policy", spec.env().id(),
                    spec.envs_per_actor(), acting_device.str());
        return std::move(*collector);
      }
      supported = collector.status();
      // What stays on the host by design (a plugin that is no device env)
      // is said plainly; a device env that failed to load or check out is
      // a warning.
      if (absl::IsInvalidArgument(supported)) {
        RL_LOG_INFO("the envs step on the host, the policy acts on {}: {}",
                    acting_device.str(), std::string(supported.message()));
      } else {
        RL_LOG_WARNING("the envs step on the host, the policy acts on {}: {}",
                       acting_device.str(), supported.ToString());
      }
    } else {
      RL_LOG_INFO("the envs step on the host, the policy acts on {}: {}",
                  acting_device.str(), std::string(supported.message()));
    }
  }
  ASSIGN_OR_RETURN(
      std::unique_ptr<RolloutCollector> collector,
      RolloutCollector::Create(spec, seed, env_threads, plugin_dirs));
  return collector;
}

}  // namespace rl
