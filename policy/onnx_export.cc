#include "policy/onnx_export.h"

#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "policy/export_writers.h"
#include "policy/torch_status.h"
#include "third_party/onnx/onnx.pb.h"

namespace rl {
namespace {

using Graph = OnnxWriter;

// A graph input or output: `elem` of shape `dims` ("B" the batch).
void Value(onnx::ValueInfoProto* v, const std::string& name, int elem,
           const std::vector<std::string>& dims) {
  v->set_name(name);
  onnx::TypeProto::Tensor* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem);
  for (const std::string& d : dims) {
    onnx::TensorShapeProto::Dimension* dim = t->mutable_shape()->add_dim();
    if (d == "B") {
      dim->set_dim_param("B");
    } else {
      dim->set_dim_value(std::stoll(d));
    }
  }
}

// The hidden layers of trunk `prefix` over `x`.
std::string Trunk(Graph& g, const ActorCriticConfig& c,
                  const std::string& prefix, std::string x) {
  const char* act =
      c.activation == ActorCriticConfig::Activation::kRelu ? "Relu" : "Tanh";
  for (size_t i = 0; i < c.hidden_sizes.size(); ++i) {
    x = g.Node(act, {g.Linear(absl::StrCat(prefix, ".", 2 * i), x)});
  }
  return x;
}

// The CNN encoder `prefix` (policy->image_encoder()) over flat images `x`
// of `chw`.
std::string Encoder(Graph& g, const ImageEncoder& cnn,
                    const ActorCriticConfig& c, const std::string& prefix,
                    const std::vector<int64_t>& chw, std::string x) {
  if (c.channels_last) {
    x = g.Node("Reshape", {x, g.Ints({-1, chw[1], chw[2], chw[0]})});
    x = g.Node("Transpose", {x}, [](onnx::NodeProto* n) {
      Graph::IntsAttr(n, "perm", {0, 3, 1, 2});
    });
  } else {
    x = g.Node("Reshape", {x, g.Ints({-1, chw[0], chw[1], chw[2]})});
  }
  return cnn.Onnx(g, prefix, x);
}

// The encoder over `x`: a CNN, or per key (a CNN per image part, the other
// parts as they are, concatenated), as ActorCriticImpl::Trunks reads it.
std::string Encoders(Graph& g, const ImageEncoder& cnn,
                     const ActorCriticConfig& c, const std::string& x) {
  if (c.observation_parts.empty()) {
    return Encoder(g, cnn, c, "encoder", c.image_chw, x);
  }
  std::vector<std::string> features;
  for (size_t k = 0; k < c.observation_parts.size(); ++k) {
    const auto& part = c.observation_parts[k];
    std::string f = g.Columns(x, part.offset, part.offset + part.size);
    if (part.image()) {
      f = Encoder(g, cnn, c, absl::StrCat("encoder_", k),
                  PartImageChw(part, c.channels_last), f);
    }
    features.push_back(f);
  }
  return g.Node("Concat", features,
                [](onnx::NodeProto* n) { Graph::IntAttr(n, "axis", 1); });
}

// A central critic's input (rl::CentralInput) of the features `x` [B, F]:
// each row its copy's agents, its own first; `x` itself without one. Any
// batch: row i's partners are rows i - i % A + (i + j) % A, and those past
// the last row (an incomplete last copy) read zeros; the actions never
// depend on them.
std::string CentralInput(Graph& g, ActorCriticImpl& policy,
                         const std::string& x) {
  const int64_t agents = policy.config().central_value_agents;
  if (agents <= 1) return x;
  // A x F: what the value trunk's first layer (or, with none or after a
  // core, the value head) takes.
  const auto params = policy.named_parameters();
  const int64_t width =
      policy.config().hidden_sizes.empty() || policy.recurrent()
          ? params["value_head.weight"].size(1)
          : params["value_trunk.0.weight"].size(1);
  const auto scalar = [&](int64_t v) {
    return g.Constant(torch::tensor(v, torch::kInt64));
  };
  const std::string rows = g.Node(
      "Squeeze",
      {g.Node("Gather", {g.Node("Shape", {x}), g.Ints({0})}), g.Ints({0})});
  const std::string i = g.Node("Range", {scalar(0), rows, scalar(1)});
  const std::string a = scalar(agents);
  const std::string first = g.Node("Sub", {i, g.Node("Mod", {i, a})});
  const std::string padded = g.Node(
      "Concat", {x, g.Constant(torch::zeros({agents - 1, width / agents}))},
      [](onnx::NodeProto* n) { Graph::IntAttr(n, "axis", 0); });
  std::vector<std::string> parts;
  for (int64_t j = 0; j < agents; ++j) {
    const std::string partner = g.Node(
        "Add", {first, g.Node("Mod", {g.Node("Add", {i, scalar(j)}), a})});
    parts.push_back(g.Node("Gather", {padded, partner}, [](onnx::NodeProto* n) {
      Graph::IntAttr(n, "axis", 0);
    }));
  }
  return g.Node("Concat", parts,
                [](onnx::NodeProto* n) { Graph::IntAttr(n, "axis", 1); });
}

}  // namespace

absl::StatusOr<std::string> OnnxModel(ActorCritic& policy, const EnvSpec& env,
                                      const PolicyExportOptions& options) {
  return CatchTorchErrors(
      "writing the ONNX model", [&]() -> absl::StatusOr<std::string> {
        torch::NoGradGuard no_grad;
        const ActorCriticConfig& c = policy->config();
        onnx::ModelProto model;
        model.set_ir_version(8);
        model.set_producer_name("rl_service");
        onnx::OperatorSetIdProto* opset = model.add_opset_import();
        opset->set_domain("");
        opset->set_version(17);
        onnx::GraphProto* graph = model.mutable_graph();
        graph->set_name("rl_policy");
        Graph g(*policy, graph);

        // Inputs.
        std::vector<std::string> obs_dims = {"B"};
        if (env.observation_shape_size() > 0) {
          for (int d : env.observation_shape()) {
            obs_dims.push_back(absl::StrCat(d));
          }
        } else {
          obs_dims.push_back(absl::StrCat(c.observation_size));
        }
        Value(graph->add_input(), "obs",
              c.byte_observations ? onnx::TensorProto::UINT8
                                  : onnx::TensorProto::FLOAT,
              obs_dims);
        int64_t mask_size = c.num_actions;
        for (const int64_t n : c.action_nvec) mask_size += n;
        if (c.action_masks) {
          Value(graph->add_input(), "mask", onnx::TensorProto::UINT8,
                {"B", absl::StrCat(mask_size)});
        }
        const int64_t state_size = policy->state_size();
        if (state_size > 0) {
          Value(graph->add_input(), "state", onnx::TensorProto::FLOAT,
                {"B", absl::StrCat(state_size)});
        }

        // Observations -> features, as NormalizeObservations and Trunks.
        std::string x = g.Node("Flatten", {"obs"});
        x = g.Node("Cast", {x}, [](onnx::NodeProto* n) {
          Graph::IntAttr(n, "to", onnx::TensorProto::FLOAT);
        });
        if (c.byte_observations) {
          x = g.Node("Mul", {x, g.Scalar(1.0f / 255.0f)});
        } else if (policy->named_buffers().contains("obs_scale")) {
          // The uint8 parts of a float Dict observation.
          x = g.Node("Mul", {x, g.Weight("obs_scale")});
        }
        if (c.normalize_observations) {
          const torch::Tensor mean = policy->named_buffers()["obs_mean"];
          const torch::Tensor var = policy->named_buffers()["obs_var"];
          x = g.Node("Mul", {g.Node("Sub", {x, g.Constant(mean)}),
                             g.Constant(torch::rsqrt(var + 1e-8))});
          x = g.Node("Clip", {x, g.Constant(torch::tensor(-c.observation_clip)),
                              g.Constant(torch::tensor(c.observation_clip))});
        }
        if (policy->image_encoder() != nullptr) {
          x = Encoders(g, *policy->image_encoder(), c, x);
        }
        std::string p = Trunk(g, c, "policy_trunk", x);
        std::string v;
        std::string next_state;
        if (state_size > 0) {
          p = policy->core()->Onnx(g, p, "state", &next_state);
          // A central critic reads the copy's core outputs.
          v = CentralInput(g, *policy, p);
        } else {
          v = c.shared_trunk
                  ? p
                  : Trunk(g, c, "value_trunk", CentralInput(g, *policy, x));
        }

        // Heads.
        const std::string out = g.Linear("policy_head", p);
        const std::string value =
            g.Node("Squeeze", {g.Linear("value_head", v), g.Ints({1})});
        const std::string action = policy->head().Onnx(g, out, options.sampled);
        if (!g.missing().empty()) {
          return absl::InvalidArgumentError(
              absl::StrCat("the policy lacks tensors its config needs: ",
                           absl::StrJoin(g.missing(), ", ")));
        }

        // Outputs, named as the sidecar says.
        g.Rename(action, "actions");
        g.Rename(value, "values");
        const HeadActions actions = policy->head().Actions();
        Value(graph->add_output(), "actions",
              actions.dtype == "int64" ? onnx::TensorProto::INT64
                                       : onnx::TensorProto::FLOAT,
              actions.shape);
        Value(graph->add_output(), "values", onnx::TensorProto::FLOAT, {"B"});
        if (state_size > 0) {
          // A state that is also the output the heads read (a GRU's) is
          // copied out; an LSTM's is a Concat of its own.
          const std::string named =
              next_state == p ? g.Node("Identity", {next_state}) : next_state;
          g.Rename(named, "next_state");
          Value(graph->add_output(), "next_state", onnx::TensorProto::FLOAT,
                {"B", absl::StrCat(state_size)});
        }
        std::string bytes;
        if (!model.SerializeToString(&bytes)) {
          return absl::InternalError("cannot serialize the ONNX model");
        }
        return bytes;
      });
}

absl::Status ExportOnnx(ActorCritic& policy, const EnvSpec& env,
                        const PolicyExportOptions& options,
                        const std::string& path) {
  ASSIGN_OR_RETURN(const std::string model, OnnxModel(policy, env, options));
  std::ofstream file(path, std::ios::binary);
  file << model;
  file.close();
  if (!file) return absl::InternalError(absl::StrCat("cannot write ", path));
  std::ofstream sidecar(path + ".json");
  sidecar << PolicySidecar(policy, env, options, "onnx");
  sidecar.close();
  if (!sidecar) {
    return absl::InternalError(
        absl::StrCat("cannot write the sidecar ", path, ".json"));
  }
  return absl::OkStatus();
}

}  // namespace rl
