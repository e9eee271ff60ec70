// The layers the actor-critic (policy/actor_critic.h) is built from, with
// CleanRL's initialisation: orthogonal weights, zero biases. Part of the
// actor_critic library.
#ifndef RL_POLICY_NETWORK_LAYERS_H_
#define RL_POLICY_NETWORK_LAYERS_H_

#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include <vector>

#include "policy/actor_critic.h"

namespace rl {

// A Linear of orthogonal weights (`gain`) and zero bias.
torch::nn::Linear OrthogonalLinear(int in, int out, double gain);

// The CNN encoders of CleanRL's Atari (Nature) and Procgen (IMPALA) PPO for
// `config`'s encoder and image: images [B, C, H, W] in [0, 1] -> features
// [B, *features] (512 or 256).
torch::nn::Sequential MakeCnnEncoder(const ActorCriticConfig& config,
                                     int64_t* features);

// Hidden layers of `hidden` sizes over `in` inputs, each followed by
// `activation`; empty for no hidden sizes.
torch::nn::Sequential MakeTrunk(int in, const std::vector<int>& hidden,
                                ActorCriticConfig::Activation activation);

}  // namespace rl

#endif  // RL_POLICY_NETWORK_LAYERS_H_
