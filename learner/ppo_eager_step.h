// The eager LibTorch minibatch strategy: each update copies its rollout to
// the policy's device once, and each minibatch step (learner/ppo_minibatch.h)
// runs kernel by kernel on its rows. Part of the ppo_updater library.
#ifndef RL_LEARNER_PPO_EAGER_STEP_H_
#define RL_LEARNER_PPO_EAGER_STEP_H_

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "learner/collective.h"
#include "learner/ppo_minibatch.h"
#include "learner/ppo_step.h"
#include "policy/rollout.h"

namespace rl {

class EagerMinibatches : public MinibatchStrategy {
 public:
  explicit EagerMinibatches(TorchMinibatchStep step) : step_(std::move(step)) {}

  Kind kind() const override { return Kind::kEager; }
  absl::Status BeginUpdate(const Rollout& rollout, const UpdatePlan& plan,
                           Collective* collective) override;
  void BeginEpoch(int epoch) override;
  absl::Status Step(int epoch, int64_t minibatch) override;
  torch::Tensor EpochKl() override;
  EpochResult Finish(const Rollout& rollout, const UpdatePlan& plan,
                     int64_t minibatches_run, int epochs) override;

  // The step, shared with a graphed strategy that runs through this one.
  TorchMinibatchStep& step() { return step_; }

 private:
  TorchMinibatchStep step_;
  // The update in progress.
  StepTensors tensors_;
  std::vector<torch::Tensor> orders_;
  StepShape shape_;
  const UpdatePlan* plan_ = nullptr;
  Collective* collective_ = nullptr;
};

}  // namespace rl

#endif  // RL_LEARNER_PPO_EAGER_STEP_H_
