// The layers the actor-critic (policy/actor_critic.h) and its parts
// (policy/network_parts.h) are built from, with CleanRL's initialisation:
// orthogonal weights, zero biases. Part of the actor_critic library.
#ifndef RL_POLICY_NETWORK_LAYERS_H_
#define RL_POLICY_NETWORK_LAYERS_H_

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <cstdint>
#include <vector>

#include "policy/actor_critic.h"

namespace rl {

// A Linear of orthogonal weights (`gain`) and zero bias.
torch::nn::Linear OrthogonalLinear(int in, int out, double gain);

// A Conv2d of orthogonal weights (gain sqrt 2) and zero bias.
torch::nn::Conv2d OrthogonalConv(int64_t in, int64_t out, int64_t kernel,
                                 int64_t stride, int64_t padding = 0);

// Numbers per image of `chw` after `layers` (a forward of zeros).
int64_t FlatFeatures(torch::nn::Sequential& layers,
                     const std::vector<int64_t>& chw);

// Hidden layers of `hidden` sizes over `in` inputs, each followed by
// `activation`; empty for no hidden sizes.
torch::nn::Sequential MakeTrunk(int in, const std::vector<int>& hidden,
                                ActorCriticConfig::Activation activation);

}  // namespace rl

#endif  // RL_POLICY_NETWORK_LAYERS_H_
