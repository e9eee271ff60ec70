// The eager LibTorch minibatch strategy (learner/ppo_eager_step.h). Part of
// the ppo_updater library.
#include "learner/ppo_eager_step.h"

#include <utility>
#include <vector>

namespace rl {

absl::Status EagerMinibatches::BeginUpdate(const Rollout& rollout,
                                           const UpdatePlan& plan,
                                           Collective* collective) {
  orders_.clear();
  tensors_ = step_.DeviceRollout(rollout, plan, &orders_);
  step_.ZeroSums(tensors_);
  shape_ = step_.ShapeOf(rollout, plan);
  plan_ = &plan;
  collective_ = collective;
  return absl::OkStatus();
}

void EagerMinibatches::BeginEpoch(int /*epoch*/) { tensors_.epoch_kl.zero_(); }

absl::Status EagerMinibatches::Step(int epoch, int64_t minibatch) {
  tensors_.idx =
      orders_[epoch].narrow(0, minibatch * shape_.minibatch, shape_.minibatch);
  const int64_t num_minibatches = step_.config().num_minibatches();
  return step_.Run(tensors_, shape_, collective_,
                   collective_ != nullptr ? plan_ : nullptr,
                   epoch * num_minibatches + minibatch, /*graphed=*/false);
}

torch::Tensor EagerMinibatches::EpochKl() {
  return tensors_.epoch_kl.to(torch::kFloat64).reshape({1});
}

EpochResult EagerMinibatches::Finish(const Rollout& /*rollout*/,
                                     const UpdatePlan& plan,
                                     int64_t minibatches_run, int epochs) {
  EpochResult result = step_.Result(tensors_, plan, minibatches_run, epochs);
  tensors_ = StepTensors{};
  orders_.clear();
  plan_ = nullptr;
  return result;
}

}  // namespace rl
