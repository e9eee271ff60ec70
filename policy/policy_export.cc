#include "policy/policy_export.h"

#include <torch/script.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json_quote.h"
#include "common/status.h"
#include "policy/export_writers.h"
#include "policy/torch_status.h"

namespace rl {
namespace {

using Source = ScriptWriter;

// The hidden layers of trunk `prefix` over variable `x` (in place).
void Trunk(Source& s, const ActorCriticConfig& c, const std::string& prefix,
           const std::string& x) {
  const char* act =
      c.activation == ActorCriticConfig::Activation::kRelu ? "relu" : "tanh";
  for (size_t i = 0; i < c.hidden_sizes.size(); ++i) {
    s.Line(absl::StrCat(x, " = torch.", act, "(",
                        s.Linear(prefix, static_cast<int>(2 * i), x), ")"));
  }
}

// The CNN encoder `prefix` (policy->image_encoder()) over flat images `x`
// of `chw` (in place).
void Encoder(Source& s, const ImageEncoder& cnn, const ActorCriticConfig& c,
             const std::string& prefix, const std::vector<int64_t>& chw,
             const std::string& x) {
  s.Line(c.channels_last
             ? absl::StrCat(x, " = ", x, ".reshape([", x, ".size(0), ", chw[1],
                            ", ", chw[2], ", ", chw[0],
                            "]).permute([0, 3, 1, 2]).contiguous()")
             : absl::StrCat(x, " = ", x, ".reshape([", x, ".size(0), ", chw[0],
                            ", ", chw[1], ", ", chw[2], "])"));
  cnn.Script(s, prefix, x);
}

// The encoder over `x`: a CNN, or per key (a CNN per image part, the other
// parts as they are, concatenated), as ActorCriticImpl::Trunks reads it.
void Encoders(Source& s, const ImageEncoder& cnn, const ActorCriticConfig& c) {
  if (c.observation_parts.empty()) {
    Encoder(s, cnn, c, "encoder", c.image_chw, "x");
    return;
  }
  std::vector<std::string> features;
  for (size_t k = 0; k < c.observation_parts.size(); ++k) {
    const auto& part = c.observation_parts[k];
    const std::string f = absl::StrCat("f", k);
    s.Line(absl::StrCat(f, " = x[:, ", part.offset, ":",
                        part.offset + part.size, "]"));
    if (part.image()) {
      Encoder(s, cnn, c, absl::StrCat("encoder_", k),
              PartImageChw(part, c.channels_last), f);
    }
    features.push_back(f);
  }
  s.Line("x = torch.cat([" + absl::StrJoin(features, ", ") + "], 1)");
}

}  // namespace

absl::StatusOr<std::string> PolicySource(ActorCritic& policy,
                                         const EnvSpec& env,
                                         const PolicyExportOptions& options) {
  const ActorCriticConfig& c = policy->config();
  Source s(*policy);
  s.Line("x = obs.reshape([obs.size(0), -1]).float()");
  if (c.byte_observations) {
    s.Line("x = x * " + ScriptLiteral(1.0f / 255.0f));  // as FloatObservations
  } else {
    for (const auto& part : c.observation_parts) {
      if (part.bytes) {  // the uint8 parts of a float vector
        s.Line("x = x * " + s.Ref("obs_scale"));
        break;
      }
    }
  }
  if (c.normalize_observations) {
    s.Line(absl::StrCat("x = torch.clamp((x - ", s.Ref("obs_mean"),
                        ") * torch.rsqrt(", s.Ref("obs_var"), " + 1e-08), ",
                        ScriptLiteral(-c.observation_clip), ", ",
                        ScriptLiteral(c.observation_clip), ")"));
  }
  if (policy->image_encoder() != nullptr) {
    Encoders(s, *policy->image_encoder(), c);
  }
  s.Line("p = x");
  Trunk(s, c, "policy_trunk", "p");
  const int64_t state_size = policy->state_size();
  if (policy->core() != nullptr) policy->core()->Script(s, "p", "state");
  // v = CentralInput of `from` on any batch: row i's partners are rows
  // i - i % A + (i + j) % A, those past the last row (an incomplete last
  // copy) zeros; the actions never depend on them.
  const auto central_input = [&](const std::string& from) {
    const int64_t agents = c.central_value_agents;
    s.Line(absl::StrCat("ci = torch.arange(", from, ".size(0), device=", from,
                        ".device)"));
    s.Line(absl::StrCat("cf = ci - ci % ", agents));
    s.Line(absl::StrCat("cx = torch.cat([", from, ", torch.zeros([", agents - 1,
                        ", ", from, ".size(1)], device=", from,
                        ".device)], 0)"));
    std::vector<std::string> parts;
    for (int64_t j = 0; j < agents; ++j) {
      parts.push_back(absl::StrCat("cx.index_select(0, cf + (ci + ", j, ") % ",
                                   agents, ")"));
    }
    s.Line("v = torch.cat([" + absl::StrJoin(parts, ", ") + "], 1)");
  };
  const bool central = c.central_value_agents > 1;
  if (policy->config().shared_trunk) {
    // With a core, a central critic reads the copy's core outputs.
    if (central) {
      central_input("p");
    } else {
      s.Line("v = p");
    }
  } else {
    if (central) {
      central_input("x");
    } else {
      s.Line("v = x");
    }
    Trunk(s, c, "value_trunk", "v");
  }
  s.Line("out = " + s.Linear("policy_head", "p"));
  s.Line("value = " + s.Linear("value_head", "v") + ".squeeze(-1)");
  policy->head().Script(s, "out", options.sampled);
  s.Line(state_size > 0 ? "return action, value, next_state"
                        : "return action, value");
  if (!s.missing().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the policy lacks tensors its config needs: ",
                     absl::StrJoin(s.missing(), ", ")));
  }
  return absl::StrCat(
      "def forward(self, obs: Tensor", c.action_masks ? ", mask: Tensor" : "",
      state_size > 0 ? ", state: Tensor) -> Tuple[Tensor, Tensor, Tensor]"
                     : ") -> Tuple[Tensor, Tensor]",
      ":\n", s.text());
}

std::string PolicySidecar(ActorCritic& policy, const EnvSpec& env,
                          const PolicyExportOptions& options,
                          const std::string& format) {
  const ActorCriticConfig& c = policy->config();
  auto tensor = [](const std::string& name, const std::string& dtype,
                   const std::vector<std::string>& shape,
                   const std::string& what) {
    std::vector<std::string> dims;
    // The batch is "B"; sizes are numbers.
    for (const std::string& d : shape) {
      dims.push_back(d == "B" ? JsonQuote(d) : d);
    }
    return absl::StrCat("{\"name\": ", JsonQuote(name),
                        ", \"dtype\": ", JsonQuote(dtype), ", \"shape\": [",
                        absl::StrJoin(dims, ", "),
                        "], \"description\": ", JsonQuote(what), "}");
  };
  std::vector<std::string> obs_shape = {"B"};
  if (env.observation_shape_size() > 0) {
    for (int d : env.observation_shape()) obs_shape.push_back(absl::StrCat(d));
  } else {
    obs_shape.push_back(absl::StrCat(c.observation_size));
  }
  std::vector<std::string> inputs = {
      tensor("obs", c.byte_observations ? "uint8" : "float32", obs_shape,
             absl::StrCat("raw observations (also accepted flat: [B, ",
                          c.observation_size, "])"))};
  int64_t mask_size = c.num_actions;
  for (const int64_t n : c.action_nvec) mask_size += n;
  if (c.action_masks) {
    inputs.push_back(tensor("mask", "uint8", {"B", absl::StrCat(mask_size)},
                            "1 = the action is allowed (each part's choices "
                            "in turn for MultiDiscrete)"));
  }
  const int64_t state_size = policy->state_size();
  const std::string state_dims = absl::StrCat(state_size);
  if (state_size > 0) {
    inputs.push_back(tensor(
        "state", "float32", {"B", state_dims},
        absl::StrCat("the recurrent state before this step: zeros where an "
                     "episode starts, else the last step's next_state",
                     c.core == ActorCriticConfig::Core::kLstm
                         ? " (the LSTM's hidden, then cell state)"
                         : "")));
  }
  const HeadActions head = policy->head().Actions();
  const std::string action =
      tensor("actions", head.dtype, head.shape, head.description);
  // A Dict or Tuple observation's parts, where they lie in `obs`.
  std::vector<std::string> parts;
  for (const auto& part : c.observation_parts) {
    parts.push_back(absl::StrCat(
        "{\"name\": ", JsonQuote(part.name), ", \"offset\": ", part.offset,
        ", \"size\": ", part.size, ", \"shape\": [",
        absl::StrJoin(part.shape, ", "),
        "], \"dtype\": ", JsonQuote(part.bytes ? "uint8" : "float32"), "}"));
  }
  const std::string observation_parts =
      parts.empty() ? ""
                    : absl::StrCat(",\n  \"observation_parts\": [\n    ",
                                   absl::StrJoin(parts, ",\n    "), "\n  ]");
  return absl::StrCat(
      "{\n  \"format\": ", JsonQuote(format),
      ",\n  \"env_id\": ", JsonQuote(env.id()),
      format == "torchscript" ? ",\n  \"method\": \"forward\"" : "",
      ",\n  \"actions\": ",
      JsonQuote(options.sampled ? "sampled" : "deterministic"),
      ",\n  \"inputs\": [\n    ", absl::StrJoin(inputs, ",\n    "), "\n  ]",
      observation_parts, ",\n  \"outputs\": [\n    ", action, ",\n    ",
      tensor("values", "float32", {"B"},
             c.central_value_agents > 1
                 ? absl::StrCat(
                       "the central critic's value estimate: rows of whole "
                       "copies of ",
                       c.central_value_agents,
                       " agents (agent k of copy c is row c x ",
                       c.central_value_agents,
                       " + k); a row of an incomplete last copy reads zeros "
                       "for its missing agents")
                 : "the value estimate V(obs)"),
      state_size > 0
          ? absl::StrCat(",\n    ",
                         tensor("next_state", "float32", {"B", state_dims},
                                "the state after this step, for the next one"))
          : "",
      "\n  ]\n}\n");
}

absl::Status ExportTorchScript(ActorCritic& policy, const EnvSpec& env,
                               const PolicyExportOptions& options,
                               const std::string& path) {
  ASSIGN_OR_RETURN(const std::string source,
                   PolicySource(policy, env, options));
  const ActorCriticConfig& c = policy->config();
  return CatchTorchErrors("exporting the policy", [&]() -> absl::Status {
    torch::jit::Module module("rl_policy");
    torch::NoGradGuard no_grad;
    for (const auto& item : policy->named_parameters()) {
      module.register_parameter(ScriptAttribute(item.key()),
                                item.value().detach().cpu().clone(), false);
    }
    for (const auto& item : policy->named_buffers()) {
      module.register_buffer(ScriptAttribute(item.key()),
                             item.value().detach().cpu().clone());
    }
    // How many numbers of state per env the caller carries (0: none).
    module.register_attribute("state_size", c10::IntType::get(),
                              policy->state_size());
    module.define(source);
    module.eval();

    // The check: 256 observations (and masks) through both.
    torch::manual_seed(0);
    const int64_t batch = 256 * std::max(1, c.central_value_agents);
    const torch::Tensor obs =
        c.byte_observations
            ? torch::randint(0, 256, {batch, c.observation_size}, torch::kUInt8)
            : torch::randn({batch, c.observation_size}) * 2;
    std::vector<torch::jit::IValue> inputs = {obs};
    torch::Tensor masks;
    if (c.action_masks) {
      int64_t n = c.num_actions;
      for (const int64_t k : c.action_nvec) n += k;
      masks = torch::randint(0, 2, {batch, n}, torch::kUInt8);
      // At least one allowed choice per part: the first of each.
      int64_t at = 0;
      for (const int64_t k : c.action_nvec.empty()
                                 ? std::vector<int64_t>{c.num_actions}
                                 : c.action_nvec) {
        masks.select(1, at).fill_(1);
        at += k;
      }
      inputs.push_back(masks);
    }
    torch::Tensor state;
    if (policy->recurrent()) {
      state = torch::randn({batch, policy->state_size()}) * 0.5;
      inputs.push_back(state);
    }
    const auto out = module.forward(inputs).toTuple();
    const torch::Tensor actions = out->elements()[0].toTensor();
    const torch::Tensor values = out->elements()[1].toTensor();
    const PolicyStep want = policy->Act(obs, c10::nullopt, true, masks,
                                        state.defined() ? &state : nullptr);
    if (state.defined()) {
      const double state_error =
          (out->elements()[2].toTensor() - state).abs().max().item<double>();
      if (!(state_error <= 1e-4)) {
        return absl::InternalError(absl::StrCat(
            "the exported module's next state differs from the policy's by ",
            state_error));
      }
    }
    const double value_error =
        (values - want.values).abs().max().item<double>();
    if (!(value_error <= 1e-4)) {
      return absl::InternalError(absl::StrCat(
          "the exported module's values differ from the policy's by ",
          value_error));
    }
    if (!options.sampled) {
      torch::Tensor expected = want.actions;
      if (c.action_size > 0) {
        expected = expected.clamp(env.action_low(), env.action_high());
      }
      const double action_error =
          (actions.to(torch::kFloat64) - expected.to(torch::kFloat64))
              .abs()
              .max()
              .item<double>();
      if (!(action_error <= 1e-4)) {
        return absl::InternalError(absl::StrCat(
            "the exported module's actions differ from the policy's by ",
            action_error));
      }
    }
    module.save(path);
    std::ofstream sidecar(path + ".json");
    sidecar << PolicySidecar(policy, env, options);
    sidecar.close();
    if (!sidecar) {
      return absl::InternalError(
          absl::StrCat("cannot write the sidecar ", path, ".json"));
    }
    return absl::OkStatus();
  });
}

struct ExportedPolicy::Module {
  torch::jit::Module module;
  int64_t state_size = 0;
};

ExportedPolicy::ExportedPolicy(std::unique_ptr<Module> module)
    : module_(std::move(module)) {}
ExportedPolicy::~ExportedPolicy() = default;

absl::StatusOr<std::unique_ptr<ExportedPolicy>> ExportedPolicy::Load(
    const std::string& path) {
  auto module = std::make_unique<Module>();
  // LibTorch's message without its C++ backtrace (torch_status.h).
  RETURN_IF_ERROR(CatchTorchErrors(
      absl::StrCat(path, ": not a TorchScript module"),
      [&] { module->module = torch::jit::load(path); },
      absl::StatusCode::kInvalidArgument));
  if (!module->module.find_method("forward")) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": the module has no forward method"));
  }
  module->module.eval();
  // Files from before recurrent policies have no state_size.
  if (module->module.hasattr("state_size")) {
    module->state_size = module->module.attr("state_size").toInt();
  }
  return std::unique_ptr<ExportedPolicy>(new ExportedPolicy(std::move(module)));
}

int64_t ExportedPolicy::state_size() const { return module_->state_size; }

absl::StatusOr<std::pair<torch::Tensor, torch::Tensor>> ExportedPolicy::Act(
    const torch::Tensor& observations, const torch::Tensor& masks,
    torch::Tensor* state) const {
  if (module_->state_size > 0 && (state == nullptr || !state->defined())) {
    return absl::InvalidArgumentError(
        absl::StrCat("state: the exported policy is recurrent: it takes a "
                     "state of ",
                     module_->state_size, " numbers per env"));
  }
  try {
    std::vector<torch::jit::IValue> inputs = {observations};
    if (masks.defined()) inputs.push_back(masks);
    if (module_->state_size > 0) inputs.push_back(*state);
    const auto out = module_->module.forward(inputs).toTuple();
    if (module_->state_size > 0) *state = out->elements()[2].toTensor();
    return std::make_pair(out->elements()[0].toTensor(),
                          out->elements()[1].toTensor());
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("the exported policy refused its inputs: ", e.what()));
  }
}

}  // namespace rl
