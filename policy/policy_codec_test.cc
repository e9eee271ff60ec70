#include "policy/policy_codec.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rl {
namespace {

ActorCriticConfig Config(int hidden) {
  ActorCriticConfig c;
  c.observation_size = 3;
  c.action_size = 1;
  c.hidden_sizes = {hidden};
  c.normalize_observations = true;
  return c;
}

TEST(PolicyCodecTest, RoundTripsParametersAndBuffers) {
  torch::manual_seed(1);
  ActorCritic a(Config(8));
  ASSERT_TRUE(a->UpdateObservationStatistics(torch::randn({10, 3}) + 4).ok());
  PolicyUpdate update;
  ASSERT_TRUE(EncodePolicy(a, &update).ok());
  torch::manual_seed(2);
  ActorCritic b(Config(8));
  ASSERT_TRUE(DecodePolicy(update, b).ok());
  const torch::Tensor obs = torch::randn({5, 3});
  EXPECT_TRUE(torch::equal(a->Value(obs), b->Value(obs)));
  EXPECT_TRUE(torch::equal(a->named_buffers()["obs_mean"],
                           b->named_buffers()["obs_mean"]));
}

TEST(PolicyCodecTest, MismatchesAreRejectedAndLeaveThePolicyUnchanged) {
  ActorCritic small(Config(4));
  PolicyUpdate update;
  ASSERT_TRUE(EncodePolicy(small, &update).ok());
  ActorCritic big(Config(16));
  const torch::Tensor before = big->parameters()[0].clone();
  const absl::Status status = DecodePolicy(update, big);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), testing::HasSubstr("expected"));
  EXPECT_TRUE(torch::equal(big->parameters()[0], before));

  PolicyUpdate missing = update;
  missing.mutable_parameters()->RemoveLast();
  EXPECT_THAT(std::string(DecodePolicy(missing, small).message()),
              testing::HasSubstr("missing tensor"));
  PolicyUpdate unknown = update;
  unknown.mutable_parameters(0)->set_name("bogus");
  EXPECT_THAT(std::string(DecodePolicy(unknown, small).message()),
              testing::HasSubstr("no such tensor"));
  PolicyUpdate corrupt = update;
  corrupt.mutable_parameters(0)->mutable_tensor()->mutable_data()->pop_back();
  EXPECT_EQ(DecodePolicy(corrupt, small).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rl
