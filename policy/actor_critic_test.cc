#include "policy/actor_critic.h"

#include <cmath>

#include "gtest/gtest.h"

namespace rl {
namespace {

ActorCriticConfig Discrete() {
  ActorCriticConfig c;
  c.observation_size = 4;
  c.num_actions = 3;
  return c;
}

ActorCriticConfig Continuous() {
  ActorCriticConfig c;
  c.observation_size = 3;
  c.action_size = 2;
  c.initial_log_std = -0.5f;
  return c;
}

TEST(ActorCriticTest, CategoricalLogProbsAndEntropyAreConsistent) {
  torch::manual_seed(0);
  ActorCritic policy(Discrete());
  const torch::Tensor obs = torch::randn({5, 4});
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  const PolicyStep step = policy->Act(obs, gen);
  EXPECT_EQ(step.actions.scalar_type(), torch::kInt64);
  EXPECT_EQ(step.actions.sizes(), (std::vector<int64_t>{5}));
  EXPECT_TRUE((step.actions >= 0).all().item<bool>());
  EXPECT_TRUE((step.actions < 3).all().item<bool>());
  const PolicyEvaluation eval = policy->Evaluate(obs, step.actions);
  EXPECT_TRUE(torch::allclose(eval.log_probs, step.log_probs));
  EXPECT_TRUE(torch::allclose(eval.values, step.values));
  // Near-uniform initial policy: entropy close to log(3).
  EXPECT_NEAR(eval.entropy.mean().item<double>(), std::log(3.0), 1e-2);
}

TEST(ActorCriticTest, SamplingFrequenciesFollowTheProbabilities) {
  torch::manual_seed(0);
  ActorCritic policy(Discrete());
  const torch::Tensor obs = torch::randn({1, 4}).expand({20000, 4});
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  const PolicyStep step = policy->Act(obs, gen);
  const torch::Tensor freq =
      torch::bincount(step.actions, {}, 3).to(torch::kFloat32) / 20000;
  const torch::Tensor probs = step.log_probs.exp();  // p(chosen action)
  // Each chosen action's probability equals its empirical frequency.
  for (int a = 0; a < 3; ++a) {
    const torch::Tensor mask = step.actions == a;
    const double p = probs.index({mask})[0].item<double>();
    EXPECT_NEAR(freq[a].item<double>(), p, 0.015);
  }
}

TEST(ActorCriticTest, GaussianLogProbMatchesClosedForm) {
  torch::manual_seed(0);
  ActorCritic policy(Continuous());
  const torch::Tensor obs = torch::randn({4, 3});
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1);
  const PolicyStep step = policy->Act(obs, gen);
  const PolicyStep mean_step = policy->Act(obs, c10::nullopt, true);
  const torch::Tensor std = torch::full({2}, std::exp(-0.5));
  const torch::Tensor z = (step.actions - mean_step.actions) / std;
  const torch::Tensor expected =
      (-0.5 * z * z - std.log() - 0.5 * std::log(2 * M_PI)).sum(-1);
  EXPECT_TRUE(torch::allclose(step.log_probs, expected, 1e-5, 1e-5));
  const PolicyEvaluation eval = policy->Evaluate(obs, step.actions);
  EXPECT_TRUE(torch::allclose(eval.log_probs, step.log_probs, 1e-5, 1e-5));
  // Entropy of a diagonal Gaussian: sum(log std + 0.5 log(2 pi e)).
  EXPECT_NEAR(eval.entropy[0].item<double>(),
              2 * (-0.5 + 0.5 * std::log(2 * M_PI * M_E)), 1e-5);
}

TEST(ActorCriticTest, ObservationStatisticsTrackMeanAndVariance) {
  ActorCriticConfig c = Discrete();
  c.normalize_observations = true;
  ActorCritic policy(c);
  torch::manual_seed(2);
  const torch::Tensor a = torch::randn({1000, 4}) * 3 + 5;
  const torch::Tensor b = torch::randn({500, 4}) * 3 + 5;
  policy->UpdateObservationStatistics(a);
  policy->UpdateObservationStatistics(b);
  const torch::Tensor all = torch::cat({a, b});
  const torch::Tensor normalized = policy->NormalizeObservations(all);
  EXPECT_NEAR(normalized.mean().item<double>(), 0.0, 1e-3);
  EXPECT_NEAR(normalized.std().item<double>(), 1.0, 1e-2);
  // Statistics are buffers: they travel with the weights.
  int buffers = 0;
  for (const auto& item : policy->named_buffers()) {
    buffers += item.key().rfind("obs_", 0) == 0;
  }
  EXPECT_EQ(buffers, 3);
}

TEST(ActorCriticTest, SharedTrunkHasFewerParameters) {
  ActorCriticConfig separate = Discrete();
  ActorCriticConfig shared = Discrete();
  shared.shared_trunk = true;
  auto count = [](ActorCritic p) {
    int64_t n = 0;
    for (const auto& t : p->parameters()) n += t.numel();
    return n;
  };
  EXPECT_LT(count(ActorCritic(shared)), count(ActorCritic(separate)));
}

}  // namespace
}  // namespace rl
