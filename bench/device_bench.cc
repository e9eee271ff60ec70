// The PPO update on a compute device, side by side in one run: float32,
// float32 with the minibatch step in a CUDA graph (execution.cuda_graphs, on a
// CUDA device) and bfloat16 autocast (execution.precision), for an MLP at
// CartPole's shapes and a Nature CNN on 84x84x4 uint8 frames, with the share
// of each update spent in its one packed host-to-device copy. On a GPU machine
// it measures the GPU (--device=cuda, the default where one is visible); here,
// the CPU.
//
//   bazel run --config=opt //bench:device_bench -- [--device=cpu|cuda]
//       [--envs=64] [--steps=128] [--updates=5]
#include <torch/cuda.h>
#include <torch/utils.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "learner/ppo_updater.h"
#include "policy/actor_critic.h"
#include "policy/compute_device.h"
#include "policy/cuda_runtime.h"
#include "policy/device_transfer.h"
#include "policy/rollout.h"

ABSL_FLAG(std::string, device, "",
          "cpu, cuda or cuda:N (default: cuda where one is visible)");
ABSL_FLAG(int, envs, 64, "envs per rollout");
ABSL_FLAG(int, steps, 128, "steps per env per rollout");
ABSL_FLAG(int, updates, 5, "timed updates per case (after one warm-up)");

namespace {

using Clock = std::chrono::steady_clock;

struct Case {
  const char* name;
  rl::ActorCriticConfig config;
};

std::vector<Case> Cases() {
  rl::ActorCriticConfig mlp;
  mlp.observation_size = 4;
  mlp.num_actions = 2;
  mlp.hidden_sizes = {64, 64};
  rl::ActorCriticConfig cnn;
  cnn.observation_size = 84 * 84 * 4;
  cnn.num_actions = 6;
  cnn.byte_observations = true;
  cnn.encoder = rl::ActorCriticConfig::Encoder::kNatureCnn;
  cnn.image_chw = {4, 84, 84};
  cnn.channels_last = true;
  cnn.hidden_sizes = {512};
  cnn.shared_trunk = true;
  return {{"mlp 64x64 (CartPole)", mlp}, {"nature_cnn (84x84x4)", cnn}};
}

rl::Rollout MakeRollout(rl::ActorCritic& policy, int64_t T, int64_t E) {
  const rl::ActorCriticConfig& c = policy->config();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  rl::Rollout r = rl::Rollout::Allocate(
      T, E, c.observation_size, 0, 0, 0,
      c.byte_observations ? torch::kUInt8 : torch::kFloat32);
  torch::NoGradGuard no_grad;
  if (c.byte_observations) {
    r.observations.random_(0, 256, gen);
  } else {
    r.observations.normal_(0, 1, gen);
  }
  r.actions.random_(0, c.num_actions, gen);
  r.log_probs.fill_(-std::log(static_cast<float>(c.num_actions)));
  r.values.normal_(0, 1, gen);
  r.rewards.normal_(0, 1, gen);
  r.terminated.copy_((torch::rand({T, E}, gen) < 0.02).to(torch::kUInt8));
  return r;
}

void Synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  rl::PrepareCudaRuntime();
  torch::set_num_threads(1);
  std::string name = absl::GetFlag(FLAGS_device);
  if (name.empty()) name = rl::VisibleCudaDevices().empty() ? "cpu" : "cuda";
  auto device = rl::ResolveComputeDevice(name, "--device", "device_bench");
  if (!device.ok()) {
    std::fprintf(stderr, "%s\n",
                 std::string(device.status().message()).c_str());
    return 2;
  }
  const int64_t T = absl::GetFlag(FLAGS_steps), E = absl::GetFlag(FLAGS_envs);
  const int updates = absl::GetFlag(FLAGS_updates);
  std::printf(
      "PPO update on %s: %lld envs x %lld steps per rollout, 4 epochs x 4 "
      "minibatches, %d timed updates per case, 1 LibTorch CPU thread\n",
      device->str().c_str(), static_cast<long long>(E),
      static_cast<long long>(T), updates);
  std::printf("%-24s %-14s %14s %10s %12s\n", "network", "precision",
              "update steps/s", "vs f32", "copy share");
  struct Mode {
    const char* label;
    const char* precision;
    const char* cuda_graphs;
  };
  std::vector<Mode> modes = {{"float32", "float32", "off"}};
  if (device->is_cuda()) modes.push_back({"float32+graph", "float32", "on"});
  modes.push_back({"bfloat16", "bfloat16", "off"});
  for (const Case& c : Cases()) {
    double f32_sps = 0;
    for (const Mode& mode : modes) {
      rl::PPOConfig ppo;
      ppo.set_learning_rate(2.5e-4f);
      ppo.set_gamma(0.99f);
      ppo.set_gae_lambda(0.95f);
      ppo.set_num_epochs(4);
      ppo.set_num_minibatches(4);
      ppo.set_clip_coef(0.1f);
      ppo.set_value_coef(0.5f);
      ppo.set_entropy_coef(0.01f);
      ppo.set_max_grad_norm(0.5f);
      ppo.set_normalize_advantages(true);
      rl::ExecutionConfig execution;
      execution.set_cpu_kernels("libtorch");
      execution.set_precision(mode.precision);
      execution.set_cuda_graphs(mode.cuda_graphs);
      auto policy = rl::CreateSeededActorCritic(c.config, 1);
      if (!policy.ok()) {
        std::fprintf(stderr, "%s\n", policy.status().ToString().c_str());
        return 1;
      }
      (*policy)->to(*device);
      rl::PpoUpdater updater(*policy, ppo, 1 << 30, 1, execution);
      const rl::Rollout rollout = MakeRollout(*policy, T, E);
      if (!updater.Update(rollout, 0).ok()) return 1;  // warm-up
      Synchronize(*device);
      const auto start = Clock::now();
      for (int u = 0; u < updates; ++u) {
        const auto status = updater.Update(rollout, 0);
        if (!status.ok()) {
          std::fprintf(stderr, "%s\n", status.status().ToString().c_str());
          return 1;
        }
      }
      Synchronize(*device);
      const double seconds =
          std::chrono::duration<double>(Clock::now() - start).count();
      // The copy alone, as the update makes it (the rollout's tensors).
      const auto copy_start = Clock::now();
      for (int u = 0; u < updates; ++u) {
        rl::ToDevice({rollout.observations, rollout.actions, rollout.log_probs,
                      rollout.values, rollout.rewards},
                     *device);
      }
      Synchronize(*device);
      const double copy_seconds =
          std::chrono::duration<double>(Clock::now() - copy_start).count();
      const double sps = updates * T * E / seconds;
      if (f32_sps == 0) f32_sps = sps;
      std::printf("%-24s %-14s %14.0f %9.2fx %11.1f%%\n", c.name, mode.label,
                  sps, sps / f32_sps, 100.0 * copy_seconds / seconds);
      std::fflush(stdout);
    }
  }
  return 0;
}
