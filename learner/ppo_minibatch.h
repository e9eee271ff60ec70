// The LibTorch minibatch step that the eager (ppo_eager_step.h) and the
// CUDA-graphed (ppo_graphed_step.h) strategies share, and what feeds it:
// rollout (host) -> device tensors (StepTensors) -> per minibatch: forward,
// loss (learner/ppo_loss_terms.h), backward, the gang's all-reduce, clipping,
// non-finite zeroing, Adam -> device sums -> one read-back (Result). Part of
// the ppo_updater library.
#ifndef RL_LEARNER_PPO_MINIBATCH_H_
#define RL_LEARNER_PPO_MINIBATCH_H_

#include <torch/optim/adam.h>
#include <torch/types.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "learner/collective.h"
#include "learner/multi_tensor_adam.h"
#include "learner/ppo_loss_terms.h"
#include "learner/ppo_step.h"
#include "policy/actor_critic.h"
#include "policy/rollout.h"
#include "proto/common.pb.h"

namespace rl {

// The tensors one minibatch step reads, and the sums it adds to: an
// update's own (eager), or a graph's, which stay put from update to update
// (graphed: a replay reads and writes where the capture did).
struct StepTensors {
  // The rollout on the device: [T*E, ...] rows.
  torch::Tensor obs, actions, old_log_probs, old_values, masks, advantages,
      returns;
  torch::Tensor episode_ends, initial_state;  // recurrent policies
  // [T*E] float, 1 = alive, 0 = padding (env.agents_leave); undefined when
  // every row counts. Every mean of the step is weighted by it.
  torch::Tensor weights;
  torch::Tensor idx;  // [minibatch]: this minibatch's rows
  torch::Tensor lr;   // graphs: Adam's rate, a device scalar
  // Sums over the update's minibatches (epoch_kl: the epoch's).
  torch::Tensor sum_policy_loss, sum_value_loss, sum_entropy, sum_kl, sum_clip,
      sum_grad_norm, sum_non_finite, epoch_kl;
};

// The sizes a minibatch step works with, fixed for a run.
struct StepShape {
  int64_t steps = 0;  // T
  int64_t minibatch = 0;
  int64_t global_minibatch = 0;
  int64_t envs_per_minibatch = 0;  // recurrent: whole env sequences
  double share = 1;                // of a gang's global minibatch
};

class TorchMinibatchStep {
 public:
  // `optimizer` (not owned) outlives this; `policy` is shared with the
  // updater (a module holder).
  TorchMinibatchStep(ActorCritic policy, const PPOConfig& config,
                     std::vector<LossTerm> loss_terms,
                     torch::optim::Adam* optimizer, bool bfloat16)
      : policy_(std::move(policy)),
        config_(config),
        loss_terms_(std::move(loss_terms)),
        optimizer_(optimizer),
        bfloat16_(bfloat16) {}

  // The rollout and the plan on the policy's device; `orders` gets the
  // plan's minibatch orders there.
  StepTensors DeviceRollout(const Rollout& rollout, const UpdatePlan& plan,
                            std::vector<torch::Tensor>* orders) const;
  void ZeroSums(StepTensors& t) const;
  StepShape ShapeOf(const Rollout& rollout, const UpdatePlan& plan) const;
  // One minibatch (rows t.idx): forward, loss, backward, the gang's
  // all-reduce over `collective` (advantage moments from `gang_plan`'s entry
  // `index`), clipping, non-finite zeroing, Adam (`graphed`: its device work
  // only, at t.lr), the sums. Reads nothing back.
  absl::Status Run(StepTensors& t, const StepShape& shape,
                   Collective* collective, const UpdatePlan* gang_plan,
                   int64_t index, bool graphed);
  // The update's statistics, read back once.
  EpochResult Result(const StepTensors& t, const UpdatePlan& plan,
                     int64_t minibatches_run, int epochs) const;

  const ActorCritic& policy() const { return policy_; }
  const PPOConfig& config() const { return config_; }
  torch::optim::Adam& optimizer() { return *optimizer_; }
  MultiTensorAdam& adam() { return adam_; }

 private:
  ActorCritic policy_;
  const PPOConfig config_;
  const std::vector<LossTerm> loss_terms_;
  torch::optim::Adam* optimizer_;
  MultiTensorAdam adam_{optimizer_};
  const bool bfloat16_;
};

}  // namespace rl

#endif  // RL_LEARNER_PPO_MINIBATCH_H_
