#include "policy/action_head.h"

#include <torch/torch.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/actor_critic.h"
#include "runspec/policy_rules.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

ActorCriticConfig Discrete(int n) {
  ActorCriticConfig c;
  c.observation_size = 3;
  c.num_actions = n;
  return c;
}

ActorCriticConfig Box(int size, float low, float high,
                      const std::string& head = "") {
  ActorCriticConfig c;
  c.observation_size = 3;
  c.action_size = size;
  c.action_low = low;
  c.action_high = high;
  c.initial_log_std = 0.3f;
  c.head = head;
  return c;
}

ActorCriticConfig Bits(int n) {
  ActorCriticConfig c;
  c.observation_size = 3;
  c.action_nvec.assign(n, 2);
  c.bernoulli = true;
  return c;
}

// A head of `config` with its parameters registered on `owner`.
std::unique_ptr<ActionHead> Make(const ActorCriticConfig& config,
                                 torch::nn::Module& owner) {
  absl::StatusOr<std::unique_ptr<ActionHead>> head = MakeActionHead(config);
  EXPECT_TRUE(head.ok()) << head.status();
  (*head)->Register(owner);
  return std::move(*head);
}

TEST(ActionHeadTest, TheRegistryHoldsTheHeadsAndEachSpaceHasItsDefault) {
  std::vector<std::string> names;
  for (const ActionHeadEntry& entry : ActionHeads()) {
    names.push_back(entry.name);
    EXPECT_FALSE(entry.summary.empty()) << entry.name;
  }
  EXPECT_THAT(names, ElementsAre("bernoulli", "categorical", "gaussian",
                                 "tanh_gaussian"));
  EXPECT_EQ(DefaultActionHead(Discrete(4)), "categorical");
  ActorCriticConfig multi = Discrete(0);
  multi.action_nvec = {3, 2};
  EXPECT_EQ(DefaultActionHead(multi), "categorical");
  EXPECT_EQ(DefaultActionHead(Bits(3)), "bernoulli");
  EXPECT_EQ(DefaultActionHead(Box(2, -1, 1)), "gaussian");
}

TEST(ActionHeadTest, AHeadThatDoesNotFitIsRefusedNamingPolicyHead) {
  ActorCriticConfig discrete = Discrete(4);
  discrete.head = "tanh_gaussian";
  absl::Status status = MakeActionHead(discrete).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("policy.head: tanh_gaussian"));
  EXPECT_THAT(status.message(), HasSubstr("Box"));
  // The network refuses it with the same words, as a Status.
  EXPECT_THAT(CreateActorCritic(discrete).status().message(),
              HasSubstr("policy.head: tanh_gaussian"));

  status = MakeActionHead(Box(2, 0, 0, "tanh_gaussian")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("finite bounds"));
  status = MakeActionHead(Box(2, -INFINITY, 1, "tanh_gaussian")).status();
  EXPECT_THAT(status.message(), HasSubstr("finite bounds"));

  status = MakeActionHead(Box(2, -1, 1, "beta")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("no head is named \"beta\""));
  EXPECT_THAT(status.message(), HasSubstr("tanh_gaussian"));

  status = MakeActionHead(Box(2, -1, 1, "categorical")).status();
  EXPECT_THAT(status.message(), HasSubstr("Discrete or MultiDiscrete"));
}

// Whatever a head draws, scoring it later gives the log-probability it
// was drawn with: the PPO ratio starts at exactly 1.
TEST(ActionHeadTest, EveryHeadScoresItsOwnSamplesAsItDrewThem) {
  ActorCriticConfig masked = Discrete(5);
  masked.action_masks = true;
  ActorCriticConfig multi = Discrete(0);
  multi.action_nvec = {3, 4};
  const std::vector<ActorCriticConfig> configs = {
      masked, multi, Bits(3), Box(2, -1, 1), Box(3, -2, 0.5, "tanh_gaussian")};
  std::set<std::string> seen;
  for (const ActorCriticConfig& config : configs) {
    torch::nn::Module owner;
    std::unique_ptr<ActionHead> head = Make(config, owner);
    seen.insert(head->name());
    torch::manual_seed(3);
    const torch::Tensor out = torch::randn({512, head->units()}) * 2;
    torch::Tensor masks;
    if (config.action_masks) {
      at::Generator generator = at::detail::createCPUGenerator(5);
      masks = RandomActionMasks(config, 512, 0.5, generator);
    }
    at::Generator generator = at::detail::createCPUGenerator(11);
    const HeadSample sample = head->Sample(out, masks, generator, false);
    const HeadScore score = head->Score(out, sample.actions, masks);
    EXPECT_LE((score.log_probs - sample.log_probs).abs().max().item<double>(),
              1e-4)
        << head->name();
    EXPECT_TRUE(torch::isfinite(score.entropy).all().item<bool>())
        << head->name();
    if (masks.defined()) {
      // A masked choice is never drawn.
      EXPECT_TRUE(masks.gather(1, sample.actions.unsqueeze(1))
                      .eq(1)
                      .all()
                      .item<bool>());
    }
  }
  for (const ActionHeadEntry& entry : ActionHeads()) {
    EXPECT_EQ(seen.count(entry.name), 1u)
        << entry.name << " is registered but not covered here";
  }
}

TEST(ActionHeadTest, TanhGaussianActionsStayInsideTheBoundsAndItsDensityIsOne) {
  const float low = -2.0f, high = 1.0f;
  torch::nn::Module owner;
  std::unique_ptr<ActionHead> head =
      Make(Box(1, low, high, "tanh_gaussian"), owner);
  torch::NoGradGuard no_grad;
  const torch::Tensor out = torch::full({20000, 1}, 0.7f);
  at::Generator generator = at::detail::createCPUGenerator(1);
  const HeadSample sample = head->Sample(out, {}, generator, false);
  EXPECT_GE(sample.actions.min().item<float>(), low);
  EXPECT_LE(sample.actions.max().item<float>(), high);
  // The mode of the squashed draw is near mid + half * tanh(0.7).
  const HeadSample mode = head->Sample(out.narrow(0, 0, 1), {}, {}, true);
  EXPECT_NEAR(mode.actions.item<float>(), -0.5f + 1.5f * std::tanh(0.7f), 1e-6);
  // exp(log p) over the bounds integrates to 1 (the Jacobian is right).
  const int64_t n = 200001;
  const torch::Tensor grid =
      torch::linspace(low, high, n, torch::kFloat64).narrow(0, 1, n - 2);
  const HeadScore score =
      head->Score(torch::full({n - 2, 1}, 0.7f),
                  grid.to(torch::kFloat32).unsqueeze(1), torch::Tensor());
  const double integral =
      score.log_probs.to(torch::kFloat64).exp().sum().item<double>() *
      (high - low) / (n - 1);
  EXPECT_NEAR(integral, 1.0, 2e-3);
}

TEST(ActionHeadTest, TanhGaussianEntropyGradientIsTheGaussians) {
  torch::nn::Module owner;
  std::unique_ptr<ActionHead> head =
      Make(Box(2, -1, 1, "tanh_gaussian"), owner);
  const torch::Tensor out = torch::randn({64, 2});
  const torch::Tensor actions = torch::rand({64, 2}) * 1.8 - 0.9;
  head->Score(out, actions, {}).entropy.sum().backward();
  const torch::Tensor grad = owner.named_parameters()["log_std"].grad();
  ASSERT_TRUE(grad.defined());
  // d/d log_std of sum over 64 rows of (log_std_0 + log_std_1 + c).
  EXPECT_TRUE(torch::allclose(grad, torch::full({2}, 64.0f)));
}

// runspec/ checks policy.head at submit without LibTorch: it knows the
// same heads, and they take the same action spaces as the registry says.
TEST(ActionHeadTest, TheRunFileRulesKnowEveryHeadAndWhatItTakes) {
  std::vector<std::string> registered;
  for (const ActionHeadEntry& entry : ActionHeads()) {
    registered.push_back(entry.name);
  }
  EXPECT_EQ(ActionHeadNames(), registered);
  std::vector<EnvSpec> envs(5);
  envs[0].set_num_discrete_actions(4);
  envs[1].add_action_nvec(3);
  envs[1].add_action_nvec(2);
  for (int i = 0; i < 3; ++i) envs[2].add_action_nvec(2);
  envs[2].set_action_binary(3);
  envs[3].set_continuous_action_size(2);
  envs[3].set_action_low(-1);
  envs[3].set_action_high(2);
  envs[4].set_continuous_action_size(2);
  envs[4].set_action_low(-INFINITY);
  envs[4].set_action_high(INFINITY);
  for (size_t e = 0; e < envs.size(); ++e) {
    envs[e].set_observation_size(3);
    for (const std::string& head : registered) {
      PolicyConfig policy;
      policy.set_head(head);
      const bool fits =
          MakeActionHead(MakeActorCriticConfig(envs[e], policy, PPOConfig()))
              .ok();
      EXPECT_EQ(ActionHeadMisfit(head, envs[e]).empty(), fits)
          << head << " on env " << e;
    }
  }
}

}  // namespace
}  // namespace rl
