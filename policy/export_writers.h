// The two writers every exported network part emits into, so that a part
// (policy/action_head.h's heads, the encoders and cores of
// policy_export.cc and onnx_export.cc) holds its LibTorch module, its
// TorchScript source and its ONNX nodes side by side:
//   ScriptWriter  the lines of the TorchScript module's forward(), naming
//                 the policy's tensors as self.<name> attributes;
//   OnnxWriter    the nodes and initializers of an ONNX graph (opset 17).
// Both note a tensor that the config needs and the weights lack; the
// exporters turn that into INVALID_ARGUMENT.
#ifndef RL_POLICY_EXPORT_WRITERS_H_
#define RL_POLICY_EXPORT_WRITERS_H_

#include <torch/nn/module.h>
#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "third_party/onnx/onnx.pb.h"

namespace rl {

// A parameter or buffer of the policy as the exported module names it
// ("policy_head.weight" -> "policy_head_weight").
std::string ScriptAttribute(const std::string& name);

// A float literal that TorchScript reads back to the same float32.
std::string ScriptLiteral(double v);

class ScriptWriter {
 public:
  // `policy`: the module whose parameters and buffers the source names.
  explicit ScriptWriter(const torch::nn::Module& policy);

  // self.<name> of the policy's tensor `name`.
  std::string Ref(const std::string& name);
  // One line of forward()'s body.
  void Line(const std::string& line);
  // torch.linear over the Sequential `prefix`'s Linear at `index`.
  std::string Linear(const std::string& prefix, int index,
                     const std::string& x);
  // torch.linear over the Linear module `name`.
  std::string Linear(const std::string& name, const std::string& x);
  std::string Conv(const std::string& name, const std::string& x, int stride,
                   int padding);

  const std::vector<std::string>& missing() const { return missing_; }
  const std::string& text() const { return text_; }

 private:
  std::set<std::string> have_;
  std::vector<std::string> missing_;
  std::string text_;
};

class OnnxWriter {
 public:
  OnnxWriter(const torch::nn::Module& policy, onnx::GraphProto* graph);

  // The policy's tensor `name` as an initializer (noted if missing).
  std::string Weight(const std::string& name);
  // A float32 or int64 tensor as an initializer of a new name.
  std::string Constant(const torch::Tensor& t);
  std::string Scalar(float v);
  std::string Ints(const std::vector<int64_t>& v);

  // A node of `op` over `inputs` with `outputs` outputs, whose attributes
  // `attrs` fills; Node is the one-output case.
  std::vector<std::string> Nodes(
      const std::string& op, const std::vector<std::string>& inputs,
      int outputs,
      const std::function<void(onnx::NodeProto*)>& attrs = nullptr);
  std::string Node(
      const std::string& op, const std::vector<std::string>& inputs,
      const std::function<void(onnx::NodeProto*)>& attrs = nullptr);
  // Renames the output of the node that made `name` to `to` (a graph
  // output).
  void Rename(const std::string& name, const std::string& to);

  // y = x W^T + b of the policy's Linear `prefix`.
  std::string Linear(const std::string& prefix, const std::string& x);
  std::string Gemm(const std::string& x, const std::string& weight,
                   const std::string& bias);
  std::string Conv(const std::string& prefix, const std::string& x,
                   int64_t stride, int64_t padding);
  // The columns [begin, end) of a [B, n] tensor.
  std::string Columns(const std::string& x, int64_t begin, int64_t end);
  // A float32 [B, ...] tensor cast to bool.
  std::string Bool(const std::string& x);

  static void IntAttr(onnx::NodeProto* n, const std::string& name, int64_t v);
  static void IntsAttr(onnx::NodeProto* n, const std::string& name,
                       const std::vector<int64_t>& v);
  static void FloatAttr(onnx::NodeProto* n, const std::string& name, float v);

  const std::vector<std::string>& missing() const { return missing_; }

 private:
  void Add(const std::string& name, const torch::Tensor& value);

  onnx::GraphProto* graph_;
  std::map<std::string, torch::Tensor> tensors_;
  std::set<std::string> added_;
  std::vector<std::string> missing_;
  int next_ = 0;
};

}  // namespace rl

#endif  // RL_POLICY_EXPORT_WRITERS_H_
