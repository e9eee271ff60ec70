// Generalised advantage estimation over LibTorch tensors, on whatever
// device the rollout is (a GPU-resident rollout's GAE without a copy to the
// host): the arithmetic of ComputeGae (learner/gae.h), the recursion over
// time one fused multiply-add kernel per step, the rest over the whole
// segment at once.
#ifndef RL_LEARNER_GAE_TENSORS_H_
#define RL_LEARNER_GAE_TENSORS_H_

#include <torch/types.h>

#include <utility>

namespace rl {

// Tensors as GaeInputs names them ([T, E], next_values [E]); returns
// (advantages, returns), [T * E] each, on the rollout's device.
std::pair<torch::Tensor, torch::Tensor> ComputeGaeTensors(
    const torch::Tensor& rewards, const torch::Tensor& values,
    const torch::Tensor& next_values, const torch::Tensor& terminated,
    const torch::Tensor& truncated, const torch::Tensor& truncated_values,
    float gamma, float lambda);

}  // namespace rl

#endif  // RL_LEARNER_GAE_TENSORS_H_
