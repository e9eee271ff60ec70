#include "policy/action_head.h"

#include <algorithm>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "policy/actor_critic.h"

namespace rl {
namespace {

constexpr double kLogSqrt2Pi = 0.91893853320467274178;  // log(sqrt(2 pi))

struct Registry {
  std::mutex mu;
  std::vector<ActionHeadEntry> entries;
};

Registry& TheRegistry() {
  static Registry* registry = new Registry();
  return *registry;
}

}  // namespace

torch::Tensor HeadNoise(bool normal, const torch::Tensor& like,
                        const c10::optional<at::Generator>& generator) {
  const torch::Device where =
      generator.has_value() ? generator->device() : like.device();
  const auto options = like.options().device(where);
  const torch::Tensor noise =
      normal ? torch::randn(like.sizes(), generator, options)
             : torch::rand(like.sizes(), generator, options);
  return noise.device() == like.device() ? noise : noise.to(like.device());
}

torch::Tensor GaussianLogProb(const torch::Tensor& z,
                              const torch::Tensor& log_std) {
  return (-0.5 * z * z - log_std - kLogSqrt2Pi).sum(-1);
}

torch::Tensor GaussianEntropy(const torch::Tensor& log_std, int64_t batch) {
  return (log_std + 0.5 + kLogSqrt2Pi).sum().expand({batch});
}

void ScriptChoices(ScriptWriter& s, const std::string& out,
                   const std::vector<int64_t>& parts, bool flat, bool masks,
                   bool sampled) {
  if (masks) {
    s.Line(absl::StrCat(out, " = ", out, ".masked_fill(mask == 0, ",
                        ScriptLiteral(kMaskedLogit), ")"));
  }
  if (sampled) {
    // Gumbel-max: argmax(logits + Gumbel noise) is a categorical draw.
    s.Line(absl::StrCat(out, " = ", out,
                        " - torch.log(-torch.log("
                        "torch.rand_like(",
                        out, ").clamp(1e-20, 1.0)))"));
  }
  if (flat) {
    s.Line(absl::StrCat("action = torch.argmax(", out, ", -1)"));
    return;
  }
  std::vector<std::string> names;
  int64_t at = 0;
  for (size_t j = 0; j < parts.size(); ++j) {
    s.Line(absl::StrCat("a", j, " = torch.argmax(", out, "[:, ", at, ":",
                        at + parts[j], "], -1)"));
    names.push_back(absl::StrCat("a", j));
    at += parts[j];
  }
  s.Line(absl::StrCat("action = torch.stack([", absl::StrJoin(names, ", "),
                      "], -1)"));
}

std::string OnnxChoices(OnnxWriter& g, std::string out,
                        const std::vector<int64_t>& parts, bool flat,
                        bool masks, bool sampled) {
  if (masks) {
    const std::string forbidden = g.Node("Not", {g.Bool("mask")});
    out = g.Node("Where", {forbidden, g.Scalar(kMaskedLogit), out});
  }
  if (sampled) {
    const std::string u = g.Node("Clip", {g.Node("RandomUniformLike", {out}),
                                          g.Constant(torch::tensor(1e-20f)),
                                          g.Constant(torch::tensor(1.0f))});
    out = g.Node("Sub",
                 {out, g.Node("Log", {g.Node("Neg", {g.Node("Log", {u})})})});
  }
  auto argmax = [&](const std::string& logits, int keepdims) {
    return g.Node("ArgMax", {logits}, [&](onnx::NodeProto* n) {
      OnnxWriter::IntAttr(n, "axis", 1);
      OnnxWriter::IntAttr(n, "keepdims", keepdims);
    });
  };
  if (flat) return argmax(out, 0);
  std::vector<std::string> names;
  int64_t at = 0;
  for (const int64_t n : parts) {
    names.push_back(argmax(g.Columns(out, at, at + n), 1));
    at += n;
  }
  return g.Node("Concat", names,
                [](onnx::NodeProto* n) { OnnxWriter::IntAttr(n, "axis", 1); });
}

bool RegisterActionHead(ActionHeadEntry entry) {
  Registry& registry = TheRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  registry.entries.push_back(std::move(entry));
  return true;
}

std::vector<ActionHeadEntry> ActionHeads() {
  Registry& registry = TheRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  std::vector<ActionHeadEntry> entries = registry.entries;
  std::sort(entries.begin(), entries.end(),
            [](const ActionHeadEntry& a, const ActionHeadEntry& b) {
              return a.name < b.name;
            });
  return entries;
}

std::string DefaultActionHead(const ActorCriticConfig& config) {
  if (config.bernoulli) return "bernoulli";
  if (config.num_actions > 0 || !config.action_nvec.empty()) {
    return "categorical";
  }
  return "gaussian";
}

absl::StatusOr<std::unique_ptr<ActionHead>> MakeActionHead(
    const ActorCriticConfig& config) {
  const std::string name =
      config.head.empty() ? DefaultActionHead(config) : config.head;
  std::vector<std::string> names;
  for (const ActionHeadEntry& entry : ActionHeads()) {
    if (entry.name != name) {
      names.push_back(entry.name);
      continue;
    }
    const absl::Status fits = entry.fits(config);
    if (!fits.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("policy.head: ", name, " (", entry.summary,
                       ") does not fit this env: ", fits.message()));
    }
    return entry.make(config);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("policy.head: no head is named \"", name,
                   "\" (the heads: ", absl::StrJoin(names, ", "), ")"));
}

}  // namespace rl
