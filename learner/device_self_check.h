// A device's first use checks itself: before a learner (or rl_local) trains
// on a CUDA device, one fixed PPO update of the run's own network runs on
// the CPU and on the device, from the same weights, rollout and shuffling
// stream, and the results are compared. Code that never ran on a GPU then
// cannot train silently wrong there: a mismatch refuses the run naming
// what differed. The comparison is the same code on every device; tests run
// it on the CPU against the CPU (and against a perturbed copy).
#ifndef RL_LEARNER_DEVICE_SELF_CHECK_H_
#define RL_LEARNER_DEVICE_SELF_CHECK_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "policy/actor_critic.h"
#include "proto/common.pb.h"

namespace rl {

struct DeviceCheckOptions {
  // float32: every parameter, buffer and reported loss within this of the
  // CPU's, relative to max(|cpu value|, 1).
  double tolerance = 1e-4;
  // The same, where the device's update runs in bfloat16 autocast
  // (execution.precision) against the CPU's float32: bfloat16 keeps 8 bits of
  // mantissa, about 2 to 3 significant digits.
  double bfloat16_tolerance = 5e-2;
  // Tests: called on the device's policy after its update, before the
  // comparison.
  std::function<void(ActorCritic&)> perturb_for_testing;
  // Tests: the device's update through a DeferredStepGraph, as
  // execution.cuda_graphs would run it on CUDA (learner/step_graph.h).
  bool deferred_graphs_for_testing = false;
};

// What the check compared, for the log and the worker's record.
struct DeviceCheckReport {
  std::string device;
  int64_t tensors_compared = 0;
  double max_relative_difference = 0;
  std::string worst;         // the tensor with the largest difference
  bool bfloat16 = false;     // the device's update ran in bfloat16 autocast
  bool cuda_graphs = false;  // its minibatch steps replayed a graph
  double tolerance = 0;      // the one applied
};

// The check for a network of `config` trained with `ppo` (its epochs,
// minibatches and KL stop replaced by one epoch of one minibatch; of four
// where execution.cuda_graphs may graph the device's steps, so that they warm
// up, capture and replay) on a made-up rollout of 8 steps x 4 envs. The CPU's
// update is float32; the device's runs at the run's execution.precision.
// FAILED_PRECONDITION naming the first tensor out of tolerance (and the
// device); INTERNAL for a LibTorch error on the device.
absl::StatusOr<DeviceCheckReport> CheckDeviceUpdate(
    const ActorCriticConfig& config, const PPOConfig& ppo,
    const ExecutionConfig& execution, torch::Device device,
    const DeviceCheckOptions& options = {});

// CheckDeviceUpdate once per process, network shape and device: later
// calls with the same (config, device) return the first result. Nothing
// to check on the CPU (OK at once).
absl::Status CheckDeviceOnFirstUse(const ActorCriticConfig& config,
                                   const PPOConfig& ppo,
                                   const ExecutionConfig& execution,
                                   torch::Device device);

}  // namespace rl

#endif  // RL_LEARNER_DEVICE_SELF_CHECK_H_
