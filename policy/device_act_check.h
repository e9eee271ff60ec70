// Acting on a device checks itself on first use: the run's network acts on
// made-up observations on the CPU and on the device, from the same weights
// and the same (CPU) random stream, and the results are compared: values,
// log-probabilities, a recurrent state, and the actions themselves. A
// mismatch refuses the run naming what differed. The learner's update has
// its own check (learner/device_self_check.h).
#ifndef RL_POLICY_DEVICE_ACT_CHECK_H_
#define RL_POLICY_DEVICE_ACT_CHECK_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "policy/actor_critic.h"

namespace rl {

struct DeviceActCheckOptions {
  // Relative to max(|CPU value|, 1).
  double tolerance = 1e-4;
  // Tests: called on the device's policy before it acts.
  std::function<void(ActorCritic&)> perturb_for_testing;
};

// OK, or FAILED_PRECONDITION naming the output out of tolerance (and the
// device); INTERNAL for a LibTorch error on the device.
absl::Status CheckDeviceActing(const ActorCriticConfig& config,
                               torch::Device device,
                               const DeviceActCheckOptions& options = {});

// CheckDeviceActing once per process, network and device (later calls
// return the first result); OK at once on the CPU.
absl::Status CheckDeviceActingOnFirstUse(const ActorCriticConfig& config,
                                         torch::Device device);

// A key naming `config`'s network shape, for once-per-network caches.
std::string NetworkKey(const ActorCriticConfig& config);

// Runs `check` once per process for `key` (what is checked, on which device,
// for which network); later calls with the same key return the first
// result without running it again.
absl::Status CheckOncePerProcess(const std::string& key,
                                 const std::function<absl::Status()>& check);

// Every check CheckOncePerProcess has run in this process: its key and its
// result, by key. Workers report them to the coordinator (`rlctl workers`).
std::vector<std::pair<std::string, absl::Status>> DeviceChecksRun();

}  // namespace rl

#endif  // RL_POLICY_DEVICE_ACT_CHECK_H_
