#include "actor/device_envs.h"

#include <c10/core/DeviceGuard.h>

#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "envs/cuda_envs_ext.h"
#include "envs/env_registry.h"
#include "policy/cuda_runtime.h"
#include "policy/device_act_check.h"

namespace rl {

absl::StatusOr<const RlCudaEnvs*> LoadCudaEnvs() {
  static const absl::StatusOr<const RlCudaEnvs*>* loaded =
      new absl::StatusOr<const RlCudaEnvs*>(
          []() -> absl::StatusOr<const RlCudaEnvs*> {
            ASSIGN_OR_RETURN(void* entry, LoadGpuExtension(kRlCudaEnvsLibrary,
                                                           kRlCudaEnvsEntry));
            const RlCudaEnvs* table =
                reinterpret_cast<const RlCudaEnvs* (*)()>(entry)();
            if (table == nullptr || table->version != RL_CUDA_ENVS_VERSION) {
              return absl::FailedPreconditionError(absl::StrCat(
                  kRlCudaEnvsLibrary, ": table version ",
                  table == nullptr ? -1 : table->version, ", this binary's is ",
                  RL_CUDA_ENVS_VERSION, " (rebuild both)"));
            }
            // CUDA's minor-version compatibility: a driver of the
            // runtime's major version runs it.
            if (table->driver_version / 1000 < table->runtime_version / 1000) {
              return absl::FailedPreconditionError(absl::StrCat(
                  kRlCudaEnvsLibrary, " was built with CUDA runtime ",
                  table->runtime_version, ", the NVIDIA driver here supports ",
                  table->driver_version,
                  " at most: the envs cannot step on this GPU (a newer "
                  "driver would run them)"));
            }
            return table;
          }());
  return *loaded;
}

absl::StatusOr<std::unique_ptr<DeviceEnvs>> DeviceEnvs::Create(
    const std::string& id, int64_t num_envs, uint64_t seed,
    torch::Device device, int max_episode_steps) {
  absl::StatusOr<EnvKind> kind = FindEnvKind(id);
  if (!kind.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "env.id: ", id,
        " is not a built-in env; only built-in envs step on the device "
        "(plugins and bridged envs step on the host)"));
  }
  if (num_envs < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_envs must be >= 1 (got ", num_envs, ")"));
  }
  if (max_episode_steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_episode_steps must be >= 0 (got ", max_episode_steps, ")"));
  }
  const RlCudaEnvs* cuda = nullptr;
  if (device.is_cuda()) {
    ASSIGN_OR_RETURN(cuda, LoadCudaEnvs());
  } else if (!device.is_cpu()) {
    return absl::InvalidArgumentError(
        absl::StrCat("envs on ", device.str(), ": only cpu and cuda"));
  }
  EnvSpec spec = RegisteredEnv(*kind);
  if (max_episode_steps > 0) spec.set_max_episode_steps(max_episode_steps);
  std::unique_ptr<DeviceEnvs> envs(
      new DeviceEnvs(*kind, std::move(spec), num_envs, seed, device, cuda));
  // Every environment starts in a valid initial state (episode 1), as the
  // host's batch does, so a Step before the first Reset is well defined.
  RETURN_IF_ERROR(envs->Reset(nullptr));
  return envs;
}

DeviceEnvs::DeviceEnvs(EnvKind kind, EnvSpec spec, int64_t num_envs,
                       uint64_t seed, torch::Device device,
                       const RlCudaEnvs* cuda)
    : kind_(kind), spec_(std::move(spec)), device_(device), cuda_(cuda) {
  const auto on = torch::TensorOptions().device(device);
  state_ = torch::zeros({EnvStateSize(kind) * num_envs}, on.dtype(torch::kF64));
  elapsed_ = torch::zeros({num_envs}, on.dtype(torch::kInt32));
  episode_ = torch::zeros({num_envs}, on.dtype(torch::kInt64));
  returns_ = torch::zeros({num_envs}, on.dtype(torch::kF64));
  batch_.state = state_.data_ptr<double>();
  batch_.elapsed = elapsed_.data_ptr<int32_t>();
  batch_.episode = reinterpret_cast<uint64_t*>(episode_.data_ptr<int64_t>());
  batch_.returns = returns_.data_ptr<double>();
  batch_.num_envs = num_envs;
  batch_.max_episode_steps = spec_.max_episode_steps();
  batch_.seed = seed;
}

absl::Status DeviceEnvs::Launched(int code, const char* what) const {
  if (code == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(
      what, " ", spec_.id(), " on ", device_.str(), ": ", cuda_->error(code)));
}

absl::Status DeviceEnvs::Reset(void* observations) {
  float* obs = static_cast<float*>(observations);
  if (cuda_ == nullptr) {
    ResetBatchCpu(kind_, batch_, obs, 0, batch_.num_envs);
    return absl::OkStatus();
  }
  // The kernels launch on the thread's current device: make it the envs'.
  const c10::DeviceGuard guard(device_);
  return Launched(cuda_->reset(static_cast<int>(kind_), &batch_, obs),
                  "resetting");
}

absl::Status DeviceEnvs::Step(const void* actions, const rl_env_buffers& out) {
  StepBuffers b;
  b.observations = static_cast<float*>(out.observations);
  b.rewards = out.rewards;
  b.terminated = out.terminated;
  b.truncated = out.truncated;
  b.final_observations = static_cast<float*>(out.final_observations);
  b.episode_returns = out.episode_returns;
  b.episode_lengths = out.episode_lengths;
  return Step(actions, b);
}

absl::Status DeviceEnvs::Step(const void* actions, const StepBuffers& out) {
  if (cuda_ == nullptr) {
    StepBatchCpu(kind_, batch_, actions, out, 0, batch_.num_envs);
    return absl::OkStatus();
  }
  const c10::DeviceGuard guard(device_);
  return Launched(cuda_->step(static_cast<int>(kind_), &batch_, actions, &out),
                  "stepping");
}

std::map<std::string, torch::Tensor> DeviceEnvs::SaveState(
    const std::string& prefix) const {
  // Copies, also on the CPU (where .cpu() would alias the live state).
  const auto copy = [](const torch::Tensor& t) {
    return t.to(torch::TensorOptions().device(torch::kCPU),
                /*non_blocking=*/false, /*copy=*/true);
  };
  return {{prefix + "state", copy(state_)},
          {prefix + "elapsed", copy(elapsed_)},
          {prefix + "episode", copy(episode_)},
          {prefix + "returns", copy(returns_)},
          {prefix + "seed",
           torch::tensor({static_cast<int64_t>(batch_.seed)}, torch::kInt64)}};
}

absl::Status DeviceEnvs::RestoreState(
    const std::map<std::string, torch::Tensor>& state,
    const std::string& prefix) {
  std::map<std::string, torch::Tensor> found;
  for (const char* name : {"state", "elapsed", "episode", "returns", "seed"}) {
    auto it = state.find(prefix + name);
    if (it == state.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint state has no ", prefix, name));
    }
    found[name] = it->second;
  }
  for (const auto& [name, into] :
       std::initializer_list<std::pair<const char*, torch::Tensor>>{
           {"state", state_},
           {"elapsed", elapsed_},
           {"episode", episode_},
           {"returns", returns_}}) {
    const torch::Tensor& saved = found[name];
    if (saved.sizes() != into.sizes() ||
        saved.scalar_type() != into.scalar_type()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint state ", prefix, name, ": ",
          c10::str(saved.scalar_type(), " ", saved.sizes()), " does not fit ",
          spec_.id(), " x ", num_envs(), " envs (",
          c10::str(into.scalar_type(), " ", into.sizes()), ")"));
    }
  }
  if (found["seed"].numel() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint state ", prefix, "seed: one number"));
  }
  torch::NoGradGuard no_grad;
  state_.copy_(found["state"]);
  elapsed_.copy_(found["elapsed"]);
  episode_.copy_(found["episode"]);
  returns_.copy_(found["returns"]);
  batch_.seed = static_cast<uint64_t>(found["seed"].item<int64_t>());
  return absl::OkStatus();
}

namespace {

// What one step wrote, on one device.
struct StepTensors {
  torch::Tensor observations, final_observations, rewards, terminated,
      truncated, returns, lengths;

  StepTensors(const EnvSpec& spec, int64_t n, torch::Device device) {
    const auto on = torch::TensorOptions().device(device);
    observations = torch::full(
        {n, spec.observation_size()}, 7,
        on.dtype(ObservationsAreBytes(spec) ? torch::kUInt8 : torch::kFloat32));
    final_observations = observations.clone();
    rewards = torch::full({n}, -7.0f, on);
    terminated = torch::full({n}, 9, on.dtype(torch::kUInt8));
    truncated = torch::full({n}, 9, on.dtype(torch::kUInt8));
    returns = torch::full({n}, -7.0f, on);
    lengths = torch::full({n}, -7, on.dtype(torch::kInt32));
  }

  rl_env_buffers Buffers() {
    rl_env_buffers out{};
    out.observations = observations.data_ptr();
    out.final_observations = final_observations.data_ptr();
    out.rewards = rewards.data_ptr<float>();
    out.terminated = terminated.data_ptr<uint8_t>();
    out.truncated = truncated.data_ptr<uint8_t>();
    out.episode_returns = returns.data_ptr<float>();
    out.episode_lengths = lengths.data_ptr<int32_t>();
    return out;
  }
};

// The largest |device - reference| / max(|reference|, 1) over `rows` (0
// for none; NaN where either is not a number).
double Difference(const torch::Tensor& device, const torch::Tensor& reference,
                  const torch::Tensor& rows) {
  const torch::Tensor want = reference.index({rows}).to(torch::kF64);
  if (want.numel() == 0) return 0;
  const torch::Tensor got = device.cpu().index({rows}).to(torch::kF64);
  return ((got - want).abs() / want.abs().clamp_min(1.0)).max().item<double>();
}

// Random valid actions for every env of `spec` (on the CPU).
torch::Tensor RandomActions(const EnvSpec& spec, int64_t n,
                            at::Generator& generator) {
  if (spec.num_discrete_actions() > 0) {
    return torch::randint(0, spec.num_discrete_actions(), {n}, generator,
                          torch::kInt64);
  }
  if (spec.action_nvec_size() > 0) {
    std::vector<torch::Tensor> parts;
    for (int64_t k : spec.action_nvec()) {
      parts.push_back(torch::randint(0, k, {n, 1}, generator, torch::kInt64));
    }
    return torch::cat(parts, 1).contiguous();
  }
  return (torch::randn({n, spec.continuous_action_size()}, generator) * 2.0f)
      .contiguous();
}

}  // namespace

absl::Status CompareDeviceEnvs(DeviceEnvBatch& reference,
                               DeviceEnvBatch& device,
                               const std::string& what_ran,
                               const std::string& reference_name,
                               double tolerance, double perturb_for_testing) {
  constexpr int kSteps = 32;
  const EnvSpec& spec = reference.spec();
  const int64_t n = reference.num_envs();
  auto generator = at::make_generator<at::CPUGeneratorImpl>(77);
  int flag_ties = 0;
  double largest = 0;
  std::string largest_what = "nothing";
  for (int t = 0; t < kSteps; ++t) {
    std::map<std::string, torch::Tensor> state = reference.SaveState("e.");
    for (auto& [name, tensor] : state) {
      if (tensor.is_floating_point()) tensor = tensor + perturb_for_testing;
    }
    RETURN_IF_ERROR(device.RestoreState(state, "e."));
    const torch::Tensor actions = RandomActions(spec, n, generator);
    const torch::Tensor device_actions = actions.to(device.device());
    StepTensors want(spec, n, torch::kCPU), got(spec, n, device.device());
    RETURN_IF_ERROR(reference.Step(actions.data_ptr(), want.Buffers()));
    RETURN_IF_ERROR(device.Step(device_actions.data_ptr(), got.Buffers()));
    // Rows whose flags agree. A near-tie at a threshold (a last-bit
    // difference) can end an episode on one side only, which then resets
    // that env: such a row's outputs are not compared, and one such row is
    // allowed in the whole check (the next step starts from the
    // reference's state again).
    const torch::Tensor agree = got.terminated.cpu().eq(want.terminated) &
                                got.truncated.cpu().eq(want.truncated) &
                                got.lengths.cpu().eq(want.lengths);
    const int ties = static_cast<int>(n) - agree.sum().item<int>();
    flag_ties += ties;
    if (flag_ties > 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          what_ran, ": the episode flags or lengths at step ", t,
          " differ from the ", reference_name, " in ", ties, " envs (",
          flag_ties, " in the check; one near-tie allowed)"));
    }
    // Episodes cut or ended at this step were reset from the same random
    // stream: their new observations are compared too, and their last ones.
    const torch::Tensor ended =
        agree & (want.terminated.gt(0) | want.truncated.gt(0));
    for (const auto& [what, a, b, rows] :
         {std::tuple<const char*, torch::Tensor, torch::Tensor, torch::Tensor>{
              "observations", got.observations, want.observations, agree},
          {"final observations", got.final_observations,
           want.final_observations, ended},
          {"rewards", got.rewards, want.rewards, agree},
          {"episode returns", got.returns, want.returns, agree}}) {
      const double d = Difference(a, b, rows);
      if (!(d <= tolerance)) {
        return absl::FailedPreconditionError(
            absl::StrCat(what_ran, ": ", what, " at step ", t,
                         " differ from the ", reference_name, " by ", d,
                         " (relative; tolerance ", tolerance, ")"));
      }
      if (d > largest) {
        largest = d;
        largest_what = what;
      }
    }
  }
  RL_LOG_INFO(
      "env self-check of {} passed: {} steps of {} envs within {:g} of the "
      "{} ({}; {} near-tie flags)",
      what_ran, kSteps, n, tolerance, reference_name,
      largest == 0
          ? std::string("identical")
          : absl::StrCat("largest difference ", largest, ", ", largest_what),
      flag_ties);
  return absl::OkStatus();
}

absl::Status CheckDeviceEnvs(const std::string& id, torch::Device device,
                             double tolerance, double perturb_for_testing) {
  constexpr int64_t kEnvs = 256;
  ASSIGN_OR_RETURN(auto cpu, DeviceEnvs::Create(id, kEnvs, 12345, torch::kCPU,
                                                /*max_episode_steps=*/20));
  ASSIGN_OR_RETURN(auto gpu, DeviceEnvs::Create(id, kEnvs, 12345, device,
                                                /*max_episode_steps=*/20));
  return CompareDeviceEnvs(*cpu, *gpu,
                           absl::StrCat("stepping ", id, " on ", device.str()),
                           "CPU's", tolerance, perturb_for_testing);
}

absl::Status CheckDeviceEnvsOnFirstUse(const std::string& id,
                                       torch::Device device, double tolerance) {
  if (device.is_cpu()) return absl::OkStatus();
  return CheckOncePerProcess(
      absl::StrCat("stepping ", id, " on ", device.str()),
      [&] { return CheckDeviceEnvs(id, device, tolerance); });
}

}  // namespace rl
