// The CUDA kernels against the CPU loop, step by step from the same state:
// each round copies the CPU batch to the device, steps both once with the
// same actions and compares every output. (Long free runs would drift
// apart: nvcc fuses multiply-adds, and CartPole and Acrobot amplify
// last-bit differences.)
#include "envs/batched_env_cuda.h"

#include <cuda_runtime.h>

#include <cmath>
#include <random>
#include <vector>

#include "envs/env_batch.h"
#include "gtest/gtest.h"

namespace rl {
namespace {

template <typename T>
T* DeviceCopy(const std::vector<T>& host) {
  T* device = nullptr;
  EXPECT_EQ(cudaMalloc(&device, host.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(device, host.data(), host.size() * sizeof(T),
                       cudaMemcpyHostToDevice),
            cudaSuccess);
  return device;
}

template <typename T>
std::vector<T> HostCopy(const T* device, size_t n) {
  std::vector<T> host(n);
  EXPECT_EQ(
      cudaMemcpy(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost),
      cudaSuccess);
  return host;
}

bool Near(double got, double want) {
  return std::fabs(got - want) <= 1e-6 * std::fmax(1.0, std::fabs(want));
}

template <typename Env>
void CompareWithCpu(EnvKind kind) {
  constexpr int kObs = Env::kObsSize;
  constexpr int kState = Env::kStateSize;
  constexpr int kActionStride = Env::kNumActions > 0 ? 1 : Env::kActionSize;
  const int n = 2053;
  std::vector<double> state(kState * n), returns(n);
  std::vector<int32_t> elapsed(n);
  std::vector<uint64_t> episode(n);
  EnvBatch cpu;
  cpu.state = state.data();
  cpu.elapsed = elapsed.data();
  cpu.episode = episode.data();
  cpu.returns = returns.data();
  cpu.num_envs = n;
  cpu.max_episode_steps = 50;
  cpu.seed = 17;
  std::vector<float> reset_obs(n * kObs);
  ResetBatchCpu(kind, cpu, reset_obs.data(), 0, n);

  std::mt19937_64 rng(5);
  for (int round = 0; round < 120; ++round) {
    std::vector<typename Env::Action> actions(n * kActionStride);
    for (auto& a : actions) {
      if constexpr (Env::kNumActions > 0) {
        a = rng() % Env::kNumActions;
      } else {
        a = std::uniform_real_distribution<float>(1.5f * Env::kActionLow,
                                                  1.5f * Env::kActionHigh)(rng);
      }
    }
    EnvBatch gpu = cpu;
    gpu.state = DeviceCopy(state);
    gpu.elapsed = DeviceCopy(elapsed);
    gpu.episode = DeviceCopy(episode);
    gpu.returns = DeviceCopy(returns);
    const auto* d_actions = DeviceCopy(actions);
    std::vector<float> obs(n * kObs), final_obs(n * kObs, -9), rewards(n),
        ep_returns(n);
    std::vector<uint8_t> terminated(n), truncated(n);
    std::vector<int32_t> ep_lengths(n);
    StepBuffers d_out;
    d_out.observations = DeviceCopy(obs);
    d_out.final_observations = DeviceCopy(final_obs);
    d_out.rewards = DeviceCopy(rewards);
    d_out.episode_returns = DeviceCopy(ep_returns);
    d_out.terminated = DeviceCopy(terminated);
    d_out.truncated = DeviceCopy(truncated);
    d_out.episode_lengths = DeviceCopy(ep_lengths);

    StepBuffers out;
    out.observations = obs.data();
    out.final_observations = final_obs.data();
    out.rewards = rewards.data();
    out.episode_returns = ep_returns.data();
    out.terminated = terminated.data();
    out.truncated = truncated.data();
    out.episode_lengths = ep_lengths.data();
    StepBatchCpu(kind, cpu, actions.data(), out, 0, n);
    StepBatchCuda(kind, gpu, d_actions, d_out, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

    const auto g_obs = HostCopy(d_out.observations, obs.size());
    const auto g_final = HostCopy(d_out.final_observations, obs.size());
    const auto g_rewards = HostCopy(d_out.rewards, n);
    const auto g_returns = HostCopy(d_out.episode_returns, n);
    const auto g_term = HostCopy(d_out.terminated, n);
    const auto g_trunc = HostCopy(d_out.truncated, n);
    const auto g_lengths = HostCopy(d_out.episode_lengths, n);
    const auto g_state = HostCopy(gpu.state, state.size());
    const auto g_episode = HostCopy(gpu.episode, n);
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(g_term[i], terminated[i]) << Env::kId << " row " << i;
      ASSERT_EQ(g_trunc[i], truncated[i]) << Env::kId << " row " << i;
      ASSERT_EQ(g_lengths[i], ep_lengths[i]) << Env::kId << " row " << i;
      ASSERT_EQ(g_episode[i], episode[i]) << Env::kId << " row " << i;
      ASSERT_TRUE(Near(g_rewards[i], rewards[i])) << Env::kId << " row " << i;
      ASSERT_TRUE(Near(g_returns[i], ep_returns[i])) << Env::kId;
      for (int k = 0; k < kObs; ++k) {
        ASSERT_TRUE(Near(g_obs[i * kObs + k], obs[i * kObs + k])) << Env::kId;
        ASSERT_TRUE(Near(g_final[i * kObs + k], final_obs[i * kObs + k]))
            << Env::kId;
      }
      for (int k = 0; k < kState; ++k) {
        ASSERT_TRUE(Near(g_state[k * n + i], state[k * n + i])) << Env::kId;
      }
    }
    cudaFree(gpu.state);
    cudaFree(gpu.elapsed);
    cudaFree(gpu.episode);
    cudaFree(gpu.returns);
    cudaFree(const_cast<typename Env::Action*>(d_actions));
    cudaFree(d_out.observations);
    cudaFree(d_out.final_observations);
    cudaFree(d_out.rewards);
    cudaFree(d_out.episode_returns);
    cudaFree(d_out.terminated);
    cudaFree(d_out.truncated);
    cudaFree(d_out.episode_lengths);
  }
}

TEST(BatchedEnvCudaTest, KernelsMatchTheCpuLoop) {
  int devices = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess) << "no CUDA device";
  CompareWithCpu<CartPole>(EnvKind::kCartPole);
  CompareWithCpu<Acrobot>(EnvKind::kAcrobot);
  CompareWithCpu<MountainCar>(EnvKind::kMountainCar);
  CompareWithCpu<Pendulum>(EnvKind::kPendulum);
  CompareWithCpu<MountainCarContinuous>(EnvKind::kMountainCarContinuous);
}

TEST(BatchedEnvCudaTest, ResetMatchesTheCpuLoop) {
  const int n = 999;
  std::vector<double> state(4 * n), returns(n);
  std::vector<int32_t> elapsed(n);
  std::vector<uint64_t> episode(n, 3);
  EnvBatch cpu;
  cpu.state = state.data();
  cpu.elapsed = elapsed.data();
  cpu.episode = episode.data();
  cpu.returns = returns.data();
  cpu.num_envs = n;
  cpu.max_episode_steps = 500;
  cpu.seed = 99;
  EnvBatch gpu = cpu;
  gpu.state = DeviceCopy(state);
  gpu.elapsed = DeviceCopy(elapsed);
  gpu.episode = DeviceCopy(episode);
  gpu.returns = DeviceCopy(returns);
  std::vector<float> obs(4 * n);
  float* d_obs = DeviceCopy(obs);
  ResetBatchCpu(EnvKind::kCartPole, cpu, obs.data(), 0, n);
  ResetBatchCuda(EnvKind::kCartPole, gpu, d_obs, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  // Counter-based streams: bit-identical initial states on both.
  EXPECT_EQ(HostCopy(d_obs, obs.size()), obs);
  EXPECT_EQ(HostCopy(gpu.state, state.size()), state);
  EXPECT_EQ(HostCopy(gpu.episode, n), episode);
  cudaFree(gpu.state);
  cudaFree(gpu.elapsed);
  cudaFree(gpu.episode);
  cudaFree(gpu.returns);
  cudaFree(d_obs);
}

}  // namespace
}  // namespace rl
