// Taking a trained policy out of the service: a self-contained TorchScript
// file that LibTorch (torch::jit::load) and PyTorch (torch.jit.load) run
// without this code base, and a JSON sidecar naming its inputs and outputs.
//
// Data flow: ActorCritic (weights, normaliser statistics, config) ->
// TorchScript source generated from the config (PolicySource) + the
// weights as the module's parameters -> FILE, and FILE.json.
//
// The exported forward(obs[, mask][, state]) returns (actions, values[,
// next_state]):
//   obs     [B, observation_size] or [B, *observation_shape], float32, or
//           uint8 for a uint8 run (scaled by 1/255 inside, as in training)
//   mask    [B, n] uint8, 1 = allowed: only for envs with action masks
//   state   [B, S] float32: only for a recurrent policy (policy.core), the
//           state before the step, zeros where an episode starts
//   actions int64 [B] (Discrete), int64 [B, parts] (MultiDiscrete), or
//           float32 [B, A] clipped to the action bounds (Box)
//   values  float32 [B]
//   next_state [B, S] float32: with a state, the one to pass next
// The module's int attribute state_size is S (0 without a core).
// Observation normalisation is baked in; actions are the most likely (the
// argmax / the Gaussian mean) or, with sampled, drawn from the policy
// (Gumbel-max for categoricals, mean + std * N(0, 1) for Gaussians).
#ifndef RL_POLICY_POLICY_EXPORT_H_
#define RL_POLICY_POLICY_EXPORT_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "policy/actor_critic.h"
#include "proto/common.pb.h"

namespace rl {

struct PolicyExportOptions {
  // false: actions sampled from the policy instead of its most likely.
  bool sampled = false;
};

// The TorchScript source of the exported module's forward, for `policy`
// trained on `env`. INVALID_ARGUMENT if the policy's weights lack what its
// config says it has.
absl::StatusOr<std::string> PolicySource(ActorCritic& policy,
                                         const EnvSpec& env,
                                         const PolicyExportOptions& options);

// The sidecar: format, env id, every input and output with dtype and shape
// ("B" for the batch), the action bounds and the sampling mode, as JSON.
// `format` names the file's kind: "torchscript" or "onnx".
std::string PolicySidecar(ActorCritic& policy, const EnvSpec& env,
                          const PolicyExportOptions& options,
                          const std::string& format = "torchscript");

// Writes the TorchScript module to `path` and the sidecar to
// `path` + ".json". The module is checked before it is written: a batch of
// observations through it must give the policy's own actions and values.
// INTERNAL naming the difference otherwise; a file error is its message.
absl::Status ExportTorchScript(ActorCritic& policy, const EnvSpec& env,
                               const PolicyExportOptions& options,
                               const std::string& path);

// An exported file loaded back (torch::jit::load), for rl_local eval
// --policy=FILE and as the example of using one from C++.
class ExportedPolicy {
 public:
  // INVALID_ARGUMENT naming the file if it is not a TorchScript module with
  // a forward method.
  static absl::StatusOr<std::unique_ptr<ExportedPolicy>> Load(
      const std::string& path);
  ~ExportedPolicy();

  // Numbers of recurrent state per env the module takes and gives back
  // (0: none).
  int64_t state_size() const;

  // forward(obs[, masks][, state]): (actions, values). `masks` is passed
  // exactly when it is defined; a recurrent module's `state` [B,
  // state_size()] is required and replaced by the next state.
  // INVALID_ARGUMENT with LibTorch's words for inputs the module refuses.
  absl::StatusOr<std::pair<torch::Tensor, torch::Tensor>> Act(
      const torch::Tensor& observations, const torch::Tensor& masks,
      torch::Tensor* state = nullptr) const;

 private:
  struct Module;
  explicit ExportedPolicy(std::unique_ptr<Module> module);
  std::unique_ptr<Module> module_;
};

}  // namespace rl

#endif  // RL_POLICY_POLICY_EXPORT_H_
