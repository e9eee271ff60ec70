// The PPO minibatch step of the fused CPU path (policy/fused_policy.h): the
// clipped surrogate, the (optionally clipped) value loss and the entropy
// bonus with their gradients worked out by hand, one backward pass of the
// MLP into a flat gradient, and torch::optim::Adam's step applied to the
// module's parameters in place. Same arithmetic as PpoUpdater's LibTorch
// path (which stays the reference: ppo_updater_test compares the two), with
// LibTorch's tie rules for max and clamp, so that both paths take the same
// steps.
//
// The Adam moments are the optimizer's own state tensors (created as its
// first step would), so a checkpoint written by one path loads in the other.
#ifndef RL_LEARNER_FUSED_PPO_H_
#define RL_LEARNER_FUSED_PPO_H_

#include <torch/optim/adam.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "policy/fused_policy.h"
#include "proto/common.pb.h"

namespace rl {

// One minibatch, gathered into contiguous rows.
struct PpoMinibatch {
  int64_t size = 0;
  const float* observations = nullptr;        // [B, obs]
  const int64_t* discrete_actions = nullptr;  // [B] (discrete)
  const float* continuous_actions = nullptr;  // [B, A] (continuous)
  const float* old_log_probs = nullptr;       // [B]
  const float* old_values = nullptr;          // [B]
  const float* advantages = nullptr;          // [B], normalised if asked
  const float* returns = nullptr;             // [B]
};

// The values of the minibatch's loss terms, as LibTorch's path reports them.
struct PpoLossValues {
  float policy_loss = 0;
  float value_loss = 0;
  float entropy = 0;
  float approx_kl = 0;
  float clip_fraction = 0;
  bool finite = true;  // the total loss is finite
};

class FusedPpoLoss {
 public:
  // The loss terms of `batch` under `policy`, and into `grads`
  // [policy.num_parameters()] the gradient of
  //   policy_loss - entropy_coef * entropy + value_coef * value_loss.
  PpoLossValues Compute(FusedPolicy& policy, const PPOConfig& config,
                        const PpoMinibatch& batch, float* grads);

 private:
  struct LossSums {
    double policy_loss = 0, value_loss = 0, entropy = 0, kl = 0, clipped = 0;
  };
  // Rows of one chunk: adds their sums to `sums` and their gradient to
  // `grads` (written, not added, unless `accumulate`).
  void ComputeChunk(FusedPolicy& policy, const PPOConfig& config,
                    const PpoMinibatch& batch, float inv_b, bool accumulate,
                    float* grads, LossSums* sums);

  FusedPolicy::Activations acts_;
  std::vector<float> d_head_, d_values_, log_probs_, ratios_;
};

// torch::optim::Adam's step (no weight decay, no amsgrad) with the
// optimizer's lr, betas and eps, on `parameters` (policy->parameters(), in
// the order of `policy`'s flat gradient) from the flat `grads`.
// FAILED_PRECONDITION if the optimizer uses options this does not do.
absl::Status FusedAdamStep(torch::optim::Adam& optimizer,
                           const std::vector<torch::Tensor>& parameters,
                           const float* grads);

}  // namespace rl

#endif  // RL_LEARNER_FUSED_PPO_H_
