#include "policy/compute_device.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(ComputeDeviceTest, CpuIsAlwaysFine) {
  EXPECT_OK(CheckComputeDevice("cpu", "resources.learner_device", "learner"));
  EXPECT_OK(CheckComputeDevice("", "resources.learner_device", "learner"));
}

TEST(ComputeDeviceTest, CudaIsRefusedNeverRunOnTheCpu) {
  const absl::Status status =
      CheckComputeDevice("cuda", "resources.learner_device", "this learner");
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("resources.learner_device: \"cuda\""),
                    HasSubstr("refuses rather than run on the CPU")));
  if (VisibleCudaDevices().empty()) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), HasSubstr("this learner sees no CUDA"));
  } else {
    EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  }
  // A device index beyond those visible is bad input anywhere.
  EXPECT_THAT(
      CheckComputeDevice("cuda:4096", "resources.actor_device", "this actor"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("resources.actor_device: \"cuda:4096\"")));
  EXPECT_THAT(CheckComputeDevice("tpu", "resources.actor_device", "x"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("must be cpu, cuda or cuda:N")));
}

TEST(ComputeDeviceTest, ACallerWithACudaPathGetsTheDeviceOrTheReason) {
  ASSERT_OK_AND_ASSIGN(
      const c10::Device cpu,
      ResolveComputeDevice("", "resources.learner_device", "this learner"));
  EXPECT_TRUE(cpu.is_cpu());
  EXPECT_THAT(ResolveComputeDevice("cuda:x", "resources.learner_device", "l"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("must be cpu, cuda or cuda:N")));
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
