#include "policy/step_profiler.h"

#include <torch/torch.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

TEST(StepProfilerTest, RecordsTheStepsAsAChromeTrace) {
  const std::string path = MakeTestDir("profile") + "/trace.json";
  StepProfiler profiler(path, /*steps=*/2);
  torch::Tensor x = torch::randn({32, 32});
  for (int step = 0; step < 5; ++step) {
    ASSERT_OK(profiler.BeforeStep());
    x = torch::tanh(torch::mm(x, x) * 0.01);
  }
  EXPECT_FALSE(profiler.recording());
  EXPECT_EQ(profiler.steps_recorded(), 2);
  const std::string trace = ReadTestFile(path);
  EXPECT_THAT(trace, HasSubstr("\"traceEvents\""));
  EXPECT_THAT(trace, HasSubstr("aten::mm"));
  EXPECT_THAT(trace, HasSubstr("aten::tanh"));
}

TEST(StepProfilerTest, ALoopThatEndsEarlyStillWritesItsTrace) {
  const std::string path = MakeTestDir("profile_early") + "/trace.json";
  {
    StepProfiler profiler(path, /*steps=*/100);
    ASSERT_OK(profiler.BeforeStep());
    torch::relu(torch::randn({4}));
  }
  EXPECT_THAT(ReadTestFile(path), HasSubstr("aten::relu"));
}

TEST(StepProfilerTest, ZeroStepsRecordsNothing) {
  const std::string path = MakeTestDir("profile_off") + "/trace.json";
  StepProfiler profiler(path, 0);
  ASSERT_OK(profiler.BeforeStep());
  EXPECT_FALSE(profiler.recording());
  ASSERT_OK(profiler.Finish());
  EXPECT_EQ(ReadTestFile(path), "");
}

TEST(StepProfilerTest, AnUnwritablePathIsAnError) {
  StepProfiler profiler("/nonexistent-dir/trace.json", 1);
  ASSERT_OK(profiler.BeforeStep());
  torch::relu(torch::randn({4}));
  EXPECT_FALSE(profiler.BeforeStep().ok());
}

}  // namespace
}  // namespace rl
