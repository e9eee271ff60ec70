// The C entry of libcuda_envs.so: the built-in environments' CUDA kernels
// (envs/batched_env_cuda.cu), loaded on demand where a run steps them on a
// GPU (actor/device_envs.h), so that binaries link no CUDA.
//
// Every pointer is device memory. Work goes to the legacy default stream,
// the one LibTorch's current stream is unless a caller changed it, so it
// orders with the policy's kernels without any synchronisation. Each call
// returns 0, or a CUDA error code from launching (rl_cuda_envs.error says
// it in words); nothing waits for the kernels.
#ifndef RL_ENVS_CUDA_ENVS_EXT_H_
#define RL_ENVS_CUDA_ENVS_EXT_H_

#include "envs/env_batch.h"

extern "C" {

struct RlCudaEnvs {
  // Version of this table; RL_CUDA_ENVS_VERSION.
  int version;
  // The CUDA runtime the kernels were built with (CUDART_VERSION) and the
  // one the driver supports (cudaDriverGetVersion), e.g. 13000.
  int runtime_version;
  int driver_version;
  int (*reset)(int kind, const rl::EnvBatch* batch, float* observations);
  int (*step)(int kind, const rl::EnvBatch* batch, const void* actions,
              const rl::StepBuffers* out);
  const char* (*error)(int code);
};

// The table (name: kRlCudaEnvsEntry).
const RlCudaEnvs* rl_cuda_envs();
}

#define RL_CUDA_ENVS_VERSION 1
inline constexpr char kRlCudaEnvsEntry[] = "rl_cuda_envs";
inline constexpr char kRlCudaEnvsLibrary[] = "libcuda_envs.so";

#endif  // RL_ENVS_CUDA_ENVS_EXT_H_
