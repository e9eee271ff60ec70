// CUDA backend of the batched environments: one kernel launch per step over
// the same per-environment functions as the CPU loop (env_batch.h). All
// pointers in `b`, `actions` and `out` are device memory; work is enqueued on
// `stream` (a cudaStream_t, or nullptr for the default stream) without
// synchronisation. Actions are not validated here: they come from the
// policy's own sampling on the device, which produces valid ones. Results
// can differ from the CPU's in the last bits (nvcc contracts a*b+c into
// fused multiply-adds; the CPU build does not).
#ifndef RL_ENVS_BATCHED_ENV_CUDA_H_
#define RL_ENVS_BATCHED_ENV_CUDA_H_

#include "envs/env_batch.h"

namespace rl {

// Steps all b.num_envs environments, with auto-reset, as StepBatchCpu.
void StepBatchCuda(EnvKind kind, const EnvBatch& b, const void* actions,
                   const StepBuffers& out, void* stream);

// Resets all environments, writing observations [E, obs] unless null.
void ResetBatchCuda(EnvKind kind, const EnvBatch& b, float* observations,
                    void* stream);

}  // namespace rl

#endif  // RL_ENVS_BATCHED_ENV_CUDA_H_
