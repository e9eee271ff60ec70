// The built-in classic-control environments with their state on a compute
// device: the same per-environment functions as the host's BatchedEnv
// (envs/env_batch.h), run by the CPU loop where the device is the CPU and by
// the CUDA kernels (libcuda_envs.so, loaded on first use) on a GPU. The
// state lives in LibTorch tensors on the device; observations, rewards and
// flags are written where the caller points, on the same device, so a
// collector's step loop never leaves the device.
//
// Data flow of Step: actions (device) -> one kernel over E environments ->
// observations / rewards / flags / final observations / episode returns
// and lengths (device), auto-reset as the host's batch does. On a GPU it is
// enqueued on the default stream, which the policy's LibTorch kernels use
// too; nothing waits. Identical seeds give identical episodes to the
// host's BatchedEnv::Create(id, E, seed): the CPU device runs its very code.
#ifndef RL_ACTOR_DEVICE_ENVS_H_
#define RL_ACTOR_DEVICE_ENVS_H_

#include <torch/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "envs/env_batch.h"
#include "envs/env_kind.h"
#include "envs/plugin_api/rl_env_plugin.h"
#include "proto/common.pb.h"

struct RlCudaEnvs;

namespace rl {

// E envs with their state on one device, as DeviceCollector steps them:
// the built-ins (DeviceEnvs, below) or a user's device env library
// (actor/device_plugin_envs.h). Every pointer is on device().
class DeviceEnvBatch {
 public:
  virtual ~DeviceEnvBatch() = default;
  virtual const EnvSpec& spec() const = 0;
  virtual int64_t num_envs() const = 0;
  virtual const torch::Device& device() const = 0;
  // Resets every env; observations [E, obs] of the spec's dtype (float32,
  // or uint8 where ObservationsAreBytes).
  virtual absl::Status Reset(void* observations) = 0;
  // Steps every env with auto reset; `out` as rl_env_plugin.h lays it out
  // (final_observations, episode_returns and episode_lengths may be null;
  // action_masks are not written).
  virtual absl::Status Step(const void* actions, const rl_env_buffers& out) = 0;
  // The whole dynamic state as tensors (on the CPU), and back.
  virtual std::map<std::string, torch::Tensor> SaveState(
      const std::string& prefix) const = 0;
  virtual absl::Status RestoreState(
      const std::map<std::string, torch::Tensor>& state,
      const std::string& prefix) = 0;
};

class DeviceEnvs final : public DeviceEnvBatch {
 public:
  // `num_envs` copies of built-in env `id` on `device` (cpu or cuda:N),
  // episodes cut at `max_episode_steps` (0: the registered limit).
  // INVALID_ARGUMENT for an id that is not built in (plugins and bridged
  // envs step on the host) or num_envs < 1; FAILED_PRECONDITION where the
  // CUDA kernels cannot be loaded or run on this driver, naming why.
  static absl::StatusOr<std::unique_ptr<DeviceEnvs>> Create(
      const std::string& id, int64_t num_envs, uint64_t seed,
      torch::Device device, int max_episode_steps = 0);

  const EnvSpec& spec() const override { return spec_; }
  int64_t num_envs() const override { return batch_.num_envs; }
  const torch::Device& device() const override { return device_; }

  // Resets every environment; observations [E, obs] float32 on the device.
  absl::Status Reset(void* observations) override;

  // Steps every environment. `actions` on the device: int64 [E] for
  // discrete kinds, float [E, action_size] for continuous ones (clipped to
  // the bounds as Gymnasium does; not validated: they come from the
  // policy's sampling). Every pointer of `out` addresses E rows on the
  // device (final_observations, episode_returns and episode_lengths may be
  // null). A failed launch is INTERNAL with CUDA's reason.
  absl::Status Step(const void* actions, const StepBuffers& out);
  absl::Status Step(const void* actions, const rl_env_buffers& out) override;

  // The whole dynamic state as tensors (on the CPU), and back (onto the
  // device): a resumed run continues exactly.
  std::map<std::string, torch::Tensor> SaveState(
      const std::string& prefix) const override;
  absl::Status RestoreState(const std::map<std::string, torch::Tensor>& state,
                            const std::string& prefix) override;

 private:
  DeviceEnvs(EnvKind kind, EnvSpec spec, int64_t num_envs, uint64_t seed,
             torch::Device device, const RlCudaEnvs* cuda);
  absl::Status Launched(int code, const char* what) const;

  EnvKind kind_;
  EnvSpec spec_;
  torch::Device device_;
  const RlCudaEnvs* cuda_;  // null on the CPU
  torch::Tensor state_;     // [S * E] float64
  torch::Tensor elapsed_;   // [E] int32
  torch::Tensor episode_;   // [E] int64 (the uint64 counters' bits)
  torch::Tensor returns_;   // [E] float64
  EnvBatch batch_;
};

// The envs' first use on a GPU checks itself: `id`'s envs (256 of them)
// stepped on `device` and on the CPU from the same state with the same
// actions, 32 steps, the device's state set to the CPU's before each (so a
// last-bit difference cannot grow: nvcc fuses multiply-adds). Observations
// (and the final ones of episodes that ended), rewards and episode returns
// must agree within `tolerance` relative to
// max(|CPU value|, 1), and the episode flags and lengths exactly, but for
// one env in the whole check (a near-tie at a threshold; its outputs are
// then not compared).
// FAILED_PRECONDITION naming what differed. Once per process, env and
// device (policy/device_act_check.h's record, shown by `rlctl workers`);
// OK at once on the CPU.
absl::Status CheckDeviceEnvsOnFirstUse(const std::string& id,
                                       torch::Device device,
                                       double tolerance = 1e-4);

// The comparison itself, on any device (its tests run it on the CPU);
// `perturb_for_testing` is added to the device's state before each step.
absl::Status CheckDeviceEnvs(const std::string& id, torch::Device device,
                             double tolerance, double perturb_for_testing = 0);

// What both self-checks run: `device` envs and `reference` envs (on the
// CPU, of the same spec and count) stepped 32 times from the reference's
// state (restored into `device` before each step, its floating-point
// tensors plus `perturb_for_testing`) with the same random valid actions,
// compared as CheckDeviceEnvsOnFirstUse says. Messages start with
// `what_ran` and name the `reference_name` ("CPU's").
absl::Status CompareDeviceEnvs(DeviceEnvBatch& reference,
                               DeviceEnvBatch& device,
                               const std::string& what_ran,
                               const std::string& reference_name,
                               double tolerance, double perturb_for_testing);

// Where the CUDA env kernels come from: libcuda_envs.so's table, checked
// (its version, a driver new enough for its CUDA runtime). Loaded once.
absl::StatusOr<const RlCudaEnvs*> LoadCudaEnvs();

}  // namespace rl

#endif  // RL_ACTOR_DEVICE_ENVS_H_
