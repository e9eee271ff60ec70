// Collects rollout segments: batched environments + local policy inference,
// written in place into a preallocated Rollout.
//
// Data flow per step t: observations[t] (a view of the buffer) -> policy
// forward under InferenceMode -> actions/log-probs/values[t] -> one batched
// env step writes observations[t+1] (or next_observations), rewards[t] and
// the flags straight into the buffer. Once per segment: values of the final
// observations of truncated episodes (one batched forward), V(next obs),
// reward scaling, episode statistics.
#ifndef RL_ACTOR_ROLLOUT_COLLECTOR_H_
#define RL_ACTOR_ROLLOUT_COLLECTOR_H_

#include <torch/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "actor/reward_scaler.h"
#include "actor/segment_collector.h"
#include "envs/batched_env.h"
#include "envs/env_plugin.h"
#include "policy/actor_critic.h"
#include "policy/fused_policy.h"
#include "policy/fused_rows.h"
#include "policy/rollout.h"
#include "proto/common.pb.h"

namespace rl {

// Seed of a collector's action-sampling stream, distinct from the
// environments' `seed`.
uint64_t SamplingSeed(uint64_t seed);

// The threads stepping a run's environments on the host: the run's
// resources.actor_threads where it asks for more than 1, at most the
// worker's `worker_threads` (--env_threads, the CPUs Slurm or Kubernetes
// gave it) where that is above 1; else the worker's.
int EnvThreads(const RunSpec& spec, int worker_threads);

class RolloutCollector final : public SegmentCollector {
 public:
  // Environments from `spec` (id, envs_per_actor, time limit), seeded with
  // `seed`; `env_threads` threads step them.
  // A plugin must lie under one of `plugin_dirs` when that is not empty
  // (envs/env_plugin.h).
  static absl::StatusOr<std::unique_ptr<RolloutCollector>> Create(
      const RunSpec& spec, uint64_t seed, int env_threads,
      const std::vector<std::string>& plugin_dirs = {});

  const EnvSpec& env_spec() const override { return env_->spec(); }
  torch::Device rollout_device() const override { return torch::kCPU; }

  // A zeroed rollout of the run's segment shape.
  Rollout AllocateRollout() const override;

  // The env's observation elements: float32, or uint8
  // (EnvSpec.observation_dtype).
  torch::Dtype ObservationDtype() const;

  // Fills `rollout` with one segment collected by `policy`.
  absl::Status Collect(ActorCritic& policy, Rollout* rollout,
                       CollectTimings* timings = nullptr) override;

  // Returns and lengths of the episodes that ended in the last Collect().
  const std::vector<float>& episode_returns() const override {
    return episode_returns_;
  }
  const std::vector<int32_t>& episode_lengths() const override {
    return episode_lengths_;
  }

  // Everything needed to continue exactly: env state, current observations,
  // sampling generator, reward-scaler state, a recurrent policy's state.
  absl::Status SetRowPolicies(std::vector<RowPolicy> policies) override;
  const std::vector<int64_t>& episode_rows() const override {
    return episode_rows_;
  }

  absl::Status SetOpponents(RowOpponents* opponents) override;

  std::map<std::string, torch::Tensor> SaveState() const override;
  absl::Status RestoreState(
      const std::map<std::string, torch::Tensor>& state) override;

 private:
  absl::Status CollectSegment(ActorCritic& policy, Rollout* rollout,
                              CollectTimings* timings);
  RolloutCollector(const RunSpec& spec, std::unique_ptr<BatchedEnv> env,
                   uint64_t seed);

  RunSpec spec_;
  std::unique_ptr<BatchedEnv> env_;
  int64_t num_steps_;
  int64_t num_envs_;
  torch::Tensor current_observations_;  // [E, obs]
  // [E, n] uint8: the action masks of current_observations_, and the
  // scratch the last step of a segment writes (undefined: no masks).
  torch::Tensor current_masks_;
  torch::Tensor next_masks_;
  // [E] uint8 (env.agents_leave): each row's alive for current_observations_,
  // and where the last step of a segment writes it.
  torch::Tensor current_alive_;
  torch::Tensor next_alive_;
  RowOpponents* opponents_ = nullptr;
  // The policies acting for rows of the batch: the run's several
  // (SetRowPolicies), or with opponents the trained policy alone on its
  // rows (its handle set by each Collect). Empty: one policy, every row.
  std::vector<RowPolicy> row_policies_;
  // Per row policy, where the fused CPU kernels run it (gathering its
  // rows, then scattering what they give); null where they do not.
  std::vector<std::unique_ptr<FusedRows>> row_fused_;
  torch::Tensor row_owner_;  // [E] int64: the row policy of each row
  std::vector<int64_t> episode_rows_;
  // A recurrent policy's state [E, S] before the next step, and each
  // step's state after it (before the zeroing at an episode's end) [T, E,
  // S] scratch, the truncated episodes' bootstrap values read it; both
  // undefined without a core (policy.core).
  torch::Tensor policy_state_;
  torch::Tensor step_states_;
  torch::Tensor final_observations_;   // [T, E, obs] scratch
  torch::Tensor episode_return_rows_;  // [T, E] scratch
  torch::Tensor episode_length_rows_;  // [T, E] int32 scratch
  at::Generator generator_;
  std::unique_ptr<RewardScaler> reward_scaler_;
  std::unique_ptr<FusedPolicy> fused_;  // execution.cpu_kernels auto/fused
  std::vector<float> episode_returns_;
  std::vector<int32_t> episode_lengths_;
};

}  // namespace rl

#endif  // RL_ACTOR_ROLLOUT_COLLECTOR_H_
