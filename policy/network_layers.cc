#include "policy/network_layers.h"

#include <torch/nn/init.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/pooling.h>

#include <cmath>
#include <vector>

namespace rl {
namespace {

torch::nn::Conv2d OrthogonalConv(int64_t in, int64_t out, int64_t kernel,
                                 int64_t stride, int64_t padding = 0) {
  torch::nn::Conv2d layer(torch::nn::Conv2dOptions(in, out, kernel)
                              .stride(stride)
                              .padding(padding));
  torch::NoGradGuard no_grad;
  torch::nn::init::orthogonal_(layer->weight, std::sqrt(2.0));
  torch::nn::init::zeros_(layer->bias);
  return layer;
}

// IMPALA's residual block: x + conv(relu(conv(relu(x)))), 3x3 convolutions
// keeping the channels and size.
class ResidualBlockImpl : public torch::nn::Module {
 public:
  explicit ResidualBlockImpl(int64_t channels)
      : conv0_(register_module("conv0",
                               OrthogonalConv(channels, channels, 3, 1, 1))),
        conv1_(register_module("conv1",
                               OrthogonalConv(channels, channels, 3, 1, 1))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    return x + conv1_->forward(torch::relu(conv0_->forward(torch::relu(x))));
  }

 private:
  torch::nn::Conv2d conv0_, conv1_;
};
TORCH_MODULE(ResidualBlock);

// Features of one image [C, H, W] after `layers` (a forward of zeros).
int64_t FlatFeatures(torch::nn::Sequential& layers,
                     const std::vector<int64_t>& chw) {
  torch::NoGradGuard no_grad;
  return layers->forward(torch::zeros({1, chw[0], chw[1], chw[2]})).numel();
}

}  // namespace

torch::nn::Linear OrthogonalLinear(int in, int out, double gain) {
  torch::nn::Linear layer(in, out);
  torch::NoGradGuard no_grad;
  torch::nn::init::orthogonal_(layer->weight, gain);
  torch::nn::init::zeros_(layer->bias);
  return layer;
}

// The CNN encoders of CleanRL's Atari (Nature) and Procgen (IMPALA) PPO:
// images [B, C, H, W] in [0, 1] -> features [B, 512] or [B, 256].
torch::nn::Sequential MakeCnnEncoder(const ActorCriticConfig& config,
                                     int64_t* features) {
  torch::nn::Sequential cnn;
  const std::vector<int64_t>& chw = config.image_chw;
  if (config.encoder == ActorCriticConfig::Encoder::kNatureCnn) {
    cnn->push_back(OrthogonalConv(chw[0], 32, 8, 4));
    cnn->push_back(torch::nn::ReLU());
    cnn->push_back(OrthogonalConv(32, 64, 4, 2));
    cnn->push_back(torch::nn::ReLU());
    cnn->push_back(OrthogonalConv(64, 64, 3, 1));
    cnn->push_back(torch::nn::ReLU());
    cnn->push_back(torch::nn::Flatten());
    *features = 512;
  } else {
    int64_t in = chw[0];
    for (int64_t out : {16, 32, 32}) {
      cnn->push_back(OrthogonalConv(in, out, 3, 1, 1));
      cnn->push_back(torch::nn::MaxPool2d(
          torch::nn::MaxPool2dOptions(3).stride(2).padding(1)));
      cnn->push_back(ResidualBlock(out));
      cnn->push_back(ResidualBlock(out));
      in = out;
    }
    cnn->push_back(torch::nn::Flatten());
    cnn->push_back(torch::nn::ReLU());
    *features = 256;
  }
  const int64_t flat = FlatFeatures(cnn, chw);
  cnn->push_back(OrthogonalLinear(flat, *features, std::sqrt(2.0)));
  cnn->push_back(torch::nn::ReLU());
  return cnn;
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
