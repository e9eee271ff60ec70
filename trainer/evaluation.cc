// Playing a run's env with given actions or a policy's (EvaluateActions,
// EvaluatePolicy) and describing two-player games' outcomes: declared in
// trainer/local_trainer.h.
#include <numeric>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/status.h"
#include "envs/env_agents.h"
#include "envs/env_plugin.h"
#include "policy/torch_status.h"
#include "trainer/local_trainer.h"

namespace rl {

absl::StatusOr<double> EvaluatePolicy(const RunSpec& spec, ActorCritic& policy,
                                      int episodes, uint64_t seed,
                                      std::vector<double>* returns) {
  // The rows EvaluateActions opens: whole environments of several agents.
  const int64_t E = WholeCopies(std::min(episodes, 64), spec.env());
  torch::Tensor state = policy->InitialState(E);
  return EvaluateActions(
      spec,
      [&](const torch::Tensor& obs, const torch::Tensor& masks,
          const torch::Tensor& starts) -> absl::StatusOr<torch::Tensor> {
        if (state.defined()) state = state * starts.eq(0).unsqueeze(1);
        ASSIGN_OR_RETURN(const PolicyStep step,
                         ActChecked(policy, obs, c10::nullopt, true, masks,
                                    state.defined() ? &state : nullptr));
        RETURN_IF_ERROR(policy->CheckActions(step.actions, "actions", E));
        return step.actions.to(torch::kCPU);  // the envs read them here
      },
      episodes, seed, returns);
}

absl::StatusOr<double> EvaluateActions(const RunSpec& spec,
                                       const EvaluationActor& act, int episodes,
                                       uint64_t seed,
                                       std::vector<double>* finished_returns) {
  if (episodes < 1) {
    return absl::InvalidArgumentError("episodes must be >= 1");
  }
  RunSpec eval_spec = spec;
  // Whole environments: several agents each are as many rows.
  eval_spec.set_envs_per_actor(WholeCopies(std::min(episodes, 64), spec.env()));
  EnvOpenOptions options;
  options.num_envs = eval_spec.envs_per_actor();
  options.seed = seed;
  ASSIGN_OR_RETURN(auto env, OpenEnv(spec.env(), options));
  const EnvSpec& info = env->spec();
  const int64_t E = eval_spec.envs_per_actor();
  torch::Tensor obs = torch::zeros(
      {E, info.observation_size()},
      ObservationsAreBytes(info) ? torch::kUInt8 : torch::kFloat32);
  torch::Tensor returns = torch::zeros({E});
  torch::Tensor lengths = torch::zeros({E}, torch::kInt32);
  torch::Tensor rewards = torch::zeros({E});
  torch::Tensor term = torch::zeros({E}, torch::kUInt8);
  torch::Tensor trunc = torch::zeros({E}, torch::kUInt8);
  // The env's action masks, when it writes them: a masked action is never
  // taken, in evaluation either.
  torch::Tensor masks;
  if (info.action_mask()) {
    masks = torch::ones({E, ActionMaskSize(info)}, torch::kUInt8);
  }
  RETURN_IF_ERROR(env->Reset(
      obs.data_ptr(), masks.defined() ? masks.data_ptr<uint8_t>() : nullptr));
  // Each env slot plays episodes until `episodes` have finished in total;
  // only the first `episodes` completions count, in slot order per step.
  std::vector<double> finished;
  c10::InferenceMode inference;
  // The actions the env takes: int64 [E] or [E, parts], float [E, A].
  std::vector<int64_t> action_shape = {E};
  if (IsMultiDiscrete(info)) action_shape.push_back(info.action_nvec_size());
  if (!IsDiscrete(info)) action_shape.push_back(info.continuous_action_size());
  // Every env begins an episode at the reset, then wherever one ended.
  torch::Tensor starts = torch::ones({E}, torch::kUInt8);
  while (static_cast<int>(finished.size()) < episodes) {
    ASSIGN_OR_RETURN(const torch::Tensor chosen, act(obs, masks, starts));
    RETURN_IF_ERROR(CheckTensor(
        chosen, "actions", IsDiscrete(info) ? torch::kInt64 : torch::kFloat32,
        action_shape));
    StepOutputs out;
    out.observations = obs.data_ptr();
    if (masks.defined()) out.action_masks = masks.data_ptr<uint8_t>();
    out.rewards = rewards.data_ptr<float>();
    out.terminated = term.data_ptr<uint8_t>();
    out.truncated = trunc.data_ptr<uint8_t>();
    out.episode_returns = returns.data_ptr<float>();
    out.episode_lengths = lengths.data_ptr<int32_t>();
    // The envs read the actions' memory on the host.
    const torch::Tensor actions = chosen.to(torch::kCPU).contiguous();
    RETURN_IF_ERROR(IsDiscrete(info)
                        ? env->StepDiscrete(actions.data_ptr<int64_t>(), out)
                        : env->StepContinuous(actions.data_ptr<float>(), out));
    starts.copy_(term | trunc);
    for (int64_t e = 0; e < E; ++e) {
      // With env.episodic_life an episode is a game, over every life.
      if (info.episodic_life()
              ? lengths.data_ptr<int32_t>()[e] > 0
              : (term.data_ptr<uint8_t>()[e] | trunc.data_ptr<uint8_t>()[e])) {
        if (static_cast<int>(finished.size()) < episodes) {
          finished.push_back(returns.data_ptr<float>()[e]);
        }
      }
    }
  }
  if (finished_returns != nullptr) *finished_returns = finished;
  return std::accumulate(finished.begin(), finished.end(), 0.0) /
         finished.size();
}

std::string DescribeGameOutcomes(const std::vector<double>& returns) {
  double won = 0, drew = 0, lost = 0;
  for (const double r : returns) {
    if (r == 1) {
      ++won;
    } else if (r == 0) {
      ++drew;
    } else if (r == -1) {
      ++lost;
    } else {
      return "";
    }
  }
  if (returns.empty()) return "";
  const double n = static_cast<double>(returns.size()) / 100;
  return absl::StrFormat("won %.1f%%, drew %.1f%%, lost %.1f%%", won / n,
                         drew / n, lost / n);
}

}  // namespace rl
