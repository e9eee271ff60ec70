// The tanh-squashed Gaussian head for bounded Box actions (as SAC's and
// Brax PPO's policies): u ~ N(out, exp(log_std)), action = mid + half *
// tanh(u) with mid and half the centre and half-width of the env's bounds,
// so actions always lie inside them and nothing is clipped away.
//   log p(action) = log N(u) - sum log(half * (1 - tanh(u)^2)),
// computed from the action itself (u = atanh of it, clamped 1e-6 inside
// the bounds) both when acting and when scoring, so that a stored action's
// log-probability is the same number both times. The entropy has no closed
// form: the Gaussian's plus the log-Jacobian at the stored action (its
// gradient is the Gaussian's entropy's).
#include <cmath>

#include "absl/strings/str_cat.h"
#include "policy/action_head.h"
#include "policy/actor_critic.h"

namespace rl {
namespace {

class TanhGaussianHead : public ActionHead {
 public:
  static constexpr const char* kName = "tanh_gaussian";
  static constexpr const char* kSummary =
      "a Gaussian squashed by tanh into the bounds: bounded Box actions";
  static absl::Status Fits(const ActorCriticConfig& c) {
    if (c.action_size <= 0) {
      return absl::InvalidArgumentError(
          "it takes Box actions, and this env's are discrete");
    }
    if (!std::isfinite(c.action_low) || !std::isfinite(c.action_high) ||
        !(c.action_low < c.action_high)) {
      return absl::InvalidArgumentError(
          absl::StrCat("it squashes actions into finite bounds, and this "
                       "env's are [",
                       c.action_low, ", ", c.action_high, "]"));
    }
    return absl::OkStatus();
  }

  explicit TanhGaussianHead(const ActorCriticConfig& c)
      : size_(c.action_size),
        initial_log_std_(c.initial_log_std),
        low_(c.action_low),
        high_(c.action_high),
        mid_(0.5f * (c.action_high + c.action_low)),
        half_(0.5f * (c.action_high - c.action_low)) {}

  std::string name() const override { return kName; }
  int64_t units() const override { return size_; }
  void Register(torch::nn::Module& policy) override {
    log_std_ = policy.register_parameter(
        "log_std", torch::full({size_}, initial_log_std_));
  }

  HeadSample Sample(const torch::Tensor& out, const torch::Tensor& masks,
                    const c10::optional<at::Generator>& generator,
                    bool deterministic) override {
    const torch::Tensor u =
        deterministic
            ? out
            : out + log_std_.exp() * HeadNoise(/*normal=*/true, out, generator);
    const torch::Tensor actions = mid_ + half_ * torch::tanh(u);
    return {actions, Score(out, actions, masks).log_probs};
  }

  HeadScore Score(const torch::Tensor& out, const torch::Tensor& actions,
                  const torch::Tensor& masks) override {
    const torch::Tensor y =
        ((actions - mid_) / half_).clamp(-1.0 + 1e-6, 1.0 - 1e-6);
    const torch::Tensor z = (torch::atanh(y) - out) * torch::exp(-log_std_);
    // log |d action / d u| per row.
    const torch::Tensor log_jacobian =
        (std::log(half_) + torch::log1p(-y * y)).sum(-1);
    return {GaussianLogProb(z, log_std_) - log_jacobian,
            GaussianEntropy(log_std_, out.size(0)) + log_jacobian};
  }

  void Script(ScriptWriter& s, const std::string& out,
              bool sampled) const override {
    if (sampled) {
      s.Line(absl::StrCat(out, " = ", out, " + torch.exp(", s.Ref("log_std"),
                          ") * torch.randn_like(", out, ")"));
    }
    s.Line(absl::StrCat("action = ", ScriptLiteral(mid_), " + ",
                        ScriptLiteral(half_), " * torch.tanh(", out, ")"));
  }
  std::string Onnx(OnnxWriter& g, const std::string& out,
                   bool sampled) const override {
    std::string x = out;
    if (sampled) {
      x = g.Node("Add", {x, g.Node("Mul", {g.Node("Exp", {g.Weight("log_std")}),
                                           g.Node("RandomNormalLike", {x})})});
    }
    return g.Node("Add", {g.Constant(torch::tensor(mid_)),
                          g.Node("Mul", {g.Constant(torch::tensor(half_)),
                                         g.Node("Tanh", {x})})});
  }
  HeadActions Actions() const override {
    return {"float32",
            {"B", absl::StrCat(size_)},
            absl::StrCat("Box in [", low_, ", ", high_,
                         "] (a tanh-squashed Gaussian)")};
  }

 private:
  int64_t size_;
  float initial_log_std_, low_, high_, mid_, half_;
  torch::Tensor log_std_;  // [A]
};

REGISTER_ACTION_HEAD(TanhGaussianHead);

}  // namespace
}  // namespace rl
