#include "policy/normalize_kernel.h"

#include <vector>

#include "gtest/gtest.h"

namespace rl {
namespace {

TEST(NormalizeKernelTest, NormalizesPerFeatureAndClips) {
  const std::vector<float> x = {1, 10, 3, -50};  // 2 rows x 2 features.
  const std::vector<float> mean = {1, 0};
  const std::vector<float> var = {4, 1};
  std::vector<float> y(4);
  NormalizeParams params;
  params.clip = 5;
  params.epsilon = 0;
  NormalizeBatchCpu(x.data(), mean.data(), var.data(), y.data(), 2, 2, params);
  EXPECT_FLOAT_EQ(y[0], 0.0f);   // (1 - 1) / 2
  EXPECT_FLOAT_EQ(y[1], 5.0f);   // 10 clipped to 5
  EXPECT_FLOAT_EQ(y[2], 1.0f);   // (3 - 1) / 2
  EXPECT_FLOAT_EQ(y[3], -5.0f);  // -50 clipped to -5
}

TEST(NormalizeKernelTest, InPlaceAndEpsilonGuardsZeroVariance) {
  std::vector<float> x = {2, 2};
  const std::vector<float> mean = {1, 1};
  const std::vector<float> var = {0, 0};
  NormalizeParams params;  // epsilon 1e-8: 1 / 1e-4 = 1e4, clipped to 10.
  NormalizeBatchCpu(x.data(), mean.data(), var.data(), x.data(), 2, 1, params);
  EXPECT_FLOAT_EQ(x[0], 10.0f);
  EXPECT_FLOAT_EQ(x[1], 10.0f);
}

}  // namespace
}  // namespace rl
