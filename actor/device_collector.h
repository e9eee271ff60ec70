// Collects rollout segments with the environments and the policy on one
// compute device: the built-in envs' state, the observations, the policy's
// forward passes, the sampling and the rollout all stay there
// (actor/device_envs.h). On a GPU the step loop enqueues kernels and never
// waits for them: no host synchronisation between steps, no copy.
//
// Data flow per step t: observations[t] (device) -> policy forward under
// InferenceMode -> actions / log-probs / values[t] -> one env kernel writes
// observations[t+1] (or next_observations), rewards[t] and the flags. Once
// per segment: V(next obs), the truncated episodes' bootstrap values (one
// forward over those rows) and the finished episodes' returns and lengths,
// the only values read back (one synchronisation).
//
// On the CPU it computes exactly what RolloutCollector computes with
// execution.cpu_kernels: libtorch (same seeds, same envs, same sampling
// stream): its tests hold it to that.
#ifndef RL_ACTOR_DEVICE_COLLECTOR_H_
#define RL_ACTOR_DEVICE_COLLECTOR_H_

#include <torch/types.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "actor/device_envs.h"
#include "actor/rollout_collector.h"
#include "actor/segment_collector.h"
#include "policy/actor_critic.h"
#include "policy/rollout.h"
#include "proto/common.pb.h"

namespace rl {

class DeviceCollector final : public SegmentCollector {
 public:
  // The run's env, envs_per_actor of them, on `device`, seeded with `seed`
  // as RolloutCollector seeds the host's: a built-in env (DeviceEnvs), or
  // a device env library (env.plugin naming one, loaded from `plugin_dirs`
  // as the host's collector would: DevicePluginEnvs). On a GPU the envs
  // first pass their self-check there (once per process).
  // INVALID_ARGUMENT naming the field for what stays on the host for now:
  // a plugin that is not a device env, a recurrent policy.core,
  // ppo.normalize_rewards; FAILED_PRECONDITION where the env kernels cannot
  // run or check out on the device.
  static absl::StatusOr<std::unique_ptr<DeviceCollector>> Create(
      const RunSpec& spec, uint64_t seed, torch::Device device,
      const std::vector<std::string>& plugin_dirs = {});

  // Whether `spec` can collect on the device (the reason where not); a
  // plugin is checked to be a device env when Create loads it.
  static absl::Status Supports(const RunSpec& spec);

  const EnvSpec& env_spec() const override { return envs_->spec(); }
  torch::Device rollout_device() const override { return envs_->device(); }

  // A zeroed rollout of the run's segment shape, on the device.
  Rollout AllocateRollout() const override;

  // Fills `rollout` (AllocateRollout's) with one segment acted by `policy`,
  // which must be on the device. The timings are the host's: on a GPU they
  // measure enqueueing, and the sum lands in the segment's last read-back.
  absl::Status Collect(ActorCritic& policy, Rollout* rollout,
                       CollectTimings* timings = nullptr) override;

  // Returns and lengths of the episodes that ended in the last Collect().
  const std::vector<float>& episode_returns() const override {
    return episode_returns_;
  }
  const std::vector<int32_t>& episode_lengths() const override {
    return episode_lengths_;
  }

  // Benches: called with true as the step loop begins and false as it
  // ends (host synchronisations are counted in between).
  void SetStepLoopObserverForTesting(std::function<void(bool)> observer) {
    step_loop_observer_ = std::move(observer);
  }

  // Everything needed to continue exactly (on the CPU; restored onto the
  // device): env state, current observations, the sampling generator.
  std::map<std::string, torch::Tensor> SaveState() const override;
  absl::Status RestoreState(
      const std::map<std::string, torch::Tensor>& state) override;

 private:
  DeviceCollector(const RunSpec& spec, std::unique_ptr<DeviceEnvBatch> envs,
                  at::Generator generator);
  absl::Status CollectSegment(ActorCritic& policy, Rollout* rollout,
                              CollectTimings* timings);

  std::unique_ptr<DeviceEnvBatch> envs_;
  int64_t num_steps_;
  int64_t num_envs_;
  int64_t observation_bytes_;           // of one env's row
  torch::Tensor current_observations_;  // [E, obs] on the device
  torch::Tensor final_observations_;    // [T, E, obs] scratch
  torch::Tensor episode_return_rows_;   // [T, E] scratch
  torch::Tensor episode_length_rows_;   // [T, E] int32 scratch
  at::Generator generator_;             // on the device
  std::vector<float> episode_returns_;
  std::vector<int32_t> episode_lengths_;
  std::function<void(bool)> step_loop_observer_;
};

// The collector for acting on `acting_device`: a DeviceCollector where that
// is a GPU, DeviceCollector::Supports(spec) and the envs' kernels load and
// pass their first-use self-check there (CheckDeviceEnvsOnFirstUse, or
// CheckDevicePluginEnvsOnFirstUse for a device env library), else
// the host's RolloutCollector (`env_threads`, `plugin_dirs` as its Create
// takes them). The choice is logged, a fallback as a warning with its
// reason.
absl::StatusOr<std::unique_ptr<SegmentCollector>> CreateSegmentCollector(
    const RunSpec& spec, uint64_t seed, int env_threads,
    torch::Device acting_device,
    const std::vector<std::string>& plugin_dirs = {});

}  // namespace rl

#endif  // RL_ACTOR_DEVICE_COLLECTOR_H_
