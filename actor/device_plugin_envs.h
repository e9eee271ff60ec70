// A user's device environment (envs/plugin_api/rl_device_env.h) with its
// state on a compute device: the env's declared fields as LibTorch tensors
// [E, count] there, stepped by the library's CUDA kernels on a GPU (on the
// legacy default stream, which the policy's kernels use; nothing waits) or
// by its host build on the CPU. Observations, rewards and flags are written
// where the caller points, on the same device, so DeviceCollector's step
// loop never leaves it.
#ifndef RL_ACTOR_DEVICE_PLUGIN_ENVS_H_
#define RL_ACTOR_DEVICE_PLUGIN_ENVS_H_

#include <torch/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "actor/device_envs.h"
#include "envs/call_watch.h"
#include "envs/plugin_api/rl_device_env.h"
#include "proto/common.pb.h"

namespace rl {

class DevicePluginEnvs final : public DeviceEnvBatch {
 public:
  // `num_envs` envs of `spec` (resolved) from the device table `table`
  // (loaded from `origin`), seeded with `seed`, on `device` (cpu or
  // cuda:N). FAILED_PRECONDITION where create fails, its spaces do not fit
  // the spec, its layout is malformed, or its build has no CUDA kernels
  // for a GPU; INVALID_ARGUMENT for num_envs < 1 or another device.
  static absl::StatusOr<std::unique_ptr<DevicePluginEnvs>> Create(
      const rl_device_env_plugin* table, const std::string& origin,
      const EnvSpec& spec, int64_t num_envs, uint64_t seed,
      torch::Device device);
  ~DevicePluginEnvs() override;

  const EnvSpec& spec() const override { return spec_; }
  int64_t num_envs() const override { return num_envs_; }
  const torch::Device& device() const override { return device_; }

  absl::Status Reset(void* observations) override;
  // Actions are the policy's (valid); on a GPU nothing checks them.
  absl::Status Step(const void* actions, const rl_env_buffers& out) override;

  // Each field as `prefix` + "field." + its name.
  std::map<std::string, torch::Tensor> SaveState(
      const std::string& prefix) const override;
  absl::Status RestoreState(const std::map<std::string, torch::Tensor>& state,
                            const std::string& prefix) override;

 private:
  DevicePluginEnvs(const rl_device_env_plugin* table, std::string origin,
                   EnvSpec spec, int64_t num_envs, torch::Device device);
  absl::Status Called(int failed, const char* error, const char* what) const;

  const rl_device_env_plugin* const table_;
  const std::string origin_;
  const EnvSpec spec_;
  const int64_t num_envs_;
  const torch::Device device_;
  // The library's calls are watched as the host's are (env.call_timeout_s:
  // a call that hangs ends an actor worker, naming it).
  const absl::Duration timeout_;
  CallWatch::Slot* const watch_;
  rl_device_env* env_ = nullptr;
  std::vector<std::string> names_;
  std::vector<torch::Tensor> fields_;  // [E, count] each, on the device
  std::vector<void*> pointers_;        // their data
};

// The first use of a device env on a GPU checks itself: 256 envs stepped
// on `device` and by the host build on the CPU from the same state (the
// device's fields set to the CPU's before each of 32 steps) with the same
// random valid actions, episodes cut at 20 steps. Observations (and the
// final ones of episodes that ended), rewards and episode returns must
// agree within `tolerance` relative to max(|CPU value|, 1), the flags and
// episode lengths exactly but for one env in the whole check (a near-tie
// at a threshold). FAILED_PRECONDITION naming what differed. Once per
// process, env and device (shown by `rlctl workers`); OK at once on the CPU.
absl::Status CheckDevicePluginEnvsOnFirstUse(const rl_device_env_plugin* table,
                                             const std::string& origin,
                                             const EnvSpec& spec,
                                             torch::Device device,
                                             double tolerance = 1e-4);

// The comparison itself, on any device (its tests run it on the CPU);
// `perturb_for_testing` is added to the device's float fields before each
// step.
absl::Status CheckDevicePluginEnvs(const rl_device_env_plugin* table,
                                   const std::string& origin,
                                   const EnvSpec& spec, torch::Device device,
                                   double tolerance,
                                   double perturb_for_testing = 0);

}  // namespace rl

#endif  // RL_ACTOR_DEVICE_PLUGIN_ENVS_H_
