#include "learner/gae_tensors.h"

#include <torch/torch.h>

#include "gtest/gtest.h"
#include "learner/gae.h"

namespace rl {
namespace {

// The tensors' GAE is the host loop's, episode ends of both kinds included.
TEST(GaeTensorsTest, MatchesTheHostLoop) {
  torch::manual_seed(4);
  for (const int64_t T : {1, 2, 37}) {
    const int64_t E = 23;
    const torch::Tensor rewards = torch::randn({T, E});
    const torch::Tensor values = torch::randn({T, E});
    const torch::Tensor next_values = torch::randn({E});
    const torch::Tensor terminated =
        (torch::rand({T, E}) < 0.1).to(torch::kUInt8);
    // Some rows both: terminated wins, as in the host loop.
    const torch::Tensor truncated =
        (torch::rand({T, E}) < 0.1).to(torch::kUInt8);
    const torch::Tensor truncated_values = torch::randn({T, E}) * truncated;
    std::vector<float> adv(T * E), ret(T * E);
    ComputeGae(
        {T, E, rewards.data_ptr<float>(), values.data_ptr<float>(),
         next_values.data_ptr<float>(), terminated.data_ptr<uint8_t>(),
         truncated.data_ptr<uint8_t>(), truncated_values.data_ptr<float>()},
        0.97f, 0.9f, adv.data(), ret.data());
    const auto [advantages, returns] =
        ComputeGaeTensors(rewards, values, next_values, terminated, truncated,
                          truncated_values, 0.97f, 0.9f);
    ASSERT_EQ(advantages.numel(), T * E);
    const torch::Tensor want_adv = torch::tensor(adv);
    const torch::Tensor want_ret = torch::tensor(ret);
    EXPECT_TRUE(torch::allclose(advantages, want_adv, 1e-5, 1e-5)) << T;
    EXPECT_TRUE(torch::allclose(returns, want_ret, 1e-5, 1e-5)) << T;
    EXPECT_GT(want_adv.abs().max().item<float>(), 0.5f);
  }
}

}  // namespace
}  // namespace rl
