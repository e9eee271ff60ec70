#include "policy/compute_device.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(ComputeDeviceTest, TheDeviceOrTheReasonItIsRefused) {
  ASSERT_OK_AND_ASSIGN(
      const c10::Device cpu,
      ResolveComputeDevice("", "resources.learner_device", "this learner"));
  EXPECT_TRUE(cpu.is_cpu());
  for (const char* bad : {"cuda:x", "tpu", "cuda:-1"}) {
    EXPECT_THAT(ResolveComputeDevice(bad, "resources.actor_device", "l"),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("resources.actor_device: must be cpu, cuda "
                                   "or cuda:N")));
  }
  const absl::StatusOr<c10::Device> cuda = ResolveComputeDevice(
      "cuda:1", "resources.learner_device", "this learner");
  if (VisibleCudaDevices().size() < 2) {
    // Refused with why: here, no driver or no GPU runtime.
    EXPECT_THAT(cuda, StatusIs(absl::StatusCode::kInvalidArgument,
                               AllOf(HasSubstr("resources.learner_device: "
                                               "\"cuda:1\", but this learner "
                                               "sees"),
                                     HasSubstr("refuses rather than run on "
                                               "the CPU"))));
  } else {
    ASSERT_OK(cuda.status());
    EXPECT_EQ(cuda->str(), "cuda:1");
  }
}

}  // namespace
}  // namespace rl
