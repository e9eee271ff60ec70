#include "policy/export_writers.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace rl {

std::string ScriptAttribute(const std::string& name) {
  return absl::StrReplaceAll(name, {{".", "_"}});
}

std::string ScriptLiteral(double v) {
  if (std::isinf(v)) return v > 0 ? "float('inf')" : "float('-inf')";
  const std::string text = absl::StrFormat("%.9g", v);
  return text.find_first_of(".e") == std::string::npos ? text + ".0" : text;
}

ScriptWriter::ScriptWriter(const torch::nn::Module& policy) {
  for (const auto& item : policy.named_parameters()) have_.insert(item.key());
  for (const auto& item : policy.named_buffers()) have_.insert(item.key());
}

std::string ScriptWriter::Ref(const std::string& name) {
  if (have_.count(name) == 0) missing_.push_back(name);
  return "self." + ScriptAttribute(name);
}

void ScriptWriter::Line(const std::string& line) {
  absl::StrAppend(&text_, "    ", line, "\n");
}

std::string ScriptWriter::Linear(const std::string& prefix, int index,
                                 const std::string& x) {
  return Linear(absl::StrCat(prefix, ".", index), x);
}

std::string ScriptWriter::Linear(const std::string& name,
                                 const std::string& x) {
  return absl::StrCat("torch.linear(", x, ", ", Ref(name + ".weight"), ", ",
                      Ref(name + ".bias"), ")");
}

std::string ScriptWriter::Conv(const std::string& name, const std::string& x,
                               int stride, int padding) {
  return absl::StrCat("torch.conv2d(", x, ", ", Ref(name + ".weight"), ", ",
                      Ref(name + ".bias"), ", [", stride, ", ", stride, "], [",
                      padding, ", ", padding, "])");
}

OnnxWriter::OnnxWriter(const torch::nn::Module& policy, onnx::GraphProto* graph)
    : graph_(graph) {
  for (const auto& item : policy.named_parameters()) {
    tensors_[item.key()] = item.value();
  }
  for (const auto& item : policy.named_buffers()) {
    tensors_[item.key()] = item.value();
  }
}

std::string OnnxWriter::Weight(const std::string& name) {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    missing_.push_back(name);
    return Constant(torch::zeros({1}));
  }
  if (added_.insert(name).second) Add(name, it->second);
  return name;
}

std::string OnnxWriter::Constant(const torch::Tensor& t) {
  const std::string name = absl::StrCat("const_", next_++);
  Add(name, t);
  return name;
}

std::string OnnxWriter::Scalar(float v) { return Constant(torch::tensor({v})); }

std::string OnnxWriter::Ints(const std::vector<int64_t>& v) {
  return Constant(torch::tensor(v, torch::kInt64));
}

std::vector<std::string> OnnxWriter::Nodes(
    const std::string& op, const std::vector<std::string>& inputs, int outputs,
    const std::function<void(onnx::NodeProto*)>& attrs) {
  onnx::NodeProto* node = graph_->add_node();
  node->set_op_type(op);
  node->set_name(absl::StrCat(op, "_", next_));
  for (const std::string& in : inputs) node->add_input(in);
  std::vector<std::string> names;
  for (int i = 0; i < outputs; ++i) {
    names.push_back(absl::StrCat(op, "_", next_++));
    node->add_output(names.back());
  }
  if (attrs) attrs(node);
  return names;
}

std::string OnnxWriter::Node(
    const std::string& op, const std::vector<std::string>& inputs,
    const std::function<void(onnx::NodeProto*)>& attrs) {
  return Nodes(op, inputs, 1, attrs)[0];
}

void OnnxWriter::Rename(const std::string& name, const std::string& to) {
  for (auto& node : *graph_->mutable_node()) {
    for (auto& out : *node.mutable_output()) {
      if (out == name) out = to;
    }
  }
}

std::string OnnxWriter::Linear(const std::string& prefix,
                               const std::string& x) {
  return Gemm(x, prefix + ".weight", prefix + ".bias");
}

std::string OnnxWriter::Gemm(const std::string& x, const std::string& weight,
                             const std::string& bias) {
  return Node("Gemm", {x, Weight(weight), Weight(bias)},
              [](onnx::NodeProto* n) { IntAttr(n, "transB", 1); });
}

std::string OnnxWriter::Conv(const std::string& prefix, const std::string& x,
                             int64_t stride, int64_t padding) {
  return Node("Conv", {x, Weight(prefix + ".weight"), Weight(prefix + ".bias")},
              [&](onnx::NodeProto* n) {
                IntsAttr(n, "strides", {stride, stride});
                IntsAttr(n, "pads", {padding, padding, padding, padding});
              });
}

std::string OnnxWriter::Columns(const std::string& x, int64_t begin,
                                int64_t end) {
  return Node("Slice", {x, Ints({begin}), Ints({end}), Ints({1})});
}

std::string OnnxWriter::Bool(const std::string& x) {
  return Node("Cast", {x}, [](onnx::NodeProto* n) {
    IntAttr(n, "to", onnx::TensorProto::BOOL);
  });
}

void OnnxWriter::IntAttr(onnx::NodeProto* n, const std::string& name,
                         int64_t v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void OnnxWriter::IntsAttr(onnx::NodeProto* n, const std::string& name,
                          const std::vector<int64_t>& v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

void OnnxWriter::FloatAttr(onnx::NodeProto* n, const std::string& name,
                           float v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

void OnnxWriter::Add(const std::string& name, const torch::Tensor& value) {
  const torch::Tensor t = value.detach().cpu().contiguous();
  onnx::TensorProto* init = graph_->add_initializer();
  init->set_name(name);
  for (int64_t d : t.sizes()) init->add_dims(d);
  const bool ints = t.scalar_type() == torch::kInt64;
  init->set_data_type(ints ? onnx::TensorProto::INT64
                           : onnx::TensorProto::FLOAT);
  const torch::Tensor data = ints ? t : t.to(torch::kFloat32).contiguous();
  init->set_raw_data(data.data_ptr(), data.numel() * data.element_size());
}

}  // namespace rl
