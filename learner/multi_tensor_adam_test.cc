#include "learner/multi_tensor_adam.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

std::vector<torch::Tensor> Leaves(const std::vector<torch::Tensor>& values) {
  std::vector<torch::Tensor> leaves;
  for (const auto& v : values) leaves.push_back(v.clone().requires_grad_());
  return leaves;
}

float LargestDifference(const std::vector<torch::Tensor>& a,
                        const std::vector<torch::Tensor>& b) {
  float largest = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    largest = std::max(largest, (a[i] - b[i]).abs().max().item<float>());
  }
  return largest;
}

TEST(MultiTensorAdamTest, StepsAsTorchAdamDoes) {
  torch::manual_seed(3);
  const std::vector<torch::Tensor> init = {torch::randn({7, 5}),
                                           torch::randn({5}), torch::randn({})};
  std::vector<torch::Tensor> reference = Leaves(init), ours = Leaves(init);
  const auto options = torch::optim::AdamOptions(3e-3).eps(1e-5);
  torch::optim::Adam reference_adam(reference, options);
  torch::optim::Adam our_adam(ours, options);
  MultiTensorAdam adam(&our_adam);
  for (int step = 0; step < 5; ++step) {
    for (size_t i = 0; i < init.size(); ++i) {
      const torch::Tensor g = torch::randn_like(init[i]);
      reference[i].mutable_grad() = g.clone();
      ours[i].mutable_grad() = g.clone();
    }
    reference_adam.step();
    ASSERT_OK(adam.Step());
    EXPECT_LT(LargestDifference(reference, ours), 1e-6) << "step " << step;
  }
  // Moved by Adam, not left where they began.
  EXPECT_GT(LargestDifference(ours, init), 1e-3);
  // The optimizer's own state is the one kept: a checkpoint saves it.
  for (size_t i = 0; i < init.size(); ++i) {
    auto& state = AdamStateFor(our_adam, ours[i]);
    auto& expected = AdamStateFor(reference_adam, reference[i]);
    EXPECT_EQ(state.step(), 5);
    EXPECT_LT(
        (state.exp_avg_sq() - expected.exp_avg_sq()).abs().max().item<float>(),
        1e-7);
  }
}

// A step in three parts (as a CUDA graph takes it: learner/step_graph.h):
// the rate as a tensor read when the kernel runs, the host's counts after.
TEST(MultiTensorAdamTest, AStepInPartsWithATensorRateStepsAlike) {
  torch::manual_seed(4);
  const std::vector<torch::Tensor> init = {torch::randn({3, 4}),
                                           torch::randn({4})};
  std::vector<torch::Tensor> whole = Leaves(init), parts = Leaves(init);
  torch::optim::Adam whole_adam(whole, torch::optim::AdamOptions(1e-2));
  torch::optim::Adam parts_adam(parts, torch::optim::AdamOptions(123.0));
  MultiTensorAdam a(&whole_adam), b(&parts_adam);
  const torch::Tensor lr = torch::full({}, 1e-2);
  int64_t generation = -1;
  for (int step = 0; step < 3; ++step) {
    for (size_t i = 0; i < init.size(); ++i) {
      const torch::Tensor g = torch::randn_like(init[i]);
      whole[i].mutable_grad() = g.clone();
      parts[i].mutable_grad() = g.clone();
    }
    ASSERT_OK(a.Step());
    ASSERT_OK(b.Prepare());
    if (step == 0) generation = b.generation();
    // The device's counts were built once: a graph captured after the
    // first Prepare stays valid.
    EXPECT_EQ(b.generation(), generation);
    b.StepKernels(lr);
    b.CountStep();
    EXPECT_LT(LargestDifference(whole, parts), 1e-6) << "step " << step;
  }
  EXPECT_EQ(AdamStateFor(parts_adam, parts[0]).step(), 3);
  // A count changed on the host (a checkpoint) rebuilds them.
  AdamStateFor(parts_adam, parts[0]).step(10);
  ASSERT_OK(b.Prepare());
  EXPECT_NE(b.generation(), generation);
}

TEST(MultiTensorAdamTest, AStepCountSetOnTheHostIsTakenUp) {
  // A checkpoint loaded puts its step counts into the optimizer's state:
  // the bias corrections follow them, as torch's Adam's do.
  torch::manual_seed(4);
  const std::vector<torch::Tensor> init = {torch::randn({4, 3})};
  std::vector<torch::Tensor> reference = Leaves(init), ours = Leaves(init);
  const auto options = torch::optim::AdamOptions(1e-2);
  torch::optim::Adam reference_adam(reference, options);
  torch::optim::Adam our_adam(ours, options);
  MultiTensorAdam adam(&our_adam);
  const torch::Tensor g = torch::randn_like(init[0]);
  reference[0].mutable_grad() = g.clone();
  ours[0].mutable_grad() = g.clone();
  reference_adam.step();
  ASSERT_OK(adam.Step());
  AdamStateFor(reference_adam, reference[0]).step(100);
  AdamStateFor(our_adam, ours[0]).step(100);
  reference_adam.step();
  ASSERT_OK(adam.Step());
  EXPECT_LT(LargestDifference(reference, ours), 1e-6);
  EXPECT_EQ(AdamStateFor(our_adam, ours[0]).step(), 101);
}

TEST(MultiTensorAdamTest, RefusesWhatItDoesNotDo) {
  std::vector<torch::Tensor> params = Leaves({torch::ones({2})});
  torch::optim::Adam decaying(
      params, torch::optim::AdamOptions(1e-3).weight_decay(0.1));
  EXPECT_THAT(MultiTensorAdam(&decaying).Step(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("no weight decay")));
  // A parameter without a gradient refuses the step before any count moves.
  std::vector<torch::Tensor> two = Leaves({torch::ones({2}), torch::ones({3})});
  two[0].mutable_grad() = torch::ones({2});
  torch::optim::Adam plain(two, torch::optim::AdamOptions(1e-3));
  EXPECT_THAT(MultiTensorAdam(&plain).Step(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("parameter 1 of 2 has no gradient")));
  EXPECT_TRUE(plain.state().empty());
  EXPECT_TRUE(torch::equal(two[0], torch::ones({2})));
}

}  // namespace
}  // namespace rl
