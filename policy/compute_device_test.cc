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

// UseBfloat16's answer, failing the test where it is an error.
bool Bf16(absl::string_view precision, c10::Device device, bool conv) {
  const absl::StatusOr<bool> use = UseBfloat16(precision, device, conv);
  EXPECT_OK(use.status());
  return use.ok() && *use;
}

TEST(ComputeDeviceTest, Bfloat16WhereAskedOrWhereItPays) {
  const c10::Device cpu(c10::kCPU);
  const c10::Device cuda(c10::kCUDA, 0);
  for (const bool conv : {false, true}) {
    EXPECT_TRUE(Bf16("bfloat16", cpu, conv));
    EXPECT_FALSE(Bf16("float32", cuda, conv));
    // auto: never on the CPU, never for an MLP (measured slower on an H100).
    EXPECT_FALSE(Bf16("auto", cpu, conv));
    EXPECT_FALSE(Bf16("", cpu, conv));
  }
  EXPECT_FALSE(Bf16("auto", cuda, false));
  // A CNN on CUDA: by the device's compute capability (>= 8), which a
  // machine without a GPU cannot read, so there it is float32.
  if (VisibleCudaDevices().empty()) {
    EXPECT_FALSE(Bf16("auto", cuda, true));
  }
  EXPECT_THAT(
      UseBfloat16("half", cpu, false),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("execution.precision: must be auto, float32 or "
                         "bfloat16 (got \"half\")")));
}

}  // namespace
}  // namespace rl
