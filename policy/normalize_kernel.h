// Batched observation normalisation, the element-wise op that actors run on
// every step when a run normalises observations:
//   y[r, j] = clamp((x[r, j] - mean[j]) / sqrt(var[j] + eps), -clip, clip)
// for rows r < num_rows (environments) and features j < dim.
// NormalizeElement is shared by the CPU loop and the CUDA kernel.
#ifndef RL_POLICY_NORMALIZE_KERNEL_H_
#define RL_POLICY_NORMALIZE_KERNEL_H_

#include <cmath>
#include <cstdint>

#include "common/host_device.h"

namespace rl {

struct NormalizeParams {
  float clip = 10.0f;
  float epsilon = 1e-8f;
};

RL_HOST_DEVICE inline float NormalizeElement(float x, float mean, float var,
                                             NormalizeParams params) {
  const float y = (x - mean) / sqrtf(var + params.epsilon);
  return y < -params.clip ? -params.clip : (y > params.clip ? params.clip : y);
}

// CPU: y may alias x. Arrays are row-major [num_rows, dim].
void NormalizeBatchCpu(const float* x, const float* mean, const float* var,
                       float* y, int64_t num_rows, int64_t dim,
                       NormalizeParams params);

// CUDA (built with --config=cuda): device pointers; enqueued on `stream`
// (a cudaStream_t, or nullptr for the default stream), no synchronisation.
void NormalizeBatchCuda(const float* x, const float* mean, const float* var,
                        float* y, int64_t num_rows, int64_t dim,
                        NormalizeParams params, void* stream);

}  // namespace rl

#endif  // RL_POLICY_NORMALIZE_KERNEL_H_
