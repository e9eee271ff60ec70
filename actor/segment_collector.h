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

// Who plays the rows the trained policy does not (a league's frozen
// opponents, actor/league.h): called inside every step of a Collect.
class RowOpponents {
 public:
  virtual ~RowOpponents() = default;
  // The rows the trained policy plays, [K] int64 on the CPU, distinct,
  // fixed while the collector holds these opponents. Only those rows of a
  // rollout get actions, log-probabilities and values from it (the others' stay
  // as they were: an update reads only these rows).
  virtual const torch::Tensor& policy_rows() const = 0;
  // Writes the opponents' rows (every row not in policy_rows()) of
  // `actions` (this step's, [E] or [E, ...]); `masks` is [E, n] or
  // undefined.
  virtual absl::Status Act(const torch::Tensor& observations,
                           const torch::Tensor& masks,
                           torch::Tensor actions) = 0;
  // The step's results, [E] each: rows whose episode ended (terminated or
  // truncated) and, on those, the episode's return and length. `alive`:
  // each row's alive flag after the step where the env's agents may leave
  // early (env.agents_leave; 0: the row is padding until its copy's game
  // ends), else null.
  virtual void StepEnded(const uint8_t* terminated, const uint8_t* truncated,
                         const float* episode_returns,
                         const int32_t* episode_lengths,
                         const uint8_t* alive) = 0;
};

// A policy acting for some rows of the batch: a run's several policies
// (RunSpec.policies), each for its agents' rows.
struct RowPolicy {
  ActorCritic policy{nullptr};
  torch::Tensor rows;  // [K] int64, on the CPU
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

  // From the next Collect on, the policy Collect is given acts only for
  // `opponents`' policy_rows() and `opponents` (not owned; null: none) for
  // the others. Not beside SetRowPolicies. UNIMPLEMENTED where the
  // collector cannot.
  virtual absl::Status SetOpponents(RowOpponents* opponents) {
    (void)opponents;
    return absl::UnimplementedError(
        "league: opponents act only where envs step on the host");
  }

  // From the next Collect on, each of `policies` acts for its rows (every
  // row must have exactly one), and the policy Collect is given is not
  // used. Not beside SetOpponents. UNIMPLEMENTED where the collector
  // cannot.
  virtual absl::Status SetRowPolicies(std::vector<RowPolicy> policies) {
    (void)policies;
    return absl::UnimplementedError(
        "policies: several policies act only where envs step on the host");
  }

  // The row of each episode in episode_returns() (empty where the collector
  // does not say).
  virtual const std::vector<int64_t>& episode_rows() const {
    static const std::vector<int64_t> kNone;
    return kNone;
  }

  // Everything needed to continue exactly, as CPU tensors, and back.
  virtual std::map<std::string, torch::Tensor> SaveState() const = 0;
  virtual absl::Status RestoreState(
      const std::map<std::string, torch::Tensor>& state) = 0;
};

}  // namespace rl

#endif  // RL_ACTOR_SEGMENT_COLLECTOR_H_
