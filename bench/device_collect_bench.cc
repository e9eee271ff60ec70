// Collection with the built-in envs, the policy and the rollout on one
// device (actor/device_collector.h), and training end to end (collect, then
// the PPO update on the same device), beside the host's collector (envs on
// the CPU, inference on the device: what a plugin env does), in one run.
// CartPole-v1, the default MLP (64x64), one segment of --steps per update,
// 4 epochs x 4 minibatches.
//
//   bazel run --config=opt --config=cuda //bench:device_collect_bench --
//       [--device=cuda] [--envs=8192,65536] [--steps=128] [--segments=4]
//
// On a GPU the env kernels come from libcuda_envs.so (beside the binary, in
// ../envs/ or $RL_GPU_LIBRARY_PATH). Steps/s count env steps; "vs host" is
// the ratio to the host's envs doing the same at the same number of envs
// (collection alone, or collection and the update on the device, graphed
// where the device is a GPU).
#include <c10/util/Exception.h>
#include <torch/cuda.h>
#include <torch/utils.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "actor/device_collector.h"
#include "actor/rollout_collector.h"
#include "envs/env_registry.h"
#include "learner/ppo_updater.h"
#include "policy/actor_critic.h"
#include "policy/compute_device.h"
#include "policy/cuda_runtime.h"

ABSL_FLAG(std::string, device, "",
          "cpu, cuda or cuda:N (default: cuda where one is visible)");
ABSL_FLAG(std::string, envs, "8192,65536", "envs per collector, a list");
ABSL_FLAG(int, steps, 128, "steps per env per segment");
ABSL_FLAG(int, segments, 4, "timed segments per case (after one warm-up)");

namespace {

using Clock = std::chrono::steady_clock;

void Synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

rl::RunSpec Spec(int64_t envs, int64_t steps, const char* cuda_graphs) {
  rl::RunSpec spec;
  spec.mutable_env()->set_id("CartPole-v1");
  if (absl::Status resolved = rl::ResolveEnvSpec(spec.mutable_env());
      !resolved.ok()) {
    std::fprintf(stderr, "%s\n", resolved.ToString().c_str());
    std::exit(1);
  }
  spec.set_envs_per_actor(static_cast<int>(envs));
  spec.set_segment_length(static_cast<int>(steps));
  rl::PPOConfig& ppo = *spec.mutable_ppo();
  ppo.set_learning_rate(2.5e-4f);
  ppo.set_gamma(0.99f);
  ppo.set_gae_lambda(0.95f);
  ppo.set_num_epochs(4);
  ppo.set_num_minibatches(4);
  ppo.set_clip_coef(0.2f);
  ppo.set_value_coef(0.5f);
  ppo.set_entropy_coef(0.01f);
  ppo.set_max_grad_norm(0.5f);
  ppo.set_normalize_advantages(true);
  rl::ExecutionConfig& execution = *spec.mutable_execution();
  execution.set_cpu_kernels("libtorch");
  execution.set_precision("float32");
  execution.set_cuda_graphs(cuda_graphs);
  return spec;
}

struct Result {
  double steps_per_second = 0;
  double mean_return = 0;  // of the episodes in the last segment
  std::string error;
};

// `segments` timed segments (after a warm-up) of `collector`, each followed
// by an update where `train`.
template <typename Collector>
Result Run(Collector& collector, const rl::RunSpec& spec,
           const torch::Device& device, int segments, bool train) {
  Result result;
  auto policy = rl::CreateSeededActorCritic(rl::RunNetworkConfig(spec), 1);
  if (!policy.ok()) {
    result.error = policy.status().ToString();
    return result;
  }
  (*policy)->to(device);
  rl::PpoUpdater updater(*policy, spec.ppo(), int64_t{1} << 40, 1,
                         spec.execution());
  rl::Rollout rollout = collector.AllocateRollout();
  const int64_t steps = rollout.num_steps() * rollout.num_envs();
  Clock::time_point start;
  for (int s = 0; s <= segments; ++s) {
    if (s == 1) {
      Synchronize(device);
      start = Clock::now();
    }
    absl::Status status = collector.Collect(*policy, &rollout);
    if (status.ok() && train)
      status = updater.Update(rollout, s * steps).status();
    if (!status.ok()) {
      result.error = status.ToString();
      return result;
    }
  }
  Synchronize(device);
  const double seconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  result.steps_per_second = segments * steps / seconds;
  double sum = 0;
  for (float r : collector.episode_returns()) sum += r;
  if (!collector.episode_returns().empty()) {
    result.mean_return = sum / collector.episode_returns().size();
  }
  return result;
}

// Counts LibTorch's "synchronizing CUDA operation" warnings (its sync debug
// mode, set through libcuda_graph.so) while a collector's step loop runs.
class SyncCounter final : public c10::WarningHandler {
 public:
  void process(const c10::Warning& warning) override {
    if (inside_ && warning.msg().find("synchroniz") != std::string::npos) {
      ++count_;
    }
  }
  void Observe(bool inside) { inside_ = inside; }
  int64_t count() const { return count_; }

 private:
  bool inside_ = false;
  int64_t count_ = 0;
};

// The host synchronisations inside the step loop over `segments` segments
// of envs and policy on `device` (a GPU); -1 where they cannot be counted.
int64_t CountStepLoopSyncs(const rl::RunSpec& spec, const torch::Device& device,
                           int segments, std::string* why) {
  auto entry =
      rl::LoadGpuExtension("libcuda_graph.so", "rl_cuda_set_sync_debug_mode");
  if (!entry.ok()) {
    *why = std::string(entry.status().message());
    return -1;
  }
  auto set_mode = reinterpret_cast<void (*)(int)>(*entry);
  auto collector = rl::DeviceCollector::Create(spec, 1, device);
  if (!collector.ok()) {
    *why = collector.status().ToString();
    return -1;
  }
  auto policy = rl::CreateSeededActorCritic(rl::RunNetworkConfig(spec), 1);
  if (!policy.ok()) {
    *why = policy.status().ToString();
    return -1;
  }
  (*policy)->to(device);
  rl::Rollout rollout = (*collector)->AllocateRollout();
  SyncCounter counter;
  c10::WarningUtils::WarningHandlerGuard guard(&counter);
  c10::WarningUtils::set_warnAlways(true);
  (*collector)->SetStepLoopObserverForTesting([&](bool inside) {
    counter.Observe(inside);
  });
  set_mode(1);
  // The counter must see a synchronisation that is known to happen.
  counter.Observe(true);
  const float known = torch::ones({1}, torch::TensorOptions().device(device))
                          .sum()
                          .item<float>();
  counter.Observe(false);
  if (counter.count() < 1 || known != 1.0f) {
    set_mode(0);
    *why = "LibTorch's sync debug mode did not report a known .item()";
    return -1;
  }
  const int64_t calibration = counter.count();
  for (int s = 0; s < segments; ++s) {
    if (absl::Status status = (*collector)->Collect(*policy, &rollout);
        !status.ok()) {
      set_mode(0);
      *why = status.ToString();
      return -1;
    }
  }
  set_mode(0);
  return counter.count() - calibration;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  rl::PrepareCudaRuntime();
  torch::set_num_threads(1);
  std::string name = absl::GetFlag(FLAGS_device);
  if (name.empty()) name = rl::VisibleCudaDevices().empty() ? "cpu" : "cuda";
  auto device = rl::ResolveComputeDevice(name, "--device", "bench");
  if (!device.ok()) {
    std::fprintf(stderr, "%s\n",
                 std::string(device.status().message()).c_str());
    return 2;
  }
  const int64_t steps = absl::GetFlag(FLAGS_steps);
  const int segments = absl::GetFlag(FLAGS_segments);
  std::printf(
      "CartPole-v1 on %s: %lld steps per segment, %d timed segments per case "
      "(after one warm-up), MLP 64x64, 4 epochs x 4 minibatches per update, "
      "1 LibTorch CPU thread, 1 host env thread\n",
      device->str().c_str(), static_cast<long long>(steps), segments);
  std::printf("%8s  %-40s %14s %9s %12s\n", "envs", "case", "env steps/s",
              "vs host", "mean return");
  for (absl::string_view text :
       absl::StrSplit(absl::GetFlag(FLAGS_envs), ',')) {
    int64_t envs = 0;
    if (!absl::SimpleAtoi(text, &envs) || envs < 1) {
      std::fprintf(stderr, "--envs: %s is not a count\n",
                   std::string(text).c_str());
      return 2;
    }
    // Each row against the host's envs doing the same (collect, or collect
    // and update on the device: the path of a plugin env).
    double baseline = 0;
    auto print = [&](const char* label, const Result& r) {
      if (!r.error.empty()) {
        std::printf("%8lld  %-40s FAILED: %s\n", static_cast<long long>(envs),
                    label, r.error.c_str());
        return;
      }
      std::printf("%8lld  %-40s %14.0f %8.2fx %12.1f\n",
                  static_cast<long long>(envs), label, r.steps_per_second,
                  baseline > 0 ? r.steps_per_second / baseline : 1.0,
                  r.mean_return);
      std::fflush(stdout);
    };
    const struct {
      const char* label;
      bool on_device;
      bool train;
      const char* cuda_graphs;
    } cases[] = {
        {"collect: host envs, policy on device", false, false, "off"},
        {"collect: envs + policy on device", true, false, "off"},
        {"train: host envs, update on device", false, true, "on"},
        {"train: envs + policy + update on device", true, true, "on"},
        {"  the same, update without CUDA graph", true, true, "off"},
    };
    for (const auto& c : cases) {
      const bool graphs = std::string(c.cuda_graphs) == "on";
      const rl::RunSpec spec =
          Spec(envs, steps, graphs && device->is_cuda() ? "on" : "off");
      Result r;
      if (c.on_device) {
        auto collector = rl::DeviceCollector::Create(spec, 1, *device);
        r = collector.ok() ? Run(**collector, spec, *device, segments, c.train)
                           : Result{0, 0, collector.status().ToString()};
      } else {
        auto collector = rl::RolloutCollector::Create(spec, 1, 1);
        r = collector.ok() ? Run(**collector, spec, *device, segments, c.train)
                           : Result{0, 0, collector.status().ToString()};
        baseline = r.error.empty() ? r.steps_per_second : 0;
      }
      print(c.label, r);
    }
    if (device->is_cuda()) {
      std::string why;
      const int64_t syncs =
          CountStepLoopSyncs(Spec(envs, steps, "off"), *device, segments, &why);
      if (syncs < 0) {
        std::printf(
            "%8lld  host synchronisations in the step loop: not "
            "counted (%s)\n",
            static_cast<long long>(envs), why.c_str());
      } else {
        std::printf(
            "%8lld  host synchronisations in the step loop: %lld in "
            "%d segments x %lld steps (LibTorch's sync debug mode, which "
            "counted a known .item())\n",
            static_cast<long long>(envs), static_cast<long long>(syncs),
            segments, static_cast<long long>(steps));
      }
    }
  }
  return 0;
}
