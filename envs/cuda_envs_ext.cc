// libcuda_envs.so: the C entry of the built-in environments' CUDA kernels
// (envs/cuda_envs_ext.h). Built under --config=cuda only.
#include "envs/cuda_envs_ext.h"

#include <cuda_runtime.h>

#include "envs/batched_env_cuda.h"

namespace {

int Launched() { return static_cast<int>(cudaGetLastError()); }

int Reset(int kind, const rl::EnvBatch* batch, float* observations) {
  rl::ResetBatchCuda(static_cast<rl::EnvKind>(kind), *batch, observations,
                     /*stream=*/nullptr);
  return Launched();
}

int Step(int kind, const rl::EnvBatch* batch, const void* actions,
         const rl::StepBuffers* out) {
  rl::StepBatchCuda(static_cast<rl::EnvKind>(kind), *batch, actions, *out,
                    /*stream=*/nullptr);
  return Launched();
}

const char* Error(int code) {
  return cudaGetErrorString(static_cast<cudaError_t>(code));
}

}  // namespace

extern "C" const RlCudaEnvs* rl_cuda_envs() {
  static const RlCudaEnvs table = [] {
    RlCudaEnvs t{};
    t.version = RL_CUDA_ENVS_VERSION;
    t.runtime_version = CUDART_VERSION;
    int driver = 0;
    if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
    t.driver_version = driver;
    t.reset = Reset;
    t.step = Step;
    t.error = Error;
    return t;
  }();
  return &table;
}
