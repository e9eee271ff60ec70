#include "actor/device_plugin_envs.h"

#include <c10/core/DeviceGuard.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "envs/device_env_plugin.h"
#include "envs/env_agents.h"
#include "envs/env_plugin.h"
#include "envs/env_registry.h"
#include "policy/device_act_check.h"

namespace rl {
namespace {

constexpr size_t kErrorBytes = 1024;

torch::Dtype FieldDtype(rl_field_dtype dtype) {
  switch (dtype) {
    case RL_FIELD_FLOAT32:
      return torch::kFloat32;
    case RL_FIELD_FLOAT64:
      return torch::kFloat64;
    case RL_FIELD_INT32:
      return torch::kInt32;
    case RL_FIELD_INT64:
      return torch::kInt64;
    case RL_FIELD_UINT8:
      return torch::kUInt8;
  }
  return torch::kUInt8;  // CheckDeviceStateLayout refused others
}

}  // namespace

DevicePluginEnvs::DevicePluginEnvs(const rl_device_env_plugin* table,
                                   std::string origin, EnvSpec spec,
                                   int64_t num_envs, torch::Device device)
    : table_(table),
      origin_(std::move(origin)),
      spec_(std::move(spec)),
      num_envs_(num_envs),
      device_(device),
      timeout_(EnvCallTimeout(spec_)),
      watch_(CallWatch::Process().Register(WatchedOrigin(origin_, spec_))) {}

DevicePluginEnvs::~DevicePluginEnvs() {
  if (env_ != nullptr) {
    CallWatch::Scope call(watch_, "destroy", timeout_);
    table_->destroy(env_);
  }
  CallWatch::Process().Unregister(watch_);
}

absl::StatusOr<std::unique_ptr<DevicePluginEnvs>> DevicePluginEnvs::Create(
    const rl_device_env_plugin* table, const std::string& origin,
    const EnvSpec& spec, int64_t num_envs, uint64_t seed,
    torch::Device device) {
  if (num_envs < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_envs must be >= 1 (got ", num_envs, ")"));
  }
  if (AgentsPerEnv(spec) > 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("device environment ", origin,
                     ": device environments hold one agent per environment; "
                     "env.agents_per_env is ",
                     AgentsPerEnv(spec)));
  }
  if (!device.is_cpu() && !device.is_cuda()) {
    return absl::InvalidArgumentError(
        absl::StrCat("envs on ", device.str(), ": only cpu and cuda"));
  }
  if (device.is_cuda() && (table->devices & RL_DEVICE_CUDA) == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "device environment ", origin,
        " was built without CUDA kernels (g++ alone): its envs step on the "
        "host; build it with nvcc to step them on ",
        device.str()));
  }
  ASSIGN_OR_RETURN(const std::string kwargs, KwargsJson(spec));
  rl_env_options o{};
  o.env_id = spec.id().c_str();
  o.kwargs_json = kwargs.c_str();
  o.num_envs = static_cast<int32_t>(num_envs);
  o.seed = seed;
  o.max_episode_steps = spec.max_episode_steps();
  o.num_threads = 1;
  rl_env_info info{};
  rl_device_state_layout layout{};
  char error[kErrorBytes] = "";
  std::unique_ptr<DevicePluginEnvs> envs(
      new DevicePluginEnvs(table, origin, spec, num_envs, device));
  {
    CallWatch::Scope call(envs->watch_, "create", envs->timeout_);
    envs->env_ = table->create(&o, &info, &layout, error, sizeof(error));
  }
  if (envs->env_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "device environment ", origin,
        ": create failed: ", error[0] != '\0' ? error : "(no message)"));
  }
  RETURN_IF_ERROR(CheckPluginInfo(info, spec, origin));
  // The host's path widens uint8 observations to a float32 run; on the
  // device the env writes the run's buffers itself.
  if ((info.observation.dtype == RL_DTYPE_UINT8) !=
      ObservationsAreBytes(spec)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "device environment ", origin, " writes ",
        info.observation.dtype == RL_DTYPE_UINT8 ? "uint8" : "float32",
        " observations; the run takes ",
        ObservationsAreBytes(spec) ? "uint8" : "float32",
        ": on the device they must be the run's (env.observation_dtype)"));
  }
  if (info.has_action_mask != 0 || spec.action_mask()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "device environment ", origin,
        ": action masks are not part of the device env ABI (version ",
        RL_DEVICE_ENV_ABI_VERSION, ")"));
  }
  RETURN_IF_ERROR(CheckDeviceStateLayout(layout, origin));
  const auto on = torch::TensorOptions().device(device);
  for (int f = 0; f < layout.num_fields; ++f) {
    const rl_device_field& field = layout.fields[f];
    envs->names_.emplace_back(field.name);
    envs->fields_.push_back(torch::zeros({num_envs, field.count},
                                         on.dtype(FieldDtype(field.dtype))));
    envs->pointers_.push_back(envs->fields_.back().data_ptr());
  }
  // Every env starts in a valid state, so a Step before Reset is defined.
  RETURN_IF_ERROR(envs->Reset(nullptr));
  return envs;
}

absl::Status DevicePluginEnvs::Called(int failed, const char* error,
                                      const char* what) const {
  if (failed == 0) return absl::OkStatus();
  return MarkRunFatal(absl::FailedPreconditionError(absl::StrCat(
      "device environment ", origin_, ": ", what, " ", spec_.id(), " on ",
      device_.str(), " failed: ", error[0] != '\0' ? error : "(no message)")));
}

absl::Status DevicePluginEnvs::Reset(void* observations) {
  // A null observations buffer still resets: the env writes into scratch.
  torch::Tensor scratch;
  if (observations == nullptr) {
    const int64_t bytes = ObservationsAreBytes(spec_) ? 1 : 4;
    scratch = torch::empty(
        {num_envs_ * spec_.observation_size() * bytes},
        torch::TensorOptions().device(device_).dtype(torch::kUInt8));
    observations = scratch.data_ptr();
  }
  rl_device_rows rows{pointers_.data(), num_envs_, 0, nullptr};
  rl_env_buffers out{};
  out.observations = observations;
  char error[kErrorBytes] = "";
  const c10::DeviceGuard guard(device_);
  int failed;
  {
    CallWatch::Scope call(watch_, "reset", timeout_);
    failed =
        table_->reset(env_, device_.is_cuda() ? RL_DEVICE_CUDA : RL_DEVICE_HOST,
                      &rows, &out, error, sizeof(error));
  }
  return Called(failed, error, "resetting");
}

absl::Status DevicePluginEnvs::Step(const void* actions,
                                    const rl_env_buffers& out) {
  rl_device_rows rows{pointers_.data(), num_envs_, 0, nullptr};
  char error[kErrorBytes] = "";
  const c10::DeviceGuard guard(device_);
  int failed;
  {
    // On a GPU the call launches work and returns; this watches the host's
    // part (a kernel that never ends is the stream's, seen at the next
    // synchronisation).
    CallWatch::Scope call(watch_, "step", timeout_);
    failed =
        table_->step(env_, device_.is_cuda() ? RL_DEVICE_CUDA : RL_DEVICE_HOST,
                     &rows, actions, &out, error, sizeof(error));
  }
  return Called(failed, error, "stepping");
}

std::map<std::string, torch::Tensor> DevicePluginEnvs::SaveState(
    const std::string& prefix) const {
  std::map<std::string, torch::Tensor> state;
  for (size_t f = 0; f < fields_.size(); ++f) {
    // A copy, also on the CPU (where .cpu() would alias the live state).
    state[prefix + "field." + names_[f]] =
        fields_[f].to(torch::TensorOptions().device(torch::kCPU),
                      /*non_blocking=*/false, /*copy=*/true);
  }
  return state;
}

absl::Status DevicePluginEnvs::RestoreState(
    const std::map<std::string, torch::Tensor>& state,
    const std::string& prefix) {
  // Everything checked first: nothing changes unless it all fits.
  for (size_t f = 0; f < fields_.size(); ++f) {
    const std::string key = prefix + "field." + names_[f];
    auto it = state.find(key);
    if (it == state.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint state has no ", key));
    }
    const torch::Tensor& saved = it->second;
    if (saved.sizes() != fields_[f].sizes() ||
        saved.scalar_type() != fields_[f].scalar_type()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint state ", key, ": ",
          c10::str(saved.scalar_type(), " ", saved.sizes()), " does not fit ",
          spec_.id(), " x ", num_envs_, " envs (",
          c10::str(fields_[f].scalar_type(), " ", fields_[f].sizes()), ")"));
    }
  }
  torch::NoGradGuard no_grad;
  for (size_t f = 0; f < fields_.size(); ++f) {
    fields_[f].copy_(state.at(prefix + "field." + names_[f]));
  }
  return absl::OkStatus();
}

absl::Status CheckDevicePluginEnvs(const rl_device_env_plugin* table,
                                   const std::string& origin,
                                   const EnvSpec& spec, torch::Device device,
                                   double tolerance,
                                   double perturb_for_testing) {
  constexpr int64_t kEnvs = 256;
  // Episodes cut within the check's steps: truncation and the resets after
  // it are compared too.
  EnvSpec short_episodes = spec;
  short_episodes.set_max_episode_steps(20);
  ASSIGN_OR_RETURN(
      auto cpu, DevicePluginEnvs::Create(table, origin, short_episodes, kEnvs,
                                         12345, torch::kCPU));
  ASSIGN_OR_RETURN(
      auto gpu, DevicePluginEnvs::Create(table, origin, short_episodes, kEnvs,
                                         12345, device));
  return CompareDeviceEnvs(
      *cpu, *gpu,
      absl::StrCat("stepping ", spec.id(), " (", origin, ") on ", device.str()),
      "host build's", tolerance, perturb_for_testing);
}

absl::Status CheckDevicePluginEnvsOnFirstUse(const rl_device_env_plugin* table,
                                             const std::string& origin,
                                             const EnvSpec& spec,
                                             torch::Device device,
                                             double tolerance) {
  if (device.is_cpu()) return absl::OkStatus();
  return CheckOncePerProcess(
      absl::StrCat("stepping ", spec.id(), " (", origin, ") on ", device.str()),
      [&] {
        return CheckDevicePluginEnvs(table, origin, spec, device, tolerance);
      });
}

}  // namespace rl
