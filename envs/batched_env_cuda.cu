#include <cuda_runtime.h>

#include "envs/batched_env_cuda.h"

namespace rl {
namespace {

constexpr int kThreads = 256;

int NumBlocks(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65535 ? blocks : 65535);
}

template <typename Env>
__global__ void StepKernel(EnvBatch b,
                           const typename Env::Action* __restrict__ actions,
                           StepBuffers out) {
  constexpr int kActionStride = Env::kNumActions > 0 ? 1 : Env::kActionSize;
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < b.num_envs; i += stride) {
    StepEnv<Env>(b, i, actions + i * kActionStride, out);
  }
}

template <typename Env>
__global__ void ResetKernel(EnvBatch b, float* observations) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < b.num_envs; i += stride) {
    ResetEnv<Env>(
        b, i,
        observations == nullptr ? nullptr : observations + i * Env::kObsSize);
  }
}

}  // namespace

void StepBatchCuda(EnvKind kind, const EnvBatch& b, const void* actions,
                   const StepBuffers& out, void* stream) {
  if (b.num_envs == 0) return;
  VisitEnvKind(kind, [&](auto env) {
    using Env = decltype(env);
    StepKernel<Env><<<NumBlocks(b.num_envs), kThreads, 0,
                      static_cast<cudaStream_t>(stream)>>>(
        b, static_cast<const typename Env::Action*>(actions), out);
  });
}

void ResetBatchCuda(EnvKind kind, const EnvBatch& b, float* observations,
                    void* stream) {
  if (b.num_envs == 0) return;
  VisitEnvKind(kind, [&](auto env) {
    using Env = decltype(env);
    ResetKernel<Env><<<NumBlocks(b.num_envs), kThreads, 0,
                       static_cast<cudaStream_t>(stream)>>>(b, observations);
  });
}

}  // namespace rl
