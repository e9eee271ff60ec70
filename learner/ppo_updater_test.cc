#include "learner/ppo_updater.h"

#include <cmath>

#include "common/run_spec.h"
#include "gtest/gtest.h"

namespace rl {
namespace {

// A contextual bandit as one-step episodes: reward 1 when the action equals
// (obs[0] > 0), every step terminates. T=4, E=64.
struct Bandit {
  ActorCritic policy{nullptr};
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(11);

  explicit Bandit(bool normalize = false) {
    ActorCriticConfig c;
    c.observation_size = 2;
    c.num_actions = 2;
    c.hidden_sizes = {16};
    c.normalize_observations = normalize;
    torch::manual_seed(0);
    policy = ActorCritic(c);
  }

  Rollout Collect(double* mean_reward) {
    Rollout r = Rollout::Allocate(4, 64, 2, 0);
    torch::NoGradGuard no_grad;
    r.observations.copy_(torch::randn({4, 64, 2}, gen) * 2 + 1);
    const PolicyStep step = policy->Act(r.observations.reshape({256, 2}), gen);
    r.actions.copy_(step.actions.reshape({4, 64}));
    r.log_probs.copy_(step.log_probs.reshape({4, 64}));
    r.values.copy_(step.values.reshape({4, 64}));
    const torch::Tensor correct =
        (r.observations.select(2, 0) > 1).to(torch::kInt64);  // mean is 1
    r.rewards.copy_((r.actions == correct).to(torch::kFloat32));
    r.terminated.fill_(1);
    *mean_reward = r.rewards.mean().item<double>();
    return r;
  }
};

PPOConfig Ppo(const std::string& yaml) {
  auto spec =
      LoadRunSpec("env: {id: CartPole-v1}\nppo: " + yaml, RunFileFormat::kYaml);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec->ppo();
}

TEST(PpoUpdaterTest, LearnsABandit) {
  Bandit bandit;
  PpoUpdater updater(bandit.policy,
                     Ppo("{learning_rate: 0.01, num_minibatches: 4, "
                         "anneal_learning_rate: false}"),
                     1 << 20, 1);
  double first = 0, last = 0;
  for (int i = 0; i < 30; ++i) {
    Rollout r = bandit.Collect(i == 0 ? &first : &last);
    const UpdateStats stats = updater.Update(r, 0);
    for (double v : {stats.policy_loss, stats.value_loss, stats.entropy,
                     stats.approx_kl, stats.grad_norm}) {
      ASSERT_TRUE(std::isfinite(v));
    }
    EXPECT_EQ(stats.epochs, 4);
    EXPECT_GE(stats.clip_fraction, 0);
    EXPECT_LE(stats.clip_fraction, 1);
  }
  EXPECT_LT(first, 0.7);
  EXPECT_GT(last, 0.9);
}

TEST(PpoUpdaterTest, AnnealsTheLearningRate) {
  Bandit bandit;
  PpoUpdater updater(bandit.policy, Ppo("{learning_rate: 0.001}"), 1000, 1);
  double unused;
  Rollout r = bandit.Collect(&unused);
  EXPECT_NEAR(updater.Update(r, 0).learning_rate, 0.001, 1e-9);
  EXPECT_NEAR(updater.Update(r, 750).learning_rate, 0.00025, 1e-9);
}

TEST(PpoUpdaterTest, StopsEarlyOnKl) {
  Bandit bandit;
  PpoUpdater updater(bandit.policy,
                     Ppo("{learning_rate: 0.05, num_epochs: 10, "
                         "target_kl: 0.000001}"),
                     1 << 20, 1);
  double unused;
  Rollout r = bandit.Collect(&unused);
  EXPECT_EQ(updater.Update(r, 0).epochs, 1);
}

TEST(PpoUpdaterTest, GradientNormIsClipped) {
  Bandit bandit;
  // With a huge learning rate the parameters would explode without clipping;
  // with max_grad_norm the step of each minibatch is bounded.
  PpoUpdater updater(bandit.policy,
                     Ppo("{learning_rate: 0.001, max_grad_norm: 0.0001, "
                         "anneal_learning_rate: false}"),
                     1 << 20, 1);
  std::vector<torch::Tensor> before;
  for (const auto& p : bandit.policy->parameters()) before.push_back(p.clone());
  double unused;
  Rollout r = bandit.Collect(&unused);
  const UpdateStats stats = updater.Update(r, 0);
  EXPECT_GT(stats.grad_norm, 0.0001);  // reported norm is before clipping
  // Adam normalises step sizes, so check the update is still finite/sane.
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_TRUE(
        torch::isfinite(bandit.policy->parameters()[i]).all().item<bool>());
  }
}

TEST(PpoUpdaterTest, UpdatesObservationStatisticsAfterTheUpdate) {
  Bandit bandit(/*normalize=*/true);
  PpoUpdater updater(bandit.policy, Ppo("{}"), 1 << 20, 1);
  double unused;
  Rollout r = bandit.Collect(&unused);
  updater.Update(r, 0);
  const auto buffers = bandit.policy->named_buffers();
  // Observations were drawn with mean (1, 1).
  EXPECT_NEAR(buffers["obs_mean"][0].item<double>(), 1.0, 0.4);
  EXPECT_GT(buffers["obs_count"].item<double>(), 255);
}

}  // namespace
}  // namespace rl
