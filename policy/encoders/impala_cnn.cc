// The IMPALA CNN (as CleanRL's Procgen PPO): three stacks of a 3x3
// convolution (16, 32, 32 channels), a 3x3 stride-2 max-pool and two
// residual blocks, then ReLU and a 256-unit layer. Any image size.
#include <torch/nn/modules/pooling.h>

#include <cmath>

#include "absl/strings/str_cat.h"
#include "policy/network_layers.h"
#include "policy/network_parts.h"

namespace rl {
namespace {

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

constexpr int64_t kChannels[] = {16, 32, 32};

class ImpalaCnn : public ImageEncoder {
 public:
  std::string name() const override { return "impala_cnn"; }

  torch::nn::Sequential Make(const std::vector<int64_t>& chw,
                             int64_t* features) const override {
    torch::nn::Sequential cnn;
    int64_t in = chw[0];
    for (const int64_t out : kChannels) {
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
    cnn->push_back(
        OrthogonalLinear(FlatFeatures(cnn, chw), *features, std::sqrt(2.0)));
    cnn->push_back(torch::nn::ReLU());
    return cnn;
  }

  void Script(ScriptWriter& s, const std::string& prefix,
              const std::string& x) const override {
    const std::string at = prefix + ".";
    for (int stack = 0; stack < 3; ++stack) {
      const int base = 4 * stack;
      s.Line(x + " = " + s.Conv(absl::StrCat(at, base), x, 1, 1));
      s.Line(x + " = torch.max_pool2d(" + x + ", [3, 3], [2, 2], [1, 1])");
      for (int block = 1; block <= 2; ++block) {
        const std::string b = absl::StrCat(at, base + 1 + block);
        s.Line("r = " + s.Conv(b + ".conv0", "torch.relu(" + x + ")", 1, 1));
        s.Line(x + " = " + x + " + " +
               s.Conv(b + ".conv1", "torch.relu(r)", 1, 1));
      }
    }
    s.Line(x + " = torch.relu(" + x + ".flatten(1))");
    s.Line(x + " = torch.relu(" + s.Linear(prefix, 14, x) + ")");
  }

  std::string Onnx(OnnxWriter& g, const std::string& prefix,
                   std::string x) const override {
    const std::string at = prefix + ".";
    for (int stack = 0; stack < 3; ++stack) {
      const int base = 4 * stack;
      x = g.Conv(absl::StrCat(at, base), x, 1, 1);
      x = g.Node("MaxPool", {x}, [](onnx::NodeProto* n) {
        OnnxWriter::IntsAttr(n, "kernel_shape", {3, 3});
        OnnxWriter::IntsAttr(n, "strides", {2, 2});
        OnnxWriter::IntsAttr(n, "pads", {1, 1, 1, 1});
      });
      for (int block = 1; block <= 2; ++block) {
        const std::string b = absl::StrCat(at, base + 1 + block);
        const std::string r = g.Conv(b + ".conv0", g.Node("Relu", {x}), 1, 1);
        x = g.Node("Add", {x, g.Conv(b + ".conv1", g.Node("Relu", {r}), 1, 1)});
      }
    }
    x = g.Node("Relu", {g.Node("Flatten", {x})});
    return g.Node("Relu", {g.Linear(at + "14", x)});
  }
};

REGISTER_IMAGE_ENCODER("impala_cnn", ImpalaCnn);

}  // namespace
}  // namespace rl
