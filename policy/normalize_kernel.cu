#include <cuda_runtime.h>

#include "policy/normalize_kernel.h"

namespace rl {
namespace {

__global__ void NormalizeKernel(const float* __restrict__ x,
                                const float* __restrict__ mean,
                                const float* __restrict__ var,
                                float* __restrict__ y, int64_t total,
                                int64_t dim, NormalizeParams params) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < total; i += stride) {
    const int64_t j = i % dim;
    y[i] = NormalizeElement(x[i], mean[j], var[j], params);
  }
}

}  // namespace

void NormalizeBatchCuda(const float* x, const float* mean, const float* var,
                        float* y, int64_t num_rows, int64_t dim,
                        NormalizeParams params, void* stream) {
  const int64_t total = num_rows * dim;
  if (total == 0) return;
  constexpr int kThreads = 256;
  const int64_t blocks64 = (total + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(blocks64 < 65535 ? blocks64 : 65535);
  NormalizeKernel<<<blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      x, mean, var, y, total, dim, params);
}

}  // namespace rl
