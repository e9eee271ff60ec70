// The Gaussian head for Box actions: a diagonal Gaussian around the policy
// layer's output with a state-independent log-std (the "log_std"
// parameter). Actions are not squashed: the env clips them to its bounds,
// and so do the exports.
#include "absl/strings/str_cat.h"
#include "policy/action_head.h"
#include "policy/actor_critic.h"

namespace rl {
namespace {

class GaussianHead : public ActionHead {
 public:
  static constexpr const char* kName = "gaussian";
  static constexpr const char* kSummary =
      "a diagonal Gaussian, clipped to the bounds by the env: Box actions";
  static absl::Status Fits(const ActorCriticConfig& c) {
    if (c.action_size > 0) return absl::OkStatus();
    return absl::InvalidArgumentError(
        "it takes Box actions, and this env's are discrete");
  }

  explicit GaussianHead(const ActorCriticConfig& c)
      : size_(c.action_size),
        initial_log_std_(c.initial_log_std),
        low_(c.action_low),
        high_(c.action_high) {}

  std::string name() const override { return kName; }
  int64_t units() const override { return size_; }
  void Register(torch::nn::Module& policy) override {
    log_std_ = policy.register_parameter(
        "log_std", torch::full({size_}, initial_log_std_));
  }

  HeadSample Sample(const torch::Tensor& out, const torch::Tensor& masks,
                    const c10::optional<at::Generator>& generator,
                    bool deterministic) override {
    const torch::Tensor std = log_std_.exp();
    const torch::Tensor actions =
        deterministic ? out
                      : out + std * HeadNoise(/*normal=*/true, out, generator);
    return {actions, GaussianLogProb((actions - out) / std, log_std_)};
  }

  HeadScore Score(const torch::Tensor& out, const torch::Tensor& actions,
                  const torch::Tensor& masks) override {
    const torch::Tensor z = (actions - out) * torch::exp(-log_std_);
    return {GaussianLogProb(z, log_std_),
            GaussianEntropy(log_std_, out.size(0))};
  }

  void Script(ScriptWriter& s, const std::string& out,
              bool sampled) const override {
    if (sampled) {
      s.Line(absl::StrCat(out, " = ", out, " + torch.exp(", s.Ref("log_std"),
                          ") * torch.randn_like(", out, ")"));
    }
    s.Line(absl::StrCat("action = torch.clamp(", out, ", ", ScriptLiteral(low_),
                        ", ", ScriptLiteral(high_), ")"));
  }
  std::string Onnx(OnnxWriter& g, const std::string& out,
                   bool sampled) const override {
    std::string x = out;
    if (sampled) {
      x = g.Node("Add", {x, g.Node("Mul", {g.Node("Exp", {g.Weight("log_std")}),
                                           g.Node("RandomNormalLike", {x})})});
    }
    return g.Node("Clip", {x, g.Constant(torch::tensor(low_)),
                           g.Constant(torch::tensor(high_))});
  }
  HeadActions Actions() const override {
    return {"float32",
            {"B", absl::StrCat(size_)},
            absl::StrCat("Box clipped to [", low_, ", ", high_, "]")};
  }

 private:
  int64_t size_;
  float initial_log_std_, low_, high_;
  torch::Tensor log_std_;  // [A]
};

REGISTER_ACTION_HEAD(GaussianHead);

}  // namespace
}  // namespace rl
