// The built-in envs stepped on a GPU alone (no policy): env steps/s of the
// CUDA kernels (envs/batched_env_cuda.cu) at 8192 to 1M envs, each kernel
// launch timed one by one and replayed from a CUDA graph of many steps,
// beside the same per-env functions on one CPU thread of this host, in one
// run. Actions are random, drawn on the host once and cycled.
//
//   bazel build --config=cuda --config=opt //bench:cuda_env_bench
//   bazel-bin/bench/cuda_env_bench [--envs=8192,65536,1048576] [--steps=200]
//
// The floor (docs/benchmarks.md): a CartPole step moves ~130 bytes (state
// read and written in float64, observation, reward, flags, counters), so an
// H100's ~3 TB/s caps it near 2.3e10 steps/s; small batches are bound by
// the launch instead, which the graph removes.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "envs/batched_env_cuda.h"
#include "envs/env_batch.h"

ABSL_FLAG(std::string, envs, "8192,65536,1048576",
          "env counts, comma-separated");
ABSL_FLAG(int, steps, 200, "timed steps per case (after 20 warm-up steps)");
ABSL_FLAG(int, cpu_envs, 8192, "envs of the one-thread CPU baseline");

namespace rl {
namespace {

#define CHECK_CUDA(call)                                                 \
  do {                                                                   \
    const cudaError_t error = (call);                                    \
    if (error != cudaSuccess) {                                          \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
                   cudaGetErrorString(error));                           \
      std::exit(1);                                                      \
    }                                                                    \
  } while (0)

template <typename T>
T* DeviceArray(size_t n) {
  T* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, n * sizeof(T)));
  CHECK_CUDA(cudaMemset(p, 0, n * sizeof(T)));
  return p;
}

constexpr int kActionSets = 16;  // cycled random action arrays

struct Timings {
  double launches = 0;  // env steps/s, one launch per step
  double graph = 0;     // env steps/s, a graph of `steps` launches
};

// CartPole's kernels on `n` envs.
Timings TimeCuda(int64_t n, int steps) {
  constexpr int kObs = CartPole::kObsSize;
  EnvBatch b;
  b.state = DeviceArray<double>(CartPole::kStateSize * n);
  b.elapsed = DeviceArray<int32_t>(n);
  b.episode = DeviceArray<uint64_t>(n);
  b.returns = DeviceArray<double>(n);
  b.num_envs = n;
  b.max_episode_steps = 500;
  b.seed = 7;
  StepBuffers out;
  out.observations = DeviceArray<float>(n * kObs);
  out.final_observations = DeviceArray<float>(n * kObs);
  out.rewards = DeviceArray<float>(n);
  out.episode_returns = DeviceArray<float>(n);
  out.terminated = DeviceArray<uint8_t>(n);
  out.truncated = DeviceArray<uint8_t>(n);
  out.episode_lengths = DeviceArray<int32_t>(n);
  std::vector<CartPole::Action*> actions(kActionSets);
  std::mt19937_64 rng(11);
  for (auto& a : actions) {
    std::vector<CartPole::Action> host(n);
    for (auto& x : host) x = static_cast<CartPole::Action>(rng() % 2);
    a = DeviceArray<CartPole::Action>(n);
    CHECK_CUDA(cudaMemcpy(a, host.data(), n * sizeof(CartPole::Action),
                          cudaMemcpyHostToDevice));
  }
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  ResetBatchCuda(EnvKind::kCartPole, b, out.observations, stream);
  for (int s = 0; s < 20; ++s) {
    StepBatchCuda(EnvKind::kCartPole, b, actions[s % kActionSets], out, stream);
  }
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaStreamSynchronize(stream));

  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  Timings t;
  CHECK_CUDA(cudaEventRecord(start, stream));
  for (int s = 0; s < steps; ++s) {
    StepBatchCuda(EnvKind::kCartPole, b, actions[s % kActionSets], out, stream);
  }
  CHECK_CUDA(cudaEventRecord(stop, stream));
  CHECK_CUDA(cudaEventSynchronize(stop));
  CHECK_CUDA(cudaGetLastError());
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  t.launches = static_cast<double>(n) * steps / (ms * 1e-3);

  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  for (int s = 0; s < steps; ++s) {
    StepBatchCuda(EnvKind::kCartPole, b, actions[s % kActionSets], out, stream);
  }
  CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  CHECK_CUDA(cudaGraphLaunch(exec, stream));  // warm-up
  CHECK_CUDA(cudaEventRecord(start, stream));
  CHECK_CUDA(cudaGraphLaunch(exec, stream));
  CHECK_CUDA(cudaEventRecord(stop, stream));
  CHECK_CUDA(cudaEventSynchronize(stop));
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  t.graph = static_cast<double>(n) * steps / (ms * 1e-3);

  // The envs really stepped: episodes ended and began again.
  std::vector<uint64_t> episode(n);
  CHECK_CUDA(cudaMemcpy(episode.data(), b.episode, n * sizeof(uint64_t),
                        cudaMemcpyDeviceToHost));
  uint64_t episodes = 0;
  for (uint64_t e : episode) episodes += e;
  if (episodes <= static_cast<uint64_t>(n)) {
    std::fprintf(stderr,
                 "no episode ended in %lld envs: the kernel did not run\n",
                 static_cast<long long>(n));
    std::exit(1);
  }
  CHECK_CUDA(cudaGraphExecDestroy(exec));
  CHECK_CUDA(cudaGraphDestroy(graph));
  CHECK_CUDA(cudaEventDestroy(start));
  CHECK_CUDA(cudaEventDestroy(stop));
  CHECK_CUDA(cudaStreamDestroy(stream));
  for (void* p :
       {static_cast<void*>(b.state), static_cast<void*>(b.elapsed),
        static_cast<void*>(b.episode), static_cast<void*>(b.returns),
        static_cast<void*>(out.observations),
        static_cast<void*>(out.final_observations),
        static_cast<void*>(out.rewards),
        static_cast<void*>(out.episode_returns),
        static_cast<void*>(out.terminated), static_cast<void*>(out.truncated),
        static_cast<void*>(out.episode_lengths)}) {
    CHECK_CUDA(cudaFree(p));
  }
  for (auto* a : actions) CHECK_CUDA(cudaFree(a));
  return t;
}

// The same functions on one CPU thread (StepBatchCpu), env steps/s.
double TimeCpu(int64_t n, int steps) {
  constexpr int kObs = CartPole::kObsSize;
  std::vector<double> state(CartPole::kStateSize * n), returns(n);
  std::vector<int32_t> elapsed(n), lengths(n);
  std::vector<uint64_t> episode(n);
  std::vector<float> obs(n * kObs), final_obs(n * kObs), rewards(n),
      ep_returns(n);
  std::vector<uint8_t> terminated(n), truncated(n);
  EnvBatch b{
      state.data(), elapsed.data(), episode.data(), returns.data(), n, 500, 7};
  StepBuffers out{obs.data(),       rewards.data(),   terminated.data(),
                  truncated.data(), final_obs.data(), ep_returns.data(),
                  lengths.data()};
  std::vector<std::vector<CartPole::Action>> actions(kActionSets);
  std::mt19937_64 rng(11);
  for (auto& a : actions) {
    a.resize(n);
    for (auto& x : a) x = static_cast<CartPole::Action>(rng() % 2);
  }
  ResetBatchCpu(EnvKind::kCartPole, b, obs.data(), 0, n);
  for (int s = 0; s < 5; ++s) {
    StepBatchCpu(EnvKind::kCartPole, b, actions[s % kActionSets].data(), out, 0,
                 n);
  }
  const auto begin = std::chrono::steady_clock::now();
  for (int s = 0; s < steps; ++s) {
    StepBatchCpu(EnvKind::kCartPole, b, actions[s % kActionSets].data(), out, 0,
                 n);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
          .count();
  return static_cast<double>(n) * steps / seconds;
}

int Main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "cuda_env_bench: no CUDA device here\n");
    return 2;
  }
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  const int steps = absl::GetFlag(FLAGS_steps);
  const double cpu = TimeCpu(absl::GetFlag(FLAGS_cpu_envs), steps);
  std::printf(
      "CartPole-v1 stepped alone on %s (random actions, %d timed steps) vs "
      "one CPU thread of this host (%d envs): %.3g env steps/s\n",
      prop.name, steps, absl::GetFlag(FLAGS_cpu_envs), cpu);
  std::printf("%10s %18s %18s %12s %12s\n", "envs", "launches steps/s",
              "graph steps/s", "launch/CPU", "graph/CPU");
  for (absl::string_view part :
       absl::StrSplit(absl::GetFlag(FLAGS_envs), ',', absl::SkipEmpty())) {
    int64_t n = 0;
    if (!absl::SimpleAtoi(part, &n) || n <= 0) {
      std::fprintf(stderr, "--envs: \"%s\" is not a positive count\n",
                   std::string(part).c_str());
      return 2;
    }
    const Timings t = TimeCuda(n, steps);
    std::printf("%10lld %18.3g %18.3g %11.0fx %11.0fx\n",
                static_cast<long long>(n), t.launches, t.graph,
                t.launches / cpu, t.graph / cpu);
  }
  return 0;
}

}  // namespace
}  // namespace rl

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return rl::Main();
}
