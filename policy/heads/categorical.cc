// The categorical head: one categorical per choice of a Discrete action, or
// per part of a MultiDiscrete one (sampled independently, the action's
// log-probability their sum); masked choices have probability 0.
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "policy/action_head.h"
#include "policy/actor_critic.h"

namespace rl {
namespace {

class CategoricalHead : public ActionHead {
 public:
  static constexpr const char* kName = "categorical";
  static constexpr const char* kSummary =
      "a categorical per choice: Discrete and MultiDiscrete actions";
  static absl::Status Fits(const ActorCriticConfig& c) {
    if (c.num_actions > 0 || !c.action_nvec.empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("it takes Discrete or MultiDiscrete actions, and this "
                     "env's are a Box of ",
                     c.action_size));
  }

  explicit CategoricalHead(const ActorCriticConfig& c)
      : flat_(c.action_nvec.empty()),
        parts_(flat_ ? std::vector<int64_t>{c.num_actions} : c.action_nvec),
        masks_(c.action_masks) {}

  std::string name() const override { return kName; }
  int64_t units() const override {
    return std::accumulate(parts_.begin(), parts_.end(), int64_t{0});
  }

  HeadSample Sample(const torch::Tensor& logits, const torch::Tensor& masks,
                    const c10::optional<at::Generator>& generator,
                    bool deterministic) override {
    const torch::Tensor out = Masked(logits, masks);
    std::vector<torch::Tensor> actions, log_probs;
    for (const torch::Tensor& part : Parts(out)) {
      const torch::Tensor lp = torch::log_softmax(part, -1);
      torch::Tensor a;
      if (deterministic) {
        a = part.argmax(-1);
      } else {
        // Gumbel-max: one uniform draw per logit, no CDF search.
        const torch::Tensor u = HeadNoise(/*normal=*/false, part, generator)
                                    .clamp_(1e-12, 1.0 - 1e-7);
        a = (lp - torch::log(-torch::log(u))).argmax(-1);
      }
      log_probs.push_back(lp.gather(-1, a.unsqueeze(-1)).squeeze(-1));
      actions.push_back(a);
    }
    if (flat_) return {actions[0], log_probs[0]};
    return {torch::stack(actions, -1), torch::stack(log_probs, -1).sum(-1)};
  }

  HeadScore Score(const torch::Tensor& logits, const torch::Tensor& actions,
                  const torch::Tensor& masks) override {
    const torch::Tensor out = Masked(logits, masks);
    std::vector<torch::Tensor> log_probs, entropies;
    int64_t j = 0;
    for (const torch::Tensor& part : Parts(out)) {
      const torch::Tensor lp = torch::log_softmax(part, -1);
      const torch::Tensor a = flat_ ? actions : actions.select(-1, j++);
      log_probs.push_back(lp.gather(-1, a.unsqueeze(-1)).squeeze(-1));
      entropies.push_back(-(lp.exp() * lp).sum(-1));
    }
    if (flat_) return {log_probs[0], entropies[0]};
    return {torch::stack(log_probs, -1).sum(-1),
            torch::stack(entropies, -1).sum(-1)};
  }

  void Script(ScriptWriter& s, const std::string& out,
              bool sampled) const override {
    ScriptChoices(s, out, parts_, flat_, masks_, sampled);
  }
  std::string Onnx(OnnxWriter& g, const std::string& out,
                   bool sampled) const override {
    return OnnxChoices(g, out, parts_, flat_, masks_, sampled);
  }
  HeadActions Actions() const override {
    if (flat_)
      return {"int64", {"B"}, absl::StrCat("Discrete(", parts_[0], ")")};
    return {"int64",
            {"B", absl::StrCat(parts_.size())},
            absl::StrCat("MultiDiscrete([", absl::StrJoin(parts_, ", "), "])")};
  }

 private:
  // `logits` with the choices `masks` forbids (0) at kMaskedLogit.
  static torch::Tensor Masked(const torch::Tensor& logits,
                              const torch::Tensor& masks) {
    if (!masks.defined()) return logits;
    return logits.masked_fill(masks.eq(0), kMaskedLogit);
  }
  std::vector<torch::Tensor> Parts(const torch::Tensor& out) const {
    if (flat_) return {out};
    return out.split_with_sizes(parts_, -1);
  }

  bool flat_;
  std::vector<int64_t> parts_;
  bool masks_;
};

REGISTER_ACTION_HEAD(CategoricalHead);

}  // namespace
}  // namespace rl
