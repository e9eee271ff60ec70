#include "policy/fused_policy.h"

#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

struct Shape {
  const char* name;
  int observation_size;
  int num_actions;
  int action_size;
  std::vector<int> hidden;
  bool shared;
  bool normalize;
  int central = 0;  // policy.central_value's agents per copy (0: none)
};

std::vector<Shape> Shapes() {
  return {
      {"discrete 64x64", 4, 2, 0, {64, 64}, false, false},
      {"discrete shared, normalised", 6, 5, 0, {16, 8}, true, true},
      {"discrete one unit", 3, 3, 0, {1}, false, false},
      {"continuous 7-5-3", 5, 0, 2, {7, 5, 3}, false, true},
      {"continuous shared", 3, 0, 1, {32}, true, false},
      {"discrete central critic of 4, normalised",
       6,
       3,
       0,
       {16, 8},
       false,
       true,
       4},
      {"continuous central critic of 2, no hidden layer",
       3,
       0,
       2,
       {},
       false,
       false,
       2},
  };
}

ActorCritic Make(const Shape& s) {
  ActorCriticConfig c;
  c.observation_size = s.observation_size;
  c.num_actions = s.num_actions;
  c.action_size = s.action_size;
  c.hidden_sizes = s.hidden;
  c.shared_trunk = s.shared;
  c.normalize_observations = s.normalize;
  c.initial_log_std = -0.3f;
  c.observation_clip = 2.0f;  // Reached by some rows below.
  c.central_value_agents = s.central;
  torch::manual_seed(7);
  ActorCritic policy(c);
  if (s.normalize) {
    // Statistics away from (0, 1), so that normalisation matters.
    EXPECT_TRUE(policy
                    ->UpdateObservationStatistics(
                        torch::randn({50, s.observation_size}) * 3 + 1)
                    .ok());
  }
  return policy;
}

TEST(FusedPolicyTest, DeterministicActionsLogProbsAndValuesMatchLibTorch) {
  for (const Shape& s : Shapes()) {
    SCOPED_TRACE(s.name);
    ActorCritic policy = Make(s);
    FusedPolicy fused;
    ASSERT_TRUE(fused.Bind(policy).ok());
    const int64_t B = s.central > 0 ? 36 : 33;  // whole copies
    const torch::Tensor obs = torch::randn({B, s.observation_size}) * 4;
    const PolicyStep expected = policy->Act(obs, c10::nullopt, true);
    torch::Tensor actions = torch::empty_like(expected.actions);
    torch::Tensor log_probs = torch::empty({B});
    torch::Tensor values = torch::empty({B});
    auto gen = at::make_generator<at::CPUGeneratorImpl>(1);
    fused.Act(obs.data_ptr<float>(), B, gen.get<at::CPUGeneratorImpl>(), true,
              actions.data_ptr(), log_probs.data_ptr<float>(),
              values.data_ptr<float>());
    if (s.num_actions > 0) {
      EXPECT_TRUE(torch::equal(actions, expected.actions));
    } else {
      EXPECT_TRUE(torch::allclose(actions, expected.actions, 1e-5, 1e-6));
    }
    EXPECT_TRUE(torch::allclose(log_probs, expected.log_probs, 1e-5, 1e-6));
    EXPECT_TRUE(torch::allclose(values, expected.values, 1e-5, 1e-6))
        << values << expected.values;
    torch::Tensor value_only = torch::empty({B});
    fused.Values(obs.data_ptr<float>(), B, value_only.data_ptr<float>());
    EXPECT_TRUE(torch::allclose(value_only, policy->Value(obs), 1e-5, 1e-6));
  }
}

TEST(FusedPolicyTest, SampledActionsHaveTheirLogProbsAndFollowThePolicy) {
  for (const Shape& s : Shapes()) {
    SCOPED_TRACE(s.name);
    ActorCritic policy = Make(s);
    FusedPolicy fused;
    ASSERT_TRUE(fused.Bind(policy).ok());
    const int64_t B = 20000;
    const torch::Tensor obs = torch::randn({1, s.observation_size})
                                  .expand({B, s.observation_size})
                                  .contiguous();
    torch::Tensor actions = s.num_actions > 0
                                ? torch::empty({B}, torch::kInt64)
                                : torch::empty({B, s.action_size});
    torch::Tensor log_probs = torch::empty({B});
    torch::Tensor values = torch::empty({B});
    auto gen = at::make_generator<at::CPUGeneratorImpl>(11);
    fused.Act(obs.data_ptr<float>(), B, gen.get<at::CPUGeneratorImpl>(), false,
              actions.data_ptr(), log_probs.data_ptr<float>(),
              values.data_ptr<float>());
    // Each sample's log-probability is LibTorch's for that action.
    const PolicyEvaluation eval = policy->Evaluate(obs, actions);
    EXPECT_TRUE(torch::allclose(log_probs, eval.log_probs, 1e-4, 1e-5));
    if (s.num_actions > 0) {
      // Frequencies follow the probabilities.
      const torch::Tensor freq =
          torch::bincount(actions, {}, s.num_actions).to(torch::kFloat32) / B;
      const torch::Tensor probs = log_probs.exp();
      for (int a = 0; a < s.num_actions; ++a) {
        const torch::Tensor mask = actions == a;
        if (!mask.any().item<bool>()) continue;
        EXPECT_NEAR(freq[a].item<double>(),
                    probs.index({mask})[0].item<double>(), 0.015);
      }
    } else {
      // Mean and standard deviation of the samples.
      const PolicyStep mean = policy->Act(obs, c10::nullopt, true);
      const torch::Tensor residual = actions - mean.actions;
      EXPECT_LT(residual.mean(0).abs().max().item<double>(), 0.03);
      EXPECT_NEAR(residual.std(0).mean().item<double>(), std::exp(-0.3), 0.02);
    }
    // The same seed gives the same rollout.
    torch::Tensor again = torch::empty_like(actions);
    auto gen2 = at::make_generator<at::CPUGeneratorImpl>(11);
    fused.Act(obs.data_ptr<float>(), B, gen2.get<at::CPUGeneratorImpl>(), false,
              again.data_ptr(), log_probs.data_ptr<float>(),
              values.data_ptr<float>());
    EXPECT_TRUE(torch::equal(again, actions));
  }
}

// A central critic's values read every row of a copy: LibTorch's
// CentralInput order (checked above against its values), and a batch that
// is not whole copies refused as LibTorch refuses it.
TEST(FusedPolicyTest, ACentralCriticReadsTheWholeCopy) {
  Shape s = Shapes()[5];
  ASSERT_EQ(s.central, 4);
  ActorCritic policy = Make(s);
  FusedPolicy fused;
  ASSERT_TRUE(fused.Bind(policy).ok());
  EXPECT_EQ(fused.central_agents(), 4);
  torch::Tensor obs = torch::randn({8, s.observation_size});
  torch::Tensor before = torch::empty({8});
  fused.Values(obs.data_ptr<float>(), 8, before.data_ptr<float>());
  obs[2] += 1.0;  // Agent 2 of copy 0.
  torch::Tensor after = torch::empty({8});
  fused.Values(obs.data_ptr<float>(), 8, after.data_ptr<float>());
  for (int row = 0; row < 8; ++row) {
    EXPECT_EQ(after[row].item<float>() != before[row].item<float>(), row < 4)
        << "row " << row;
  }
  try {
    fused.Values(obs.data_ptr<float>(), 6, after.data_ptr<float>());
    ADD_FAILURE() << "6 rows are not whole copies of 4 agents";
  } catch (const c10::Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("a batch of 6 rows is not"));
  }
  // Its value reads every agent: no trunk shared with the policy (which
  // the run file refuses too).
  s.shared = true;
  ActorCritic shared = Make(s);
  const absl::Status status = FusedPolicy::Supported(shared);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("a value trunk of its own"));
}

TEST(FusedPolicyTest, RebindingFollowsReplacedParameters) {
  const Shape s = Shapes()[0];
  ActorCritic policy = Make(s);
  FusedPolicy fused;
  ASSERT_TRUE(fused.Bind(policy).ok());
  // Loading weights may swap a parameter's storage (Tensor::set_).
  {
    torch::NoGradGuard no_grad;
    for (auto& p : policy->parameters()) p.set_(p.detach().clone() * 0.5);
  }
  ASSERT_TRUE(fused.Bind(policy).ok());
  const torch::Tensor obs = torch::randn({5, s.observation_size});
  torch::Tensor values = torch::empty({5});
  fused.Values(obs.data_ptr<float>(), 5, values.data_ptr<float>());
  EXPECT_TRUE(torch::allclose(values, policy->Value(obs), 1e-5, 1e-6));
}

TEST(FusedPolicyTest, ParametersItCannotUseAreRefusedWithTheReason) {
  ActorCritic policy = Make(Shapes()[0]);
  policy->to(torch::kFloat64);
  const absl::Status status = FusedPolicy::Supported(policy);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("float32"));
  auto use = UseFusedPolicy("fused", policy);
  EXPECT_EQ(use.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(use.status().message(),
              HasSubstr("execution.cpu_kernels: fused"));
  auto automatic = UseFusedPolicy("auto", policy);
  ASSERT_TRUE(automatic.ok());
  EXPECT_FALSE(*automatic);  // LibTorch instead.
  EXPECT_EQ(UseFusedPolicy("fast", policy).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The fused path computes the categorical and Gaussian heads only; it
// steps aside for any other head, saying which.
TEST(FusedPolicyTest, OtherHeadsAreLeftToLibTorch) {
  ActorCriticConfig config;
  config.observation_size = 3;
  config.action_size = 2;
  config.action_low = -1;
  config.action_high = 1;
  config.head = "tanh_gaussian";
  ASSERT_OK_AND_ASSIGN(ActorCritic policy, CreateActorCritic(config));
  const absl::Status status = FusedPolicy::Supported(policy);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("tanh_gaussian (policy.head)"));
  auto automatic = UseFusedPolicy("auto", policy);
  ASSERT_TRUE(automatic.ok());
  EXPECT_FALSE(*automatic);
  config.head = "gaussian";
  ASSERT_OK_AND_ASSIGN(ActorCritic gaussian, CreateActorCritic(config));
  EXPECT_OK(FusedPolicy::Supported(gaussian));
}

}  // namespace
}  // namespace rl
