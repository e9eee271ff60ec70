#include <cuda_runtime.h>

#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "policy/normalize_kernel.h"

namespace rl {
namespace {

TEST(NormalizeKernelCudaTest, MatchesTheCpuLoop) {
  int devices = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess) << "no CUDA device";
  const int64_t rows = 4099, dim = 7;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0, 20);
  std::vector<float> x(rows * dim), mean(dim), var(dim), expected(rows * dim);
  for (float& v : x) v = normal(rng);
  for (int j = 0; j < dim; ++j) {
    mean[j] = normal(rng);
    var[j] = 1.0f + j;
  }
  NormalizeParams params;
  NormalizeBatchCpu(x.data(), mean.data(), var.data(), expected.data(), rows,
                    dim, params);

  float *dx, *dmean, *dvar;
  ASSERT_EQ(cudaMalloc(&dx, x.size() * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dmean, dim * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dvar, dim * sizeof(float)), cudaSuccess);
  cudaMemcpy(dx, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(dmean, mean.data(), dim * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(dvar, var.data(), dim * sizeof(float), cudaMemcpyHostToDevice);
  NormalizeBatchCuda(dx, dmean, dvar, dx, rows, dim, params, nullptr);
  std::vector<float> got(x.size());
  ASSERT_EQ(cudaMemcpy(got.data(), dx, got.size() * sizeof(float),
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], expected[i], 1e-5f) << "element " << i;
  }
  cudaFree(dx);
  cudaFree(dmean);
  cudaFree(dvar);
}

}  // namespace
}  // namespace rl
