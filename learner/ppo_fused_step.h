// The fused CPU minibatch strategy (execution.cpu_kernels; policy/
// fused_policy.h): rollout (host) -> each minibatch's rows gathered into
// host buffers -> the fused loss and its gradient (learner/fused_ppo.h) -> a
// gang's all-reduce, clipping, non-finite zeroing, Adam on the flat gradient
// -> host sums. No LibTorch kernel per step. Part of the ppo_updater library.
#ifndef RL_LEARNER_PPO_FUSED_STEP_H_
#define RL_LEARNER_PPO_FUSED_STEP_H_

#include <torch/optim/adam.h>
#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "learner/collective.h"
#include "learner/fused_ppo.h"
#include "learner/ppo_step.h"
#include "policy/actor_critic.h"
#include "policy/fused_policy.h"
#include "policy/rollout.h"
#include "proto/common.pb.h"

namespace rl {

class FusedMinibatches : public MinibatchStrategy {
 public:
  // `optimizer` (not owned) outlives this; `policy` is shared with the
  // updater (a module holder).
  FusedMinibatches(ActorCritic policy, const PPOConfig& config,
                   torch::optim::Adam* optimizer)
      : policy_(std::move(policy)), config_(config), optimizer_(optimizer) {}

  Kind kind() const override { return Kind::kFused; }
  absl::Status BeginUpdate(const Rollout& rollout, const UpdatePlan& plan,
                           Collective* collective) override;
  void BeginEpoch(int epoch) override;
  absl::Status Step(int epoch, int64_t minibatch) override;
  torch::Tensor EpochKl() override;
  EpochResult Finish(const Rollout& rollout, const UpdatePlan& plan,
                     int64_t minibatches_run, int epochs) override;

 private:
  // Gathered minibatch rows, and the flat gradient with one more slot for
  // the not-finite flag that rides in a gang's bucket.
  struct Buffers {
    std::vector<float> observations, actions, old_log_probs, old_values,
        advantages, returns, grads;
    std::vector<int64_t> discrete_actions;
  };
  // The update's rows on the host.
  struct Rows {
    const float* obs = nullptr;
    const int64_t* discrete_actions = nullptr;
    const float* continuous_actions = nullptr;
    const float* old_log_probs = nullptr;
    const float* old_values = nullptr;
    const float* advantages = nullptr;
    const float* returns = nullptr;
    // Agents that leave early: 1 alive, 0 padding (skipped when gathered);
    // null when every row counts.
    const uint8_t* alive = nullptr;
  };

  ActorCritic policy_;
  const PPOConfig config_;
  torch::optim::Adam* optimizer_;
  FusedPolicy fused_;
  FusedPpoLoss loss_;
  Buffers buffers_;
  // The update in progress.
  const UpdatePlan* plan_ = nullptr;
  Collective* collective_ = nullptr;
  Rows rows_;
  std::vector<torch::Tensor> params_;
  const int64_t* epoch_order_ = nullptr;
  double epoch_kl_ = 0;
  double sum_policy_loss_ = 0, sum_value_loss_ = 0, sum_entropy_ = 0,
         sum_kl_ = 0, sum_clip_ = 0, sum_grad_norm_ = 0;
  int64_t bad_minibatches_ = 0;
};

}  // namespace rl

#endif  // RL_LEARNER_PPO_FUSED_STEP_H_
