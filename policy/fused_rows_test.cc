#include "policy/fused_rows.h"

#include <ATen/CPUGeneratorImpl.h>

#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

ActorCritic Make(int num_actions, int action_size) {
  ActorCriticConfig c;
  c.observation_size = 5;
  c.num_actions = num_actions;
  c.action_size = action_size;
  c.hidden_sizes = {16, 16};
  c.initial_log_std = -0.3f;
  torch::manual_seed(3);
  return ActorCritic(c);
}

// Rows 1, 4 and 6 of 8, acted for with the same random stream as the
// fused kernels on those rows gathered by hand: the same actions,
// log-probabilities and values there, every other row untouched; then a
// different row count reuses the helper.
TEST(FusedRowsTest, ActsForItsRowsAsTheKernelsOnThemAndLeavesTheRest) {
  for (const auto& [num_actions, action_size] :
       {std::pair<int, int>{3, 0}, std::pair<int, int>{0, 2}}) {
    SCOPED_TRACE(num_actions > 0 ? "discrete" : "continuous");
    ActorCritic policy = Make(num_actions, action_size);
    const torch::Tensor observations = torch::randn({8, 5});
    for (const torch::Tensor& rows : {torch::tensor({1, 4, 6}, torch::kInt64),
                                      torch::tensor({0, 7}, torch::kInt64)}) {
      const int64_t k = rows.numel();
      const bool discrete = num_actions > 0;
      torch::Tensor actions =
          discrete ? torch::full({8}, -1, torch::kInt64)
                   : torch::full({8, action_size}, -9.0f, torch::kFloat32);
      torch::Tensor log_probs = torch::full({8}, 42.0f);
      torch::Tensor values = torch::full({8}, 42.0f);
      FusedRows fused;
      ASSERT_OK(fused.Bind(policy));
      torch::Generator generator = at::make_generator<at::CPUGeneratorImpl>(11);
      fused.Act(observations, rows, generator.get<at::CPUGeneratorImpl>(),
                actions, log_probs, values);

      FusedPolicy kernels;
      ASSERT_OK(kernels.Bind(policy));
      torch::Generator again = at::make_generator<at::CPUGeneratorImpl>(11);
      const torch::Tensor gathered =
          observations.index_select(0, rows).contiguous();
      torch::Tensor want_actions =
          discrete ? torch::empty({k}, torch::kInt64)
                   : torch::empty({k, action_size}, torch::kFloat32);
      torch::Tensor want_log_probs = torch::empty({k});
      torch::Tensor want_values = torch::empty({k});
      kernels.Act(gathered.data_ptr<float>(), k,
                  again.get<at::CPUGeneratorImpl>(), false,
                  want_actions.data_ptr(), want_log_probs.data_ptr<float>(),
                  want_values.data_ptr<float>());
      EXPECT_TRUE(torch::equal(actions.index_select(0, rows), want_actions));
      EXPECT_TRUE(
          torch::equal(log_probs.index_select(0, rows), want_log_probs));
      EXPECT_TRUE(torch::equal(values.index_select(0, rows), want_values));
      torch::Tensor others = torch::ones({8}, torch::kBool);
      others.index_fill_(0, rows, false);
      EXPECT_TRUE(torch::all(log_probs.index({others}) == 42).item<bool>());
      EXPECT_TRUE(torch::all(values.index({others}) == 42).item<bool>());
      if (discrete) {
        EXPECT_TRUE(torch::all(actions.index({others}) == -1).item<bool>());
      } else {
        EXPECT_TRUE(torch::all(actions.index({others}) == -9).item<bool>());
      }
      // Only the actions: log-probabilities and values stay out.
      torch::Tensor only = actions.clone();
      fused.Act(observations, rows, generator.get<at::CPUGeneratorImpl>(),
                only);
      EXPECT_TRUE(torch::equal(only.index({others}), actions.index({others})));
    }
  }
}

}  // namespace
}  // namespace rl
