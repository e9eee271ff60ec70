#include "policy/policy_export.h"

#include <torch/script.h>

#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/json_quote.h"
#include "common/status.h"
#include "policy/torch_status.h"

namespace rl {
namespace {

// A parameter or buffer of the policy as the exported module names it.
std::string Attribute(const std::string& name) {
  return absl::StrReplaceAll(name, {{".", "_"}});
}

// A float literal that TorchScript reads back to the same float32.
std::string Literal(double v) {
  if (std::isinf(v)) return v > 0 ? "float('inf')" : "float('-inf')";
  return absl::StrFormat("%.9g", v).find_first_of(".e") == std::string::npos
             ? absl::StrCat(absl::StrFormat("%.9g", v), ".0")
             : absl::StrFormat("%.9g", v);
}

// Writes the source line by line, naming the policy's tensors and noting
// those its config needs that the weights lack.
class Source {
 public:
  explicit Source(ActorCritic& policy) {
    for (const auto& item : policy->named_parameters())
      have_.insert(item.key());
    for (const auto& item : policy->named_buffers()) have_.insert(item.key());
  }
  // self.<name> of the policy's tensor `name`.
  std::string Ref(const std::string& name) {
    if (have_.count(name) == 0) missing_.push_back(name);
    return "self." + Attribute(name);
  }
  void Line(const std::string& line) {
    absl::StrAppend(&text_, "    ", line, "\n");
  }
  // y = act(linear(x)) over the Sequential `prefix`'s Linear at `index`.
  std::string Linear(const std::string& prefix, int index,
                     const std::string& x) {
    const std::string p = absl::StrCat(prefix, ".", index);
    return absl::StrCat("torch.linear(", x, ", ", Ref(p + ".weight"), ", ",
                        Ref(p + ".bias"), ")");
  }
  std::string Conv(const std::string& name, const std::string& x, int stride,
                   int padding) {
    return absl::StrCat("torch.conv2d(", x, ", ", Ref(name + ".weight"), ", ",
                        Ref(name + ".bias"), ", [", stride, ", ", stride,
                        "], [", padding, ", ", padding, "])");
  }
  const std::vector<std::string>& missing() const { return missing_; }
  const std::string& text() const { return text_; }

 private:
  std::set<std::string> have_;
  std::vector<std::string> missing_;
  std::string text_;
};

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

// The CNN encoder `prefix` (actor_critic.cc's MakeCnn, layer by layer) over
// flat images `x` of `chw` (in place).
void Encoder(Source& s, const ActorCriticConfig& c, const std::string& prefix,
             const std::vector<int64_t>& chw, const std::string& x) {
  s.Line(c.channels_last
             ? absl::StrCat(x, " = ", x, ".reshape([", x, ".size(0), ", chw[1],
                            ", ", chw[2], ", ", chw[0],
                            "]).permute([0, 3, 1, 2]).contiguous()")
             : absl::StrCat(x, " = ", x, ".reshape([", x, ".size(0), ", chw[0],
                            ", ", chw[1], ", ", chw[2], "])"));
  const std::string at = prefix + ".";
  int linear = 0;
  if (c.encoder == ActorCriticConfig::Encoder::kNatureCnn) {
    s.Line(x + " = torch.relu(" + s.Conv(at + "0", x, 4, 0) + ")");
    s.Line(x + " = torch.relu(" + s.Conv(at + "2", x, 2, 0) + ")");
    s.Line(x + " = torch.relu(" + s.Conv(at + "4", x, 1, 0) + ")");
    s.Line(x + " = " + x + ".flatten(1)");
    linear = 7;
  } else {
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
    linear = 14;
  }
  s.Line(x + " = torch.relu(" + s.Linear(prefix, linear, x) + ")");
}

// The encoder over `x`: a CNN, or per key (a CNN per image part, the other
// parts as they are, concatenated), as ActorCriticImpl::Trunks reads it.
void Encoders(Source& s, const ActorCriticConfig& c) {
  if (c.observation_parts.empty()) {
    Encoder(s, c, "encoder", c.image_chw, "x");
    return;
  }
  std::vector<std::string> features;
  for (size_t k = 0; k < c.observation_parts.size(); ++k) {
    const auto& part = c.observation_parts[k];
    const std::string f = absl::StrCat("f", k);
    s.Line(absl::StrCat(f, " = x[:, ", part.offset, ":",
                        part.offset + part.size, "]"));
    if (part.image()) {
      Encoder(s, c, absl::StrCat("encoder_", k),
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
  Source s(policy);
  s.Line("x = obs.reshape([obs.size(0), -1]).float()");
  if (c.byte_observations) {
    s.Line("x = x * " + Literal(1.0f / 255.0f));  // as FloatObservations
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
                        Literal(-c.observation_clip), ", ",
                        Literal(c.observation_clip), ")"));
  }
  if (c.encoder != ActorCriticConfig::Encoder::kMlp) Encoders(s, c);
  s.Line("p = x");
  Trunk(s, c, "policy_trunk", "p");
  const int64_t state_size = policy->state_size();
  if (c.core == ActorCriticConfig::Core::kLstm) {
    // As LSTMCell (CoreStep): the state is [hidden, cell].
    s.Line(absl::StrCat("h, cell = torch.lstm_cell(p, [state[:, :", c.core_size,
                        "], state[:, ", c.core_size, ":]], ",
                        s.Ref("lstm.weight_ih"), ", ", s.Ref("lstm.weight_hh"),
                        ", ", s.Ref("lstm.bias_ih"), ", ",
                        s.Ref("lstm.bias_hh"), ")"));
    s.Line("next_state = torch.cat([h, cell], 1)");
    s.Line("p = h");
  } else if (c.core == ActorCriticConfig::Core::kGru) {
    s.Line(absl::StrCat("p = torch.gru_cell(p, state, ", s.Ref("gru.weight_ih"),
                        ", ", s.Ref("gru.weight_hh"), ", ",
                        s.Ref("gru.bias_ih"), ", ", s.Ref("gru.bias_hh"), ")"));
    s.Line("next_state = p");
  }
  if (policy->config().shared_trunk) {
    s.Line("v = p");
  } else {
    s.Line("v = x");
    Trunk(s, c, "value_trunk", "v");
  }
  s.Line(absl::StrCat("out = torch.linear(p, ", s.Ref("policy_head.weight"),
                      ", ", s.Ref("policy_head.bias"), ")"));
  s.Line(absl::StrCat("value = torch.linear(v, ", s.Ref("value_head.weight"),
                      ", ", s.Ref("value_head.bias"), ").squeeze(-1)"));
  if (c.bernoulli) {
    // Each bit's logit l as a categorical's (0, l): argmax picks 1 where
    // l > 0 and a Gumbel-max draw picks it with probability sigmoid(l).
    s.Line("out = torch.stack([torch.zeros_like(out), out], -1).flatten(1)");
  }
  if (c.action_masks) {
    // As MaskLogits: a masked choice's logit is -1e8, never the argmax.
    s.Line("out = out.masked_fill(mask == 0, -100000000.0)");
  }
  if (c.num_actions > 0 || !c.action_nvec.empty()) {
    if (options.sampled) {
      // Gumbel-max: argmax(logits + Gumbel noise) is a categorical draw.
      s.Line(
          "out = out - torch.log(-torch.log("
          "torch.rand_like(out).clamp(1e-20, 1.0)))");
    }
    if (c.action_nvec.empty()) {
      s.Line("action = torch.argmax(out, -1)");
    } else {
      std::vector<std::string> parts;
      int64_t at = 0;
      for (size_t j = 0; j < c.action_nvec.size(); ++j) {
        s.Line(absl::StrCat("a", j, " = torch.argmax(out[:, ", at, ":",
                            at + c.action_nvec[j], "], -1)"));
        parts.push_back(absl::StrCat("a", j));
        at += c.action_nvec[j];
      }
      s.Line(absl::StrCat("action = torch.stack([", absl::StrJoin(parts, ", "),
                          "], -1)"));
    }
  } else {
    if (options.sampled) {
      s.Line(absl::StrCat("out = out + torch.exp(", s.Ref("log_std"),
                          ") * torch.randn_like(out)"));
    }
    s.Line(absl::StrCat("action = torch.clamp(out, ", Literal(env.action_low()),
                        ", ", Literal(env.action_high()), ")"));
  }
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
  std::string action;
  if (c.num_actions > 0) {
    action = tensor("actions", "int64", {"B"},
                    absl::StrCat("Discrete(", c.num_actions, ")"));
  } else if (c.bernoulli) {
    action =
        tensor("actions", "int64", {"B", absl::StrCat(c.action_nvec.size())},
               absl::StrCat("MultiBinary(", c.action_nvec.size(), ")"));
  } else if (!c.action_nvec.empty()) {
    action =
        tensor("actions", "int64", {"B", absl::StrCat(c.action_nvec.size())},
               absl::StrCat("MultiDiscrete([",
                            absl::StrJoin(c.action_nvec, ", "), "])"));
  } else {
    action = tensor("actions", "float32", {"B", absl::StrCat(c.action_size)},
                    absl::StrCat("Box clipped to [", env.action_low(), ", ",
                                 env.action_high(), "]"));
  }
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
      tensor("values", "float32", {"B"}, "the value estimate V(obs)"),
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
      module.register_parameter(Attribute(item.key()),
                                item.value().detach().cpu().clone(), false);
    }
    for (const auto& item : policy->named_buffers()) {
      module.register_buffer(Attribute(item.key()),
                             item.value().detach().cpu().clone());
    }
    // How many numbers of state per env the caller carries (0: none).
    module.register_attribute("state_size", c10::IntType::get(),
                              policy->state_size());
    module.define(source);
    module.eval();

    // The check: 256 observations (and masks) through both.
    torch::manual_seed(0);
    const int64_t batch = 256;
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
