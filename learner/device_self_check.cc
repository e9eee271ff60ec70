#include "learner/device_self_check.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status.h"
#include "learner/ppo_updater.h"
#include "policy/device_act_check.h"
#include "policy/rollout.h"
#include "policy/torch_status.h"

namespace rl {
namespace {

constexpr int64_t kSteps = 8;
constexpr int64_t kEnvs = 4;
constexpr uint64_t kSeed = 20261126;

// A rollout the CPU policy could have collected: its own actions, log-probs
// and values on made-up observations, with made-up rewards and episode ends.
Rollout MakeRollout(ActorCritic& policy) {
  const ActorCriticConfig& c = policy->config();
  // Whole copies for a central critic (policy.central_value).
  const int64_t T = kSteps, E = kEnvs * std::max(1, c.central_value_agents),
                B = T * E;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(kSeed);
  Rollout r = Rollout::Allocate(
      T, E, c.observation_size, c.num_actions > 0 ? 0 : c.action_size,
      c.action_masks ? ActionMaskWidth(c) : 0,
      static_cast<int64_t>(c.action_nvec.size()),
      c.byte_observations ? torch::kUInt8 : torch::kFloat32,
      policy->state_size());
  torch::NoGradGuard no_grad;
  if (c.byte_observations) {
    r.observations.copy_(
        torch::randint(0, 256, r.observations.sizes(), gen, torch::kUInt8));
  } else {
    r.observations.copy_(torch::randn(r.observations.sizes(), gen) * 1.5);
  }
  torch::Tensor masks;
  if (r.action_masks.defined()) {
    r.action_masks.copy_(RandomActionMasks(c, B, 0.7, gen).view({T, E, -1}));
    masks = r.action_masks.reshape({B, -1});
  }
  torch::Tensor state;
  if (policy->recurrent()) {
    r.initial_state.copy_(torch::randn(r.initial_state.sizes(), gen) * 0.3);
    // The state before every step, as the actor carries it (the update
    // re-runs it from initial_state with the same zeroing).
    state = r.initial_state.clone();
  }
  r.terminated.copy_((torch::rand({T, E}, gen) < 0.1).to(torch::kUInt8));
  r.truncated.copy_((torch::rand({T, E}, gen) < 0.05).to(torch::kUInt8) *
                    (1 - r.terminated));
  for (int64_t t = 0; t < T; ++t) {
    const PolicyStep step =
        policy->Act(r.observations[t], gen, /*deterministic=*/false,
                    masks.defined() ? r.action_masks[t] : torch::Tensor(),
                    state.defined() ? &state : nullptr);
    r.actions[t].copy_(step.actions.reshape(r.actions[t].sizes()));
    r.log_probs[t].copy_(step.log_probs);
    r.values[t].copy_(step.values);
    if (state.defined()) {
      const torch::Tensor ended =
          (r.terminated[t] | r.truncated[t]).to(torch::kBool);
      state.masked_fill_(ended.unsqueeze(1), 0.0f);
    }
  }
  r.rewards.copy_(torch::randn({T, E}, gen));
  r.truncated_values.copy_(torch::randn({T, E}, gen) * r.truncated);
  r.next_values.copy_(torch::randn({E}, gen));
  return r;
}

std::vector<std::pair<std::string, torch::Tensor>> NamedState(
    ActorCritic& policy) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& item : policy->named_parameters()) {
    out.emplace_back(item.key(), item.value());
  }
  for (const auto& item : policy->named_buffers()) {
    out.emplace_back(item.key(), item.value());
  }
  return out;
}

}  // namespace

absl::StatusOr<DeviceCheckReport> CheckDeviceUpdate(
    const ActorCriticConfig& config, const PPOConfig& ppo,
    const ExecutionConfig& execution, torch::Device device,
    const DeviceCheckOptions& options) {
  PPOConfig fixed = ppo;
  fixed.set_num_epochs(1);
  // A graphed update warms up on two minibatches, captures the third and
  // replays it and the fourth (learner/ppo_graphed_step.cc).
  const bool graphs = execution.cuda_graphs() != "off" &&
                      (device.is_cuda() || options.deferred_graphs_for_testing);
  fixed.set_num_minibatches(graphs ? 4 : 1);
  fixed.set_target_kl(0);
  fixed.set_anneal_learning_rate(false);
  ASSIGN_OR_RETURN(ActorCritic cpu, CreateSeededActorCritic(config, kSeed));
  ASSIGN_OR_RETURN(ActorCritic on_device,
                   CreateSeededActorCritic(config, kSeed));
  const Rollout rollout = MakeRollout(cpu);
  RETURN_IF_ERROR(
      CatchTorchErrors(absl::StrCat("moving the policy to ", device.str()),
                       [&] { on_device->to(device); }));
  ExecutionConfig on_device_execution = execution;
  on_device_execution.set_cpu_kernels("libtorch");  // the same code on both
  ExecutionConfig reference = on_device_execution;
  reference.set_precision("float32");
  reference.set_cuda_graphs("off");  // the CPU's eager update
  PpoUpdater cpu_updater(cpu, fixed, /*total_env_steps=*/1, kSeed, reference);
  PpoUpdater device_updater(on_device, fixed, /*total_env_steps=*/1, kSeed,
                            on_device_execution);
  if (options.deferred_graphs_for_testing) {
    device_updater.UseDeferredGraphsForTesting();
  }
  ASSIGN_OR_RETURN(const UpdateStats want, cpu_updater.Update(rollout, 0));
  ASSIGN_OR_RETURN(const UpdateStats got, device_updater.Update(rollout, 0));
  if (options.perturb_for_testing) options.perturb_for_testing(on_device);

  DeviceCheckReport report;
  report.device = device.str();
  report.bfloat16 = device_updater.bfloat16();
  report.cuda_graphs = device_updater.cuda_graphs();
  report.tolerance =
      report.bfloat16 ? options.bfloat16_tolerance : options.tolerance;
  const auto compare = [&](const std::string& name, double want_value,
                           double got_value) -> absl::Status {
    const double diff =
        std::abs(got_value - want_value) / std::max(std::abs(want_value), 1.0);
    ++report.tensors_compared;
    if (!(diff <= report.max_relative_difference)) {
      report.max_relative_difference = diff;
      report.worst = name;
    }
    if (!(diff <= report.tolerance)) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "the self-check of %s failed: after one PPO update on the CPU "
          "(float32) and on %s (%s) from the same weights and rollout, %s "
          "differs by %g (relative; the tolerance is %g). This binary's "
          "code for %s computes differently from its CPU code: the run is "
          "refused rather than trained wrong. Use cpu, and report it",
          device.str(), device.str(),
          report.bfloat16 ? "bfloat16 autocast" : "float32", name, diff,
          report.tolerance, device.str()));
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(
      compare("the policy loss", want.policy_loss, got.policy_loss));
  RETURN_IF_ERROR(compare("the value loss", want.value_loss, got.value_loss));
  RETURN_IF_ERROR(compare("the entropy", want.entropy, got.entropy));
  RETURN_IF_ERROR(compare("the gradient norm", want.grad_norm, got.grad_norm));
  const auto want_state = NamedState(cpu);
  const auto got_state = NamedState(on_device);
  for (size_t i = 0; i < want_state.size(); ++i) {
    const auto& [name, want_tensor] = want_state[i];
    ASSIGN_OR_RETURN(const double diff,
                     CatchTorchErrors("comparing " + name, [&] {
                       torch::NoGradGuard no_grad;
                       const torch::Tensor w = want_tensor.to(torch::kFloat64);
                       const torch::Tensor g =
                           got_state[i].second.to(torch::kCPU, torch::kFloat64);
                       return ((g - w).abs() / torch::clamp_min(w.abs(), 1.0))
                           .max()
                           .item<double>();
                     }));
    // The tensor's largest difference against the tolerance.
    RETURN_IF_ERROR(compare(absl::StrCat("parameter ", name), 0, diff));
  }
  return report;
}

absl::Status CheckDeviceOnFirstUse(const ActorCriticConfig& config,
                                   const PPOConfig& ppo,
                                   const ExecutionConfig& execution,
                                   torch::Device device) {
  if (device.is_cpu()) return absl::OkStatus();
  return CheckOncePerProcess(
      absl::StrCat("updating on ", device.str(), " ", NetworkKey(config), " ",
                   execution.precision(), " graphs ", execution.cuda_graphs()),
      [&]() -> absl::Status {
        RL_LOG_INFO("self-check of {}: one PPO update on the CPU and on {}",
                    device.str(), device.str());
        ASSIGN_OR_RETURN(const DeviceCheckReport report,
                         CheckDeviceUpdate(config, ppo, execution, device));
        RL_LOG_INFO(
            "self-check of {} ({}{}) passed: {} tensors within {:g} of the "
            "CPU's (largest difference {:g}, {})",
            report.device, report.bfloat16 ? "bfloat16 autocast" : "float32",
            report.cuda_graphs ? ", CUDA graphs" : "", report.tensors_compared,
            report.tolerance, report.max_relative_difference, report.worst);
        return absl::OkStatus();
      });
}

}  // namespace rl
