#include "runspec/run_footprint.h"

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runspec/run_spec.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

RunSpec Resolved(const std::string& yaml) {
  absl::StatusOr<RunSpec> spec = LoadRunSpec(yaml, RunFileFormat::kYaml);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : RunSpec();
}

constexpr double kMessageLimit = 256 << 20;

TEST(RunFootprintTest, SegmentBytesFollowTheWireLayout) {
  const RunSpec spec = Resolved(R"(
env: {id: CartPole-v1}
envs_per_actor: 8
segment_length: 128
ppo: {hidden_sizes: [64, 64], num_minibatches: 4}
)");
  const RunFootprint f = EstimateRunFootprint(spec);
  // Per row: 4 observation floats, an int64 action, log prob, value,
  // reward, truncated value, two flag bytes; then 8 x (4 + 1) floats.
  EXPECT_EQ(f.segment_bytes, 8 * 128 * (16 + 8 + 16 + 2) + 8 * 5 * 4);
  // Two trunks 4-64-64, a 64x2 policy head, a 64x1 value head.
  const double trunk = (4 * 64 + 64) + (64 * 64 + 64);
  EXPECT_EQ(f.parameters, 2 * trunk + (64 * 2 + 2) + (64 + 1));
  EXPECT_GT(f.actor_bytes, f.policy_bytes + f.segment_bytes);
  EXPECT_GT(f.learner_bytes, 4 * f.parameters * 4);
  EXPECT_OK(CheckRunFootprint(spec, f, {kMessageLimit, 1e9, 1e9}));
}

TEST(RunFootprintTest, ContinuousActionsAndLogStdCount) {
  const RunSpec spec = Resolved(R"(
env: {id: Pendulum-v1}
envs_per_actor: 2
segment_length: 4
ppo: {hidden_sizes: [8], num_minibatches: 1}
)");
  const RunFootprint f = EstimateRunFootprint(spec);
  // Pendulum: 3 observations, 1 continuous action (a float on the wire).
  EXPECT_EQ(f.segment_bytes, 2 * 4 * (12 + 4 + 16 + 2) + 2 * 4 * 4);
  EXPECT_EQ(f.parameters, 2 * (3 * 8 + 8) + (8 + 1) + (8 + 1) + 1);
}

TEST(RunFootprintTest, AProductOfInRangeFieldsIsRefusedNamingTheFields) {
  // Each field is in range; one segment would be about 18 TiB.
  const RunSpec spec = Resolved(R"(
env: {id: CartPole-v1}
envs_per_actor: 1048576
segment_length: 65536
ppo: {num_minibatches: 1}
)");
  const RunFootprint f = EstimateRunFootprint(spec);
  EXPECT_GT(f.segment_bytes, 1e12);
  const absl::Status status =
      CheckRunFootprint(spec, f, {kMessageLimit, 64e9, 64e9});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("envs_per_actor x segment_length"),
                    HasSubstr("TiB, over the 256 MiB message limit"),
                    HasSubstr("actor memory limit"),
                    HasSubstr("learner memory limit")));
}

TEST(RunFootprintTest, AVeryWideNetworkIsRefused) {
  const RunSpec spec = Resolved(R"(
env: {id: CartPole-v1}
ppo: {hidden_sizes: [65536, 65536, 65536, 65536]}
)");
  const RunFootprint f = EstimateRunFootprint(spec);
  EXPECT_GT(f.parameters, 6 * 65536.0 * 65536.0);
  const absl::Status status = CheckRunFootprint(spec, f, {kMessageLimit});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("ppo.hidden_sizes: the policy has about"),
                    HasSubstr("GiB per publication")));
}

TEST(RunFootprintTest, ZeroLimitsAreOff) {
  const RunSpec spec = Resolved(R"(
env: {id: CartPole-v1}
envs_per_actor: 1048576
segment_length: 65536
ppo: {num_minibatches: 1}
)");
  EXPECT_OK(CheckRunFootprint(spec, EstimateRunFootprint(spec), {}));
}

TEST(RunFootprintTest, FormatsBytes) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(256 << 20), "256 MiB");
  EXPECT_EQ(FormatBytes(18.0 * (1ull << 40)), "18 TiB");
}

}  // namespace
}  // namespace rl
