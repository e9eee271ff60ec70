// A central critic (ActorCriticConfig::central_value_agents): each row's
// value reads its environment copy's agents, its policy its own row only.
#include <torch/torch.h>

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/actor_critic.h"
#include "policy/rollout.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

// Discrete, 4 observations, copies of 3 agents.
ActorCriticConfig Central() {
  ActorCriticConfig c;
  c.observation_size = 4;
  c.num_actions = 3;
  c.hidden_sizes = {16, 16};
  c.central_value_agents = 3;
  return c;
}

TEST(CentralValueTest, EachRowReadsItsCopyOwnFirst) {
  // Two copies of 3 agents, one feature each: agent k of copy c is 10c + k.
  const torch::Tensor x =
      torch::tensor({0.f, 1.f, 2.f, 10.f, 11.f, 12.f}).unsqueeze(1);
  const torch::Tensor want = torch::tensor({{0.f, 1.f, 2.f},
                                            {1.f, 2.f, 0.f},
                                            {2.f, 0.f, 1.f},
                                            {10.f, 11.f, 12.f},
                                            {11.f, 12.f, 10.f},
                                            {12.f, 10.f, 11.f}});
  EXPECT_TRUE(torch::equal(CentralInput(x, 3), want));
  // Features of 2: each agent's pair stays together.
  const torch::Tensor pairs = torch::arange(8.f).reshape({4, 2});
  EXPECT_TRUE(torch::equal(CentralInput(pairs, 2),
                           torch::tensor({{0.f, 1.f, 2.f, 3.f},
                                          {2.f, 3.f, 0.f, 1.f},
                                          {4.f, 5.f, 6.f, 7.f},
                                          {6.f, 7.f, 4.f, 5.f}})));
  EXPECT_THROW(CentralInput(torch::zeros({4, 1}), 3), c10::Error);
}

// Changing one agent's observation changes every value of its copy and
// no other copy's, and no action probability but its own row's.
TEST(CentralValueTest, AValueReadsItsCopyAndThePolicyItsRow) {
  torch::manual_seed(1);
  ASSERT_OK_AND_ASSIGN(ActorCritic policy, CreateActorCritic(Central()));
  // The value trunk reads 3 agents' observations.
  EXPECT_EQ(policy->named_parameters()["value_trunk.0.weight"].size(1), 12);
  EXPECT_EQ(policy->named_parameters()["policy_trunk.0.weight"].size(1), 4);
  const torch::Tensor obs = torch::randn({6, 4});
  const torch::Tensor actions = torch::tensor({0, 1, 2, 0, 1, 2});
  const PolicyEvaluation before = policy->Evaluate(obs, actions);
  torch::Tensor changed = obs.clone();
  changed[1] += 1.0;  // agent 1 of copy 0
  const PolicyEvaluation after = policy->Evaluate(changed, actions);
  const torch::Tensor value_moved = (after.values - before.values).abs() > 1e-6;
  EXPECT_TRUE(torch::equal(
      value_moved, torch::tensor({true, true, true, false, false, false})));
  const torch::Tensor policy_moved =
      (after.log_probs - before.log_probs).abs() > 1e-6;
  EXPECT_TRUE(torch::equal(
      policy_moved, torch::tensor({false, true, false, false, false, false})));
  // Acting and valuing agree with the evaluation.
  const PolicyStep step = policy->Act(obs, c10::nullopt, true);
  EXPECT_TRUE(torch::allclose(step.values, before.values));
  EXPECT_TRUE(torch::allclose(policy->Value(obs), before.values));
}

TEST(CentralValueTest, BatchesOfPartCopiesAndSharedTrunksAreRefused) {
  ASSERT_OK_AND_ASSIGN(ActorCritic policy, CreateActorCritic(Central()));
  EXPECT_THAT(ActChecked(policy, torch::zeros({4, 4}), c10::nullopt, true),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("whole copies of 3 agents; a batch of 4")));
  EXPECT_OK(
      ActChecked(policy, torch::zeros({6, 4}), c10::nullopt, true).status());
  ActorCriticConfig shared = Central();
  shared.shared_trunk = true;
  EXPECT_THAT(
      CreateActorCritic(shared).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("shared trunk")));
}

ActorCriticConfig CentralCore(ActorCriticConfig::Core core) {
  ActorCriticConfig c = Central();
  c.hidden_sizes = {8};
  c.core = core;
  c.core_size = 5;
  return c;
}

// Beside a core the value head reads the copy's core outputs (own first):
// an agent's history moves its copy's values, and its own action alone.
TEST(CentralValueTest, BesideACoreAValueReadsItsCopysCores) {
  for (const auto core :
       {ActorCriticConfig::Core::kLstm, ActorCriticConfig::Core::kGru}) {
    torch::manual_seed(3);
    ASSERT_OK_AND_ASSIGN(ActorCritic policy,
                         CreateActorCritic(CentralCore(core)));
    EXPECT_EQ(policy->named_parameters()["value_head.weight"].size(1), 15);
    EXPECT_EQ(policy->named_parameters()["policy_head.weight"].size(1), 5);
    const int64_t T = 4, B = 6;
    const torch::Tensor obs = torch::randn({T, B, 4});
    torch::Tensor changed = obs.clone();
    changed[0][4] += 1.0;  // step 0, agent 1 of copy 1
    const torch::Tensor actions = torch::randint(0, 3, {T, B});
    torch::Tensor ends = torch::zeros({T, B}, torch::kUInt8);
    ends[1][3] = 1;  // copy 1's agent 0 restarts after step 1
    const torch::Tensor initial = torch::randn({B, policy->state_size()});
    const PolicyEvaluation before =
        policy->EvaluateSequence(obs, actions, {}, initial, ends);
    const PolicyEvaluation after =
        policy->EvaluateSequence(changed, actions, {}, initial, ends);
    // Rows t * B + b: every later step's values of copy 1 move, copy 0's
    // never; of the actions only agent 1 of copy 1's.
    const torch::Tensor value_moved =
        ((after.values - before.values).abs() > 1e-6).reshape({T, B});
    const torch::Tensor policy_moved =
        ((after.log_probs - before.log_probs).abs() > 1e-6).reshape({T, B});
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t b = 0; b < B; ++b) {
        EXPECT_EQ(value_moved[t][b].item<bool>(), b >= 3) << t << " " << b;
        EXPECT_EQ(policy_moved[t][b].item<bool>(), b == 4) << t << " " << b;
      }
    }
    // Acting and valuing step by step give the sequence's values.
    torch::NoGradGuard no_grad;
    torch::Tensor state = initial.clone();
    for (int64_t t = 0; t < T; ++t) {
      if (t > 0) state *= (1 - ends[t - 1].to(torch::kFloat32)).unsqueeze(1);
      const torch::Tensor want = before.values.narrow(0, t * B, B);
      EXPECT_TRUE(
          torch::allclose(policy->Value(obs[t], state), want, 1e-5, 1e-6));
      const PolicyStep step =
          policy->Act(obs[t], c10::nullopt, true, {}, &state);
      EXPECT_TRUE(torch::allclose(step.values, want, 1e-5, 1e-6)) << t;
    }
  }
}

// The value of a truncated step beside a core runs each agent of the copy
// from the state its step left.
TEST(CentralValueTest, TruncatedStepsBesideACoreRunFromTheirStates) {
  torch::manual_seed(4);
  ASSERT_OK_AND_ASSIGN(
      ActorCritic policy,
      CreateActorCritic(CentralCore(ActorCriticConfig::Core::kLstm)));
  const int64_t T = 2, E = 6;
  Rollout r = Rollout::Allocate(T, E, 4, 0);
  r.observations.normal_();
  r.next_observations.normal_();
  const torch::Tensor final_obs = torch::randn({T, E, 4});
  const torch::Tensor states = torch::randn({T, E, policy->state_size()});
  r.truncated[0][1] = 1;  // step 0: copy 0's agent 1
  r.truncated[1][5] = 1;  // step 1 (the last): copy 1's agent 2
  r.terminated[1][3] = 1;
  EXPECT_THROW(CentralTruncatedValues(*policy, r, final_obs, {}), c10::Error);
  const torch::Tensor got =
      CentralTruncatedValues(*policy, r, final_obs, states);
  torch::Tensor copy0 = r.observations[1].clone();
  copy0[1] = final_obs[0][1];
  EXPECT_NEAR(got[0][1].item<float>(),
              policy->Value(copy0, states[0])[1].item<float>(), 1e-5);
  torch::Tensor copy1 = r.next_observations.clone();
  copy1[3] = final_obs[1][3];
  copy1[5] = final_obs[1][5];
  EXPECT_NEAR(got[1][5].item<float>(),
              policy->Value(copy1, states[1])[5].item<float>(), 1e-5);
  EXPECT_EQ((got != 0).sum().item<int64_t>(), 2);
}

// The bootstrap value of a truncated step reads its copy at that moment:
// the final observations of the agents truncated with it, what the others
// observed after the step.
TEST(CentralValueTest, TruncatedStepsAreValuedWithTheirCopy) {
  torch::manual_seed(2);
  ASSERT_OK_AND_ASSIGN(ActorCritic policy, CreateActorCritic(Central()));
  const int64_t T = 3, E = 6;
  Rollout r = Rollout::Allocate(T, E, 4, 0);
  r.observations.normal_();
  r.next_observations.normal_();
  const torch::Tensor final_obs = torch::randn({T, E, 4});
  // Step 0: copy 0's agent 0 truncated, agent 2 terminated; step 2 (the
  // last): all of copy 1 truncated.
  r.truncated[0][0] = 1;
  r.terminated[0][2] = 1;
  for (int e = 3; e < 6; ++e) r.truncated[2][e] = 1;
  r.truncated[1][4] = 1;  // Step 1: copy 1's agent 1 alone.
  const torch::Tensor got =
      CentralTruncatedValues(*policy, r, final_obs, torch::Tensor());
  ASSERT_EQ(got.sizes(), (std::vector<int64_t>{T, E}));

  // Step 0's copy 0: agents 0 and 2 at their final observations (agent 2's
  // observations[1] is its next episode's), agent 1 at observations[1].
  torch::Tensor copy0 = r.observations[1].clone();
  copy0[0] = final_obs[0][0];
  copy0[2] = final_obs[0][2];
  const torch::Tensor v0 = policy->Value(copy0);
  EXPECT_NEAR(got[0][0].item<float>(), v0[0].item<float>(), 1e-5);
  // Step 2's copy 1: every agent at its final observation.
  const torch::Tensor v2 = policy->Value(final_obs[2]);
  for (int e = 3; e < 6; ++e) {
    EXPECT_NEAR(got[2][e].item<float>(), v2[e].item<float>(), 1e-5);
  }
  // 0 where not truncated (a terminated step bootstraps from nothing).
  EXPECT_EQ((got != 0).sum().item<int64_t>(), 5);
  // Every truncated row as a forward over the whole segment values it
  // (CentralTruncatedValues forwards only the copies with a truncated
  // agent on the host).
  const torch::Tensor after = torch::cat(
      {r.observations.narrow(0, 1, T - 1), r.next_observations.unsqueeze(0)});
  const torch::Tensor ended = (r.truncated | r.terminated).to(torch::kBool);
  const torch::Tensor full =
      policy
          ->Value(torch::where(ended.unsqueeze(2), final_obs, after)
                      .reshape({T * E, -1}))
          .reshape({T, E});
  EXPECT_TRUE(
      torch::allclose(got, full * r.truncated.to(torch::kFloat32), 1e-5, 1e-6))
      << got << full;
}

}  // namespace
}  // namespace rl
