#include "policy/device_act_check.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/logging.h"
#include "common/status.h"
#include "policy/torch_status.h"

namespace rl {
namespace {

constexpr int64_t kBatch = 16;
constexpr uint64_t kSeed = 20261126;

double MaxRelativeDifference(const torch::Tensor& want,
                             const torch::Tensor& got) {
  const torch::Tensor w = want.to(torch::kCPU, torch::kFloat64);
  const torch::Tensor g = got.to(torch::kCPU, torch::kFloat64);
  return ((g - w).abs() / torch::clamp_min(w.abs(), 1.0)).max().item<double>();
}

}  // namespace

std::string NetworkKey(const ActorCriticConfig& c) {
  using C = ActorCriticConfig;
  static constexpr const char* kEncoders[] = {"mlp", "nature_cnn",
                                              "impala_cnn"};
  static constexpr const char* kCores[] = {"", " lstm", " gru"};
  std::string actions;
  if (c.num_actions > 0) {
    actions = absl::StrCat("discrete ", c.num_actions);
  } else if (!c.action_nvec.empty()) {
    actions =
        absl::StrCat("multi_discrete ", absl::StrJoin(c.action_nvec, ","));
  } else {
    actions = absl::StrCat("box ", c.action_size);
  }
  // Every field that shapes the network or its computation: a readable key
  // (it names the check in logs and `rlctl workers`) that is also unique.
  return absl::StrCat(
      kEncoders[static_cast<int>(c.encoder)],
      c.image_chw.empty() ? "" : " image ", absl::StrJoin(c.image_chw, "x"),
      c.image_chw.empty() ? "" : (c.channels_last ? " hwc" : " chw"), " obs ",
      c.observation_size, c.byte_observations ? " uint8" : "",
      c.normalize_observations ? " normalized" : "", " -> [",
      absl::StrJoin(c.hidden_sizes, ","), "]", c.shared_trunk ? " shared" : "",
      c.activation == C::Activation::kRelu ? " relu" : " tanh",
      kCores[static_cast<int>(c.core)],
      c.core == C::Core::kNone ? "" : absl::StrCat(" ", c.core_size), " -> ",
      actions, c.action_masks ? " masked" : "",
      c.central_value_agents > 1
          ? absl::StrCat(" central value of ", c.central_value_agents)
          : "");
}

absl::Status CheckDeviceActing(const ActorCriticConfig& config,
                               torch::Device device,
                               const DeviceActCheckOptions& options) {
  ASSIGN_OR_RETURN(ActorCritic cpu, CreateSeededActorCritic(config, kSeed));
  ASSIGN_OR_RETURN(ActorCritic on_device,
                   CreateSeededActorCritic(config, kSeed));
  return CatchTorchErrors(
      absl::StrCat("the acting self-check on ", device.str()),
      [&]() -> absl::Status {
        torch::NoGradGuard no_grad;
        // Whole copies for a central critic (policy.central_value).
        const int64_t batch = kBatch * std::max(1, config.central_value_agents);
        on_device->to(device);
        if (options.perturb_for_testing) options.perturb_for_testing(on_device);
        auto gen = at::make_generator<at::CPUGeneratorImpl>(kSeed);
        const torch::Tensor observations =
            config.byte_observations
                ? torch::randint(0, 256, {batch, config.observation_size}, gen,
                                 torch::kUInt8)
                : torch::randn({batch, config.observation_size}, gen) * 1.5;
        torch::Tensor masks;
        if (config.action_masks) {
          masks = RandomActionMasks(config, batch, 0.7, gen);
        }
        torch::Tensor cpu_state, device_state;
        if (cpu->recurrent()) {
          cpu_state = torch::randn({batch, cpu->state_size()}, gen) * 0.3;
          device_state = cpu_state.clone();
        }
        auto cpu_gen = at::make_generator<at::CPUGeneratorImpl>(kSeed + 1);
        auto device_gen = at::make_generator<at::CPUGeneratorImpl>(kSeed + 1);
        const PolicyStep want =
            cpu->Act(observations, cpu_gen, /*deterministic=*/false, masks,
                     cpu_state.defined() ? &cpu_state : nullptr);
        const PolicyStep got = on_device->Act(
            observations, device_gen, /*deterministic=*/false, masks,
            device_state.defined() ? &device_state : nullptr);
        const auto out_of_tolerance = [&](const std::string& what,
                                          double diff) {
          return absl::FailedPreconditionError(absl::StrFormat(
              "the acting self-check of %s failed: acting on the same "
              "observations with the same weights and random stream, %s "
              "differ by %g from the CPU's (relative; the tolerance is %g). "
              "This binary's code for %s computes differently from its CPU "
              "code: the run is refused rather than trained wrong. Use cpu, "
              "and report it",
              device.str(), what, diff, options.tolerance, device.str()));
        };
        for (const auto& [what, w, g] :
             {std::make_tuple("the values", want.values, got.values),
              std::make_tuple("the log-probabilities", want.log_probs,
                              got.log_probs)}) {
          const double diff = MaxRelativeDifference(w, g);
          if (!(diff <= options.tolerance)) return out_of_tolerance(what, diff);
        }
        if (cpu_state.defined()) {
          const double diff = MaxRelativeDifference(cpu_state, device_state);
          if (!(diff <= options.tolerance)) {
            return out_of_tolerance("the recurrent states", diff);
          }
        }
        if (want.actions.is_floating_point()) {
          const double diff = MaxRelativeDifference(want.actions, got.actions);
          if (!(diff <= options.tolerance)) {
            return out_of_tolerance("the actions", diff);
          }
        } else {
          // A near-tie may flip one sample's argmax; more is a bug.
          const int64_t differing = want.actions.ne(got.actions.to(torch::kCPU))
                                        .reshape({batch, -1})
                                        .any(1)
                                        .sum()
                                        .item<int64_t>();
          if (differing > 1) {
            return out_of_tolerance(absl::StrCat("the actions (", differing,
                                                 " of ", batch, " rows)"),
                                    static_cast<double>(differing) / batch);
          }
        }
        return absl::OkStatus();
      });
}

namespace {

absl::Mutex checks_mu(absl::kConstInit);

std::map<std::string, absl::Status>& ChecksRun()
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(checks_mu) {
  static auto* results = new std::map<std::string, absl::Status>();
  return *results;
}

}  // namespace

absl::Status CheckOncePerProcess(const std::string& key,
                                 const std::function<absl::Status()>& check) {
  absl::MutexLock lock(&checks_mu);
  auto& results = ChecksRun();
  auto it = results.find(key);
  if (it != results.end()) return it->second;
  absl::Status status = check();
  results.emplace(key, status);
  return status;
}

std::vector<std::pair<std::string, absl::Status>> DeviceChecksRun() {
  absl::MutexLock lock(&checks_mu);
  return {ChecksRun().begin(), ChecksRun().end()};
}

absl::Status CheckDeviceActingOnFirstUse(const ActorCriticConfig& config,
                                         torch::Device device) {
  if (device.is_cpu()) return absl::OkStatus();
  return CheckOncePerProcess(
      absl::StrCat("acting on ", device.str(), " ", NetworkKey(config)),
      [&]() -> absl::Status {
        absl::Status status = CheckDeviceActing(config, device);
        if (status.ok()) {
          RL_LOG_INFO(
              "acting self-check of {} passed (values, log-probabilities, "
              "actions within {:g} of the CPU's)",
              device.str(), DeviceActCheckOptions().tolerance);
        }
        return status;
      });
}

}  // namespace rl
