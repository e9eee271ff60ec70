#include "policy/network_layers.h"

#include <torch/nn/init.h>

#include <cmath>
#include <vector>

namespace rl {

torch::nn::Linear OrthogonalLinear(int in, int out, double gain) {
  torch::nn::Linear layer(in, out);
  torch::NoGradGuard no_grad;
  torch::nn::init::orthogonal_(layer->weight, gain);
  torch::nn::init::zeros_(layer->bias);
  return layer;
}

torch::nn::Conv2d OrthogonalConv(int64_t in, int64_t out, int64_t kernel,
                                 int64_t stride, int64_t padding) {
  torch::nn::Conv2d layer(torch::nn::Conv2dOptions(in, out, kernel)
                              .stride(stride)
                              .padding(padding));
  torch::NoGradGuard no_grad;
  torch::nn::init::orthogonal_(layer->weight, std::sqrt(2.0));
  torch::nn::init::zeros_(layer->bias);
  return layer;
}

int64_t FlatFeatures(torch::nn::Sequential& layers,
                     const std::vector<int64_t>& chw) {
  torch::NoGradGuard no_grad;
  return layers->forward(torch::zeros({1, chw[0], chw[1], chw[2]})).numel();
}

torch::nn::Sequential MakeTrunk(int in, const std::vector<int>& hidden,
                                ActorCriticConfig::Activation activation) {
  torch::nn::Sequential trunk;
  for (int size : hidden) {
    trunk->push_back(OrthogonalLinear(in, size, std::sqrt(2.0)));
    if (activation == ActorCriticConfig::Activation::kRelu) {
      trunk->push_back(torch::nn::ReLU());
    } else {
      trunk->push_back(torch::nn::Tanh());
    }
    in = size;
  }
  return trunk;
}

}  // namespace rl
