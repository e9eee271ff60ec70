// The heads of the policy: what turns the policy layer's outputs into
// actions, their log-probabilities and entropy, written once per head, its
// LibTorch computation beside its TorchScript and ONNX emission, and found
// by name in a registry (as Sample Factory registers its model parts).
//
// The policy's last Linear layer ("policy_head", units() outputs) is the
// actor-critic's; a head reads its output `out` [B, units()] and may own
// parameters of its own (the Gaussians' "log_std"), registered on the
// policy under the names checkpoints hold. Each head file registers itself:
//   REGISTER_ACTION_HEAD(MyHead);   // MyHead::kName, Fits, constructor
// and a run picks it with policy.head (ActorCriticConfig::head); left out,
// the action space's default head (DefaultActionHead) is used. Adding a
// head is its file, its line in policy/BUILD, its test and its docs.
#ifndef RL_POLICY_ACTION_HEAD_H_
#define RL_POLICY_ACTION_HEAD_H_

#include <torch/nn/module.h>
#include <torch/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "policy/export_writers.h"

namespace rl {

struct ActorCriticConfig;

// Actions drawn by a head, and their log-probabilities.
struct HeadSample {
  torch::Tensor actions;    // [B] int64, [B, parts] int64 or [B, A] float
  torch::Tensor log_probs;  // [B]
};

// Stored actions scored by a head, with gradients.
struct HeadScore {
  torch::Tensor log_probs;  // [B]
  torch::Tensor entropy;    // [B]
};

// An exported policy's actions output: dtype ("int64", "float32"), shape
// ("B" the batch) and what they are, for the sidecar and the ONNX graph.
struct HeadActions {
  std::string dtype;
  std::vector<std::string> shape;
  std::string description;
};

class ActionHead {
 public:
  virtual ~ActionHead() = default;

  // The registered name (policy.head).
  virtual std::string name() const = 0;
  // Outputs of the policy layer this head reads.
  virtual int64_t units() const = 0;
  // Registers the head's own parameters on `policy` (none by default).
  virtual void Register(torch::nn::Module& policy) {}

  // Actions from the policy layer's output `out` [B, units()] and their
  // log-probabilities: the most likely where `deterministic`, else drawn
  // with HeadNoise from `generator`. `masks` ([B, mask width] uint8, 1 =
  // allowed; undefined: none) are the env's action masks: a masked action
  // is never chosen.
  virtual HeadSample Sample(const torch::Tensor& out,
                            const torch::Tensor& masks,
                            const c10::optional<at::Generator>& generator,
                            bool deterministic) = 0;
  // Log-probabilities and entropy of stored `actions` (as Sample gives
  // them), masked actions at probability 0.
  virtual HeadScore Score(const torch::Tensor& out,
                          const torch::Tensor& actions,
                          const torch::Tensor& masks) = 0;

  // The exports. Both compute "the action" from the policy layer's output
  // `out` (and the input "mask" where the config has action masks): the
  // most likely one, or a draw where `sampled` (Gumbel-max for choices,
  // mean + std * N(0, 1) for Gaussians), as Sample computes them.
  // Script writes lines ending in "action = ..."; Onnx returns the name of
  // the action's value.
  virtual void Script(ScriptWriter& s, const std::string& out,
                      bool sampled) const = 0;
  virtual std::string Onnx(OnnxWriter& g, const std::string& out,
                           bool sampled) const = 0;
  virtual HeadActions Actions() const = 0;
};

// A masked choice's logit: finite, so that its probability is exactly 0
// (exp underflows) while p * log p stays 0 in the entropy (no 0 * -inf).
inline constexpr float kMaskedLogit = -1e8f;

// The exports of choices (categorical heads, and Bernoulli bits as
// categoricals of (0, logit)): `out` [B, sum of parts] masked by the input
// "mask" where `masks`, Gumbel-perturbed where `sampled`, and the argmax of
// each part: "action" as int64 [B] where `flat` (one Discrete part), else
// [B, parts].
void ScriptChoices(ScriptWriter& s, const std::string& out,
                   const std::vector<int64_t>& parts, bool flat, bool masks,
                   bool sampled);
std::string OnnxChoices(OnnxWriter& g, std::string out,
                        const std::vector<int64_t>& parts, bool flat,
                        bool masks, bool sampled);

// Random numbers of `like`'s shape, uniform in [0, 1) or standard normal,
// drawn by `generator` on its own device and handed to `like`'s: a CPU
// generator draws the same stream for a policy on any device.
torch::Tensor HeadNoise(bool normal, const torch::Tensor& like,
                        const c10::optional<at::Generator>& generator);

// log N(x; mean, exp(log_std)) summed over the last dimension, from the
// standardised z = (x - mean) / std.
torch::Tensor GaussianLogProb(const torch::Tensor& z,
                              const torch::Tensor& log_std);
// The entropy of a diagonal Gaussian of `log_std`, per row of a batch of
// `batch`.
torch::Tensor GaussianEntropy(const torch::Tensor& log_std, int64_t batch);

// A head of the registry: its name, a line for the docs and errors, the
// action spaces it takes (Fits: OK, or why not) and its constructor.
struct ActionHeadEntry {
  std::string name;
  std::string summary;
  std::function<absl::Status(const ActorCriticConfig&)> fits;
  std::function<std::unique_ptr<ActionHead>(const ActorCriticConfig&)> make;
};

// Adds `entry` to the registry (REGISTER_ACTION_HEAD's call); true.
bool RegisterActionHead(ActionHeadEntry entry);

// The registered heads, by name.
std::vector<ActionHeadEntry> ActionHeads();

// The head an action space takes by default: "categorical" (Discrete and
// MultiDiscrete), "bernoulli" (MultiBinary) or "gaussian" (Box).
std::string DefaultActionHead(const ActorCriticConfig& config);

// `config.head` (or the action space's default) for `config`'s actions.
// INVALID_ARGUMENT naming policy.head for a name not registered (listing
// those that are) or a head that does not take this action space.
absl::StatusOr<std::unique_ptr<ActionHead>> MakeActionHead(
    const ActorCriticConfig& config);

#define RL_ACTION_HEAD_CONCAT_(a, b) a##b
#define RL_ACTION_HEAD_NAME_(a, b) RL_ACTION_HEAD_CONCAT_(a, b)
// Registers head class `Head` (with static kName, kSummary, Fits(config)
// and a constructor from the config) at start-up. The library holding it
// is alwayslink, so that the registration is linked in.
#define REGISTER_ACTION_HEAD(Head)                                         \
  static const bool RL_ACTION_HEAD_NAME_(rl_action_head_, __LINE__) =      \
      ::rl::RegisterActionHead({Head::kName, Head::kSummary, &Head::Fits,  \
                                [](const ::rl::ActorCriticConfig& c)       \
                                    -> std::unique_ptr<::rl::ActionHead> { \
                                  return std::make_unique<Head>(c);        \
                                }})

}  // namespace rl

#endif  // RL_POLICY_ACTION_HEAD_H_
