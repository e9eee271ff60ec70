// What an actor's loop needs of a collector, wherever its envs step: the
// host's (RolloutCollector: any env, inference on any device) or the
// device's (DeviceCollector: built-in envs, policy and rollout on one
// device). Both fill a Rollout of the run's segment shape and report the
// episodes that ended in it.
#ifndef RL_ACTOR_SEGMENT_COLLECTOR_H_
#define RL_ACTOR_SEGMENT_COLLECTOR_H_

#include <torch/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "policy/actor_critic.h"
#include "policy/rollout.h"
#include "proto/common.pb.h"

namespace rl {

struct CollectTimings {
  double env_seconds = 0;
  double inference_seconds = 0;
};

class SegmentCollector {
 public:
  virtual ~SegmentCollector() = default;

  // The resolved env the collector steps.
  virtual const EnvSpec& env_spec() const = 0;
  // Where its rollouts lie: the CPU for the host's collector.
  virtual torch::Device rollout_device() const = 0;

  // A zeroed rollout of the run's segment shape, on rollout_device().
  virtual Rollout AllocateRollout() const = 0;

  // Fills `rollout` with one segment acted by `policy`.
  virtual absl::Status Collect(ActorCritic& policy, Rollout* rollout,
                               CollectTimings* timings = nullptr) = 0;

  // Returns and lengths of the episodes that ended in the last Collect().
  virtual const std::vector<float>& episode_returns() const = 0;
  virtual const std::vector<int32_t>& episode_lengths() const = 0;

  // Everything needed to continue exactly, as CPU tensors, and back.
  virtual std::map<std::string, torch::Tensor> SaveState() const = 0;
  virtual absl::Status RestoreState(
      const std::map<std::string, torch::Tensor>& state) = 0;
};

}  // namespace rl

#endif  // RL_ACTOR_SEGMENT_COLLECTOR_H_
