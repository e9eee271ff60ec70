// The Nature CNN (DQN's, as CleanRL's Atari PPO): three convolutions (8x8
// stride 4, 4x4 stride 2, 3x3 stride 1; 32, 64, 64 channels) and a
// 512-unit layer, ReLU after each. Images of at least 36x36.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "policy/network_layers.h"
#include "policy/network_parts.h"

namespace rl {
namespace {

class NatureCnn : public ImageEncoder {
 public:
  std::string name() const override { return "nature_cnn"; }

  torch::nn::Sequential Make(const std::vector<int64_t>& chw,
                             int64_t* features) const override {
    torch::nn::Sequential cnn;
    cnn->push_back(OrthogonalConv(chw[0], 32, 8, 4));
    cnn->push_back(torch::nn::ReLU());
    cnn->push_back(OrthogonalConv(32, 64, 4, 2));
    cnn->push_back(torch::nn::ReLU());
    cnn->push_back(OrthogonalConv(64, 64, 3, 1));
    cnn->push_back(torch::nn::ReLU());
    cnn->push_back(torch::nn::Flatten());
    *features = 512;
    cnn->push_back(
        OrthogonalLinear(FlatFeatures(cnn, chw), *features, std::sqrt(2.0)));
    cnn->push_back(torch::nn::ReLU());
    return cnn;
  }

  void Script(ScriptWriter& s, const std::string& prefix,
              const std::string& x) const override {
    const std::string at = prefix + ".";
    s.Line(x + " = torch.relu(" + s.Conv(at + "0", x, 4, 0) + ")");
    s.Line(x + " = torch.relu(" + s.Conv(at + "2", x, 2, 0) + ")");
    s.Line(x + " = torch.relu(" + s.Conv(at + "4", x, 1, 0) + ")");
    s.Line(x + " = " + x + ".flatten(1)");
    s.Line(x + " = torch.relu(" + s.Linear(prefix, 7, x) + ")");
  }

  std::string Onnx(OnnxWriter& g, const std::string& prefix,
                   std::string x) const override {
    const std::string at = prefix + ".";
    x = g.Node("Relu", {g.Conv(at + "0", x, 4, 0)});
    x = g.Node("Relu", {g.Conv(at + "2", x, 2, 0)});
    x = g.Node("Relu", {g.Conv(at + "4", x, 1, 0)});
    x = g.Node("Flatten", {x});
    return g.Node("Relu", {g.Linear(at + "7", x)});
  }
};

REGISTER_IMAGE_ENCODER("nature_cnn", NatureCnn);

}  // namespace
}  // namespace rl
