// The encoders and cores of the policy as parts, each written once: a
// part's file holds its LibTorch layers beside its TorchScript lines and
// its ONNX nodes, and registers itself by name, as the action heads do
// (policy/action_head.h). The actor-critic composes the parts its config
// names (ActorCriticConfig::encoder, ::core), and both exports walk the
// same parts.
//   ImageEncoder   a CNN over images [B, C, H, W] in [0, 1] -> features
//                  (policy/encoders/: nature_cnn, impala_cnn)
//   RecurrentCore  a cell carrying a state per env between the trunk and
//                  the heads (policy/cores/: lstm, gru)
// What stays with the actor-critic is the composition: observation
// scaling and normalisation, reading images out of flat observations
// (HWC or CHW, per key for Dict observations), the MLP trunks and the
// value layer.
#ifndef RL_POLICY_NETWORK_PARTS_H_
#define RL_POLICY_NETWORK_PARTS_H_

#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "policy/export_writers.h"

namespace rl {

class ImageEncoder {
 public:
  virtual ~ImageEncoder() = default;
  virtual std::string name() const = 0;
  // The layers over images of `chw` ([channels, height, width]), with
  // CleanRL's initialisation; `features` gets the width of their output.
  virtual torch::nn::Sequential Make(const std::vector<int64_t>& chw,
                                     int64_t* features) const = 0;
  // The exports over the images in `x` ([B, C, H, W]) through the layers
  // Make built, registered on the policy as `prefix`: Script rewrites `x`
  // to the features; Onnx returns their value's name.
  virtual void Script(ScriptWriter& s, const std::string& prefix,
                      const std::string& x) const = 0;
  virtual std::string Onnx(OnnxWriter& g, const std::string& prefix,
                           std::string x) const = 0;
};

class RecurrentCore {
 public:
  virtual ~RecurrentCore() = default;
  virtual std::string name() const = 0;
  // Numbers of state per env for a core of `size` units.
  virtual int64_t StateSize(int64_t size) const = 0;
  // Registers the cell (inputs `in`, `size` units) on `policy`, under the
  // names checkpoints hold, with CleanRL's initialisation.
  virtual void Register(torch::nn::Module& policy, int64_t in,
                        int64_t size) = 0;
  // The input projection of features [N, in]: x W_ih^T plus the input
  // bias. The steps of a sequence take it all at once.
  virtual torch::Tensor Input(const torch::Tensor& features) = 0;
  // One step from projected inputs `xw` [B, gates] and `state` [B,
  // StateSize]: the output [B, size] the heads read; `next_state` gets the
  // state after the step.
  virtual torch::Tensor Step(const torch::Tensor& xw,
                             const torch::Tensor& state,
                             torch::Tensor* next_state) = 0;
  // The exports of one step over features `x` from the input `state`:
  // Script rewrites `x` to the output and sets next_state; Onnx returns
  // the output's name and sets `next_state` to the state's.
  virtual void Script(ScriptWriter& s, const std::string& x,
                      const std::string& state) const = 0;
  virtual std::string Onnx(OnnxWriter& g, const std::string& x,
                           const std::string& state,
                           std::string* next_state) const = 0;
};

// Adds a part to its registry (the REGISTER_ macros' calls); true.
bool RegisterImageEncoder(std::string name,
                          std::function<std::unique_ptr<ImageEncoder>()> make);
bool RegisterRecurrentCore(
    std::string name, std::function<std::unique_ptr<RecurrentCore>()> make);

// A new part by name; null for a name not registered.
std::unique_ptr<ImageEncoder> MakeImageEncoder(const std::string& name);
std::unique_ptr<RecurrentCore> MakeRecurrentCore(const std::string& name);

// The registered names, sorted.
std::vector<std::string> ImageEncoderNames();
std::vector<std::string> RecurrentCoreNames();

#define RL_NETWORK_PART_CONCAT_(a, b) a##b
#define RL_NETWORK_PART_NAME_(a, b) RL_NETWORK_PART_CONCAT_(a, b)
// Registers part class `Part` (a default constructor) as `name`. The
// library holding it is alwayslink, so that the registration is linked in.
#define REGISTER_IMAGE_ENCODER(name, Part)                                     \
  static const bool RL_NETWORK_PART_NAME_(rl_image_encoder_, __LINE__) =       \
      ::rl::RegisterImageEncoder(name,                                         \
                                 []() -> std::unique_ptr<::rl::ImageEncoder> { \
                                   return std::make_unique<Part>();            \
                                 })
#define REGISTER_RECURRENT_CORE(name, Part)                               \
  static const bool RL_NETWORK_PART_NAME_(rl_recurrent_core_, __LINE__) = \
      ::rl::RegisterRecurrentCore(                                        \
          name, []() -> std::unique_ptr<::rl::RecurrentCore> {            \
            return std::make_unique<Part>();                              \
          })

}  // namespace rl

#endif  // RL_POLICY_NETWORK_PARTS_H_
