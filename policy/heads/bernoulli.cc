// The Bernoulli head for MultiBinary actions: one logit per bit, each bit 1
// with probability sigmoid(logit). Masks are MultiDiscrete's: two per bit
// ("0 allowed", "1 allowed"); a bit whose 1 is masked is certainly 0, one
// whose 0 is masked certainly 1. The exports read each bit as a
// categorical of (0, logit): argmax picks 1 where the logit is > 0, and a
// Gumbel-max draw picks it with probability sigmoid(logit).
#include "absl/strings/str_cat.h"
#include "policy/action_head.h"
#include "policy/actor_critic.h"

namespace rl {
namespace {

class BernoulliHead : public ActionHead {
 public:
  static constexpr const char* kName = "bernoulli";
  static constexpr const char* kSummary =
      "a Bernoulli per bit: MultiBinary actions";
  static absl::Status Fits(const ActorCriticConfig& c) {
    bool bits = !c.action_nvec.empty();
    for (const int64_t n : c.action_nvec) bits = bits && n == 2;
    if (bits) return absl::OkStatus();
    return absl::InvalidArgumentError(
        "it takes bits (MultiBinary, or MultiDiscrete of 2 choices each)");
  }

  explicit BernoulliHead(const ActorCriticConfig& c)
      : bits_(static_cast<int64_t>(c.action_nvec.size())),
        masks_(c.action_masks) {}

  std::string name() const override { return kName; }
  int64_t units() const override { return bits_; }

  HeadSample Sample(const torch::Tensor& logits, const torch::Tensor& masks,
                    const c10::optional<at::Generator>& generator,
                    bool deterministic) override {
    const torch::Tensor out = Masked(logits, masks);
    // Each bit 1 with probability sigmoid(logit): log u < log p(1).
    const torch::Tensor one = torch::log_sigmoid(out);
    const torch::Tensor zero = torch::log_sigmoid(-out);
    torch::Tensor bits;
    if (deterministic) {
      bits = out > 0;
    } else {
      const torch::Tensor u =
          HeadNoise(/*normal=*/false, out, generator).clamp_(1e-12, 1.0 - 1e-7);
      bits = torch::log(u) < one;
    }
    return {bits.to(torch::kInt64), torch::where(bits, one, zero).sum(-1)};
  }

  HeadScore Score(const torch::Tensor& logits, const torch::Tensor& actions,
                  const torch::Tensor& masks) override {
    const torch::Tensor out = Masked(logits, masks);
    const torch::Tensor one = torch::log_sigmoid(out);
    const torch::Tensor zero = torch::log_sigmoid(-out);
    return {torch::where(actions.eq(1), one, zero).sum(-1),
            -(one.exp() * one + zero.exp() * zero).sum(-1)};
  }

  void Script(ScriptWriter& s, const std::string& out,
              bool sampled) const override {
    s.Line(absl::StrCat(out, " = torch.stack([torch.zeros_like(", out, "), ",
                        out, "], -1).flatten(1)"));
    ScriptChoices(s, out, Pairs(), /*flat=*/false, masks_, sampled);
  }
  std::string Onnx(OnnxWriter& g, const std::string& out,
                   bool sampled) const override {
    const std::string bits = g.Node("Unsqueeze", {out, g.Ints({2})});
    const std::string pairs = g.Node(
        "Reshape",
        {g.Node("Concat", {g.Node("Sub", {bits, bits}), bits},
                [](onnx::NodeProto* n) { OnnxWriter::IntAttr(n, "axis", 2); }),
         g.Ints({-1, 2 * bits_})});
    return OnnxChoices(g, pairs, Pairs(), /*flat=*/false, masks_, sampled);
  }
  HeadActions Actions() const override {
    return {"int64",
            {"B", absl::StrCat(bits_)},
            absl::StrCat("MultiBinary(", bits_, ")")};
  }

 private:
  std::vector<int64_t> Pairs() const { return std::vector<int64_t>(bits_, 2); }
  // Logits [B, bits] under masks [B, 2 * bits].
  torch::Tensor Masked(const torch::Tensor& logits,
                       const torch::Tensor& masks) const {
    if (!masks.defined()) return logits;
    const torch::Tensor pairs = masks.reshape({masks.size(0), bits_, 2});
    return logits.masked_fill(pairs.select(2, 1).eq(0), kMaskedLogit)
        .masked_fill(pairs.select(2, 0).eq(0), -kMaskedLogit);
  }

  int64_t bits_;
  bool masks_;
};

REGISTER_ACTION_HEAD(BernoulliHead);

}  // namespace
}  // namespace rl
