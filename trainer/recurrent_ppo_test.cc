// Recurrent PPO end to end on one machine: the actor's collector carries an
// LSTM's state through real CartPole episodes, the segment crosses the wire
// format, and the learner's first look at it (the first minibatch of the
// first epoch, before any step) recomputes exactly the log-probabilities the
// actor sampled with: the classic recurrent-PPO bug is a learner that does
// not (it starts each sequence from zeros, or forgets the resets).
#include <torch/torch.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "actor/rollout_collector.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "learner/ppo_updater.h"
#include "policy/actor_critic.h"
#include "policy/segment_codec.h"
#include "runspec/named_policies.h"
#include "runspec/run_spec.h"
#include "testing/run_specs.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

RunSpec Spec(const std::string& core) {
  auto spec = LoadRunSpec(
      "env: {id: CartPole-v1}\n"
      "envs_per_actor: 4\n"
      "segment_length: 48\n"
      "policy: {core: " +
          core +
          ", core_size: 16, hidden_sizes: [16]}\n"
          "ppo: {num_epochs: 1, num_minibatches: 1}\n",
      RunFileFormat::kYaml);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

// Walkers-v0 (3 agents that leave early, episodes cut at 20 steps): 6
// rows of 48 steps, a `core` of 16 after [16], one epoch of one minibatch,
// then `more` (YAML).
absl::StatusOr<RunSpec> WalkersRun(const std::string& core,
                                   const std::string& more = "") {
  return LoadRunSpec(absl::StrCat(WalkersEnvYaml(20), R"(
envs_per_actor: 6
segment_length: 48
policy: {core: )",
                                  core, R"(, core_size: 16, hidden_sizes: [16]}
ppo: {num_epochs: 1, num_minibatches: 1}
)",
                                  more),
                     RunFileFormat::kYaml);
}

// A policy of `spec` whose head is sharp enough for the state to change its
// action probabilities (a fresh head is near uniform whatever it reads).
ActorCritic SharpPolicy(const RunSpec& spec, const RolloutCollector& c) {
  torch::manual_seed(7);
  auto policy = CreateActorCritic(RunNetworkConfig(spec));
  EXPECT_TRUE(policy.ok()) << policy.status();
  torch::NoGradGuard no_grad;
  for (auto& item : (*policy)->named_parameters()) {
    if (item.key() == "policy_head.weight") item.value().mul_(300);
  }
  return *policy;
}

// Two segments of `spec` collected by `policy`, the second as the learner
// decodes it from the wire.
struct Collected {
  Rollout first;
  RolloutSegment wire;
  Rollout second;
};
Collected Collect(const RunSpec& spec, RolloutCollector& collector,
                  ActorCritic& policy) {
  Collected c;
  c.first = collector.AllocateRollout();
  EXPECT_OK(collector.Collect(policy, &c.first));
  Rollout second = collector.AllocateRollout();
  EXPECT_OK(collector.Collect(policy, &second));
  EXPECT_OK(EncodeSegment(second, &c.wire));
  *c.wire.mutable_env() = collector.env_spec();
  for (const float r : collector.episode_returns())
    c.wire.add_episode_returns(r);
  for (const int32_t n : collector.episode_lengths()) {
    c.wire.add_episode_lengths(n);
  }
  SegmentShape shape;
  shape.env = collector.env_spec();
  shape.num_steps = spec.segment_length();
  shape.num_envs = spec.envs_per_actor();
  shape.state_size = policy->state_size();
  auto decoded = DecodeSegment(c.wire, shape);
  EXPECT_TRUE(decoded.ok()) << decoded.status();
  c.second = *decoded;
  return c;
}

TEST(RecurrentPpoTest, TheLearnerRecomputesTheActorsLogProbs) {
  for (const std::string core : {"lstm", "gru"}) {
    SCOPED_TRACE(core);
    const RunSpec spec = Spec(core);
    ASSERT_OK_AND_ASSIGN(auto collector, RolloutCollector::Create(spec, 3, 1));
    ActorCritic policy = SharpPolicy(spec, *collector);
    const Collected c = Collect(spec, *collector, policy);
    const int64_t state_size = core == "lstm" ? 32 : 16;
    ASSERT_EQ(c.second.initial_state.sizes(),
              (std::vector<int64_t>{4, state_size}));
    // Episodes end inside the segments (a sharp untrained policy drops the
    // pole within a few dozen steps), and the state carries across them:
    // the second segment starts from where the first left each env, zero
    // where its episode ended on the first segment's last step.
    EXPECT_GT(
        (c.first.terminated.sum() + c.second.terminated.sum()).item<int64_t>(),
        0);
    const torch::Tensor last_ended =
        c.first.terminated[-1] | c.first.truncated[-1];
    for (int64_t e = 0; e < 4; ++e) {
      const bool zero =
          c.second.initial_state[e].abs().sum().item<float>() == 0;
      EXPECT_EQ(zero, last_ended[e].item<uint8_t>() != 0) << "env " << e;
    }

    // The learner, from the same weights: its one minibatch of the one
    // epoch reads the rollout before any step, so the ratio is 1 to float
    // precision (and no sample is clipped).
    ActorCritic learner_policy = SharpPolicy(spec, *collector);
    PpoUpdater updater(learner_policy, spec.ppo(), 1000000, 1,
                       spec.execution());
    ASSERT_OK_AND_ASSIGN(const UpdateStats stats, updater.Update(c.second, 0));
    EXPECT_LT(std::fabs(stats.approx_kl), 1e-6);
    EXPECT_EQ(stats.clip_fraction, 0);

    // The bug this guards against: sequences started from zeros instead of
    // the segment's state read other probabilities.
    Rollout zeroed = c.second;
    zeroed.initial_state = torch::zeros_like(c.second.initial_state);
    ActorCritic buggy_policy = SharpPolicy(spec, *collector);
    PpoUpdater buggy(buggy_policy, spec.ppo(), 1000000, 1, spec.execution());
    ASSERT_OK_AND_ASSIGN(const UpdateStats wrong, buggy.Update(zeroed, 0));
    std::printf("%s: first-epoch approx KL %.3g (from zeros: %.3g)\n",
                core.c_str(), stats.approx_kl, wrong.approx_kl);
    EXPECT_GT(wrong.approx_kl,
              100 * std::max(std::fabs(stats.approx_kl), 1e-9));
  }
}

// Agents that leave early (Walkers-v0, env.agents_leave) beside a core:
// the state restarts after every padding step, on the actor as in the
// learner, so an agent's next episode never starts from what its padding
// ran through. The learner's first look recomputes the actor's
// log-probabilities over the alive rows, and a segment whose last step was
// padding hands on a zero state.
TEST(RecurrentPpoTest, AgentsThatLeaveRestartTheirStateAfterPadding) {
  for (const std::string core : {"lstm", "gru"}) {
    SCOPED_TRACE(core);
    ASSERT_OK_AND_ASSIGN(const RunSpec spec, WalkersRun(core));
    ASSERT_OK_AND_ASSIGN(auto collector, RolloutCollector::Create(spec, 3, 1));
    ActorCritic policy = SharpPolicy(spec, *collector);
    const Collected c = Collect(spec, *collector, policy);
    ASSERT_TRUE(c.second.alive.defined());
    // Padding followed by a new episode within the segment: what the
    // restart is for.
    const torch::Tensor back =
        c.second.alive.narrow(0, 0, 47).eq(0) & c.second.alive.narrow(0, 1, 47);
    ASSERT_GT(back.sum().item<int64_t>(), 0);
    const torch::Tensor last_reset = c.first.terminated[-1] |
                                     c.first.truncated[-1] |
                                     c.first.alive[-1].eq(0);
    for (int64_t e = 0; e < 6; ++e) {
      const bool zero =
          c.second.initial_state[e].abs().sum().item<float>() == 0;
      EXPECT_EQ(zero, last_reset[e].item<bool>()) << "env " << e;
    }
    ActorCritic learner_policy = SharpPolicy(spec, *collector);
    PpoUpdater updater(learner_policy, spec.ppo(), 1000000, 1,
                       spec.execution());
    ASSERT_OK_AND_ASSIGN(const UpdateStats stats, updater.Update(c.second, 0));
    std::printf("%s with agents that leave: first-epoch approx KL %.3g\n",
                core.c_str(), stats.approx_kl);
    EXPECT_LT(std::fabs(stats.approx_kl), 1e-6);
    EXPECT_EQ(stats.clip_fraction, 0);
  }
}

// Several policies beside a core (each carries the run's): each steps its
// own rows' states, values its rows' next and truncated observations from
// them, and the learner, given only that policy's rows of the segment
// (Rollout::Rows, as every learner path takes them), recomputes the
// log-probabilities the policy sampled with. Walkers-v0's agents leave
// early too, so the restarts after padding are crossed per policy.
TEST(RecurrentPpoTest, SeveralPoliciesStepTheirRowsStates) {
  for (const std::string core : {"lstm", "gru"}) {
    SCOPED_TRACE(core);
    ASSERT_OK_AND_ASSIGN(const RunSpec spec, WalkersRun(core, R"(policies:
  - {name: a, agents: [0, 1]}
  - {name: b, agents: [2], policy: {hidden_sizes: [8]}}
)"));
    ASSERT_OK_AND_ASSIGN(auto collector, RolloutCollector::Create(spec, 3, 1));
    std::vector<RunSpec> own;
    std::vector<RowPolicy> acting;
    for (int i = 0; i < 2; ++i) {
      own.push_back(NamedPolicyRun(spec, i));
      acting.push_back(
          RowPolicy{SharpPolicy(own[i], *collector),
                    torch::tensor(RowsOfPolicy(spec, i, 6), torch::kInt64)});
    }
    ASSERT_OK(collector->SetRowPolicies(acting));
    const Collected c = Collect(spec, *collector, acting[0].policy);
    // Each policy valued its rows' next observations from their states
    // (the collector's, where the segment left them).
    const torch::Tensor state =
        collector->SaveState().at("collector.policy_state");
    for (RowPolicy& rp : acting) {
      torch::NoGradGuard no_grad;
      const torch::Tensor want =
          rp.policy->Value(c.second.next_observations.index_select(0, rp.rows),
                           state.index_select(0, rp.rows));
      EXPECT_TRUE(torch::allclose(c.second.next_values.index_select(0, rp.rows),
                                  want, 1e-5, 1e-6))
          << c.second.next_values << want;
    }
    // Both policies' rows carried a state into the second segment.
    for (const RowPolicy& rp : acting) {
      EXPECT_GT(c.second.initial_state.index_select(0, rp.rows)
                    .abs()
                    .sum()
                    .item<float>(),
                0);
    }
    for (int i = 0; i < 2; ++i) {
      SCOPED_TRACE(own[i].policy().ShortDebugString());
      const Rollout mine = c.second.Rows(acting[i].rows);
      ActorCritic learner_policy = SharpPolicy(own[i], *collector);
      PpoUpdater updater(learner_policy, own[i].ppo(), 1000000, 1,
                         own[i].execution());
      ASSERT_OK_AND_ASSIGN(const UpdateStats stats, updater.Update(mine, 0));
      std::printf("%s, policy %d of 2: first-epoch approx KL %.3g\n",
                  core.c_str(), i, stats.approx_kl);
      EXPECT_LT(std::fabs(stats.approx_kl), 1e-6);
      EXPECT_EQ(stats.clip_fraction, 0);
      // From zeros instead: other probabilities.
      Rollout zeroed = mine;
      zeroed.initial_state = torch::zeros_like(mine.initial_state);
      ActorCritic buggy_policy = SharpPolicy(own[i], *collector);
      PpoUpdater buggy(buggy_policy, own[i].ppo(), 1000000, 1,
                       own[i].execution());
      ASSERT_OK_AND_ASSIGN(const UpdateStats wrong, buggy.Update(zeroed, 0));
      EXPECT_GT(wrong.approx_kl,
                100 * std::max(std::fabs(stats.approx_kl), 1e-9));
    }
  }
}

// A policy's minibatches are whole sequences of its own rows: with 3
// agents split 2 and 1 over one copy (envs_per_actor 3), 2 minibatches fit
// the first policy's 2 rows though they do not divide envs_per_actor, and
// 2 do not fit the second's 1 row.
TEST(RecurrentPpoTest, APolicysMinibatchesDivideItsOwnRows) {
  const auto run = [](const std::string& b_minibatches) {
    return LoadRunSpec(absl::StrCat(WalkersEnvYaml(20), R"(
envs_per_actor: 3
segment_length: 16
policy: {core: gru, core_size: 8, hidden_sizes: [8]}
ppo: {num_minibatches: 1}
policies:
  - {name: a, agents: [0, 1], ppo: {num_minibatches: 2}}
  - {name: b, agents: [2], ppo: {num_minibatches: )",
                                    b_minibatches, "}}\n"),
                       RunFileFormat::kYaml);
  };
  EXPECT_OK(run("1").status());
  EXPECT_THAT(run("2").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       testing::AllOf(
                           testing::HasSubstr(
                               "policies[1].ppo.num_minibatches: a recurrent "
                               "policy learns from whole env sequences: "
                               "num_minibatches must divide the 1 rows"),
                           testing::Not(testing::HasSubstr("policies[0]")))));
}

// Minibatches of whole env sequences, several epochs: the update runs, and
// a rollout that does not fit the recurrent policy is refused by name.
TEST(RecurrentPpoTest, UpdatesSplitEnvsAndRefuseBadStates) {
  RunSpec spec = Spec("lstm");
  spec.mutable_ppo()->set_num_epochs(3);
  spec.mutable_ppo()->set_num_minibatches(2);
  ASSERT_OK_AND_ASSIGN(auto collector, RolloutCollector::Create(spec, 4, 1));
  ActorCritic policy = SharpPolicy(spec, *collector);
  const Collected c = Collect(spec, *collector, policy);
  PpoUpdater updater(policy, spec.ppo(), 1000000, 1, spec.execution());
  ASSERT_OK_AND_ASSIGN(const UpdateStats stats, updater.Update(c.second, 0));
  EXPECT_EQ(stats.epochs, 3);
  EXPECT_TRUE(std::isfinite(stats.policy_loss));

  Rollout no_state = c.second;
  no_state.initial_state = torch::Tensor();
  EXPECT_THAT(updater.Update(no_state, 0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       testing::HasSubstr("rollout.initial_state")));
  Rollout nan = c.second;
  nan.initial_state = c.second.initial_state.clone();
  nan.initial_state[1][0] = std::nanf("");
  EXPECT_THAT(updater.Update(nan, 0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       testing::HasSubstr("rollout.initial_state")));
  RunSpec odd = spec;
  odd.mutable_ppo()->set_num_minibatches(3);
  PpoUpdater three(policy, odd.ppo(), 1000000, 1, odd.execution());
  EXPECT_THAT(three.Update(c.second, 0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       testing::HasSubstr("whole env sequences")));

  // On the wire: a run without a core takes no state, and one with a core
  // needs it.
  SegmentShape shape;
  shape.env = collector->env_spec();
  shape.num_steps = spec.segment_length();
  shape.num_envs = spec.envs_per_actor();
  EXPECT_THAT(DecodeSegment(c.wire, shape).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       testing::HasSubstr("segment.initial_state")));
  shape.state_size = 32;
  RolloutSegment missing = c.wire;
  missing.clear_initial_state();
  EXPECT_THAT(DecodeSegment(missing, shape).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       testing::HasSubstr("initial_state")));
}

// A checkpoint of the collector keeps the policy's state: a restored one
// starts its next segment from the state the saved one would have.
TEST(RecurrentPpoTest, TheCollectorsStateSurvivesACheckpoint) {
  const RunSpec spec = Spec("gru");
  ASSERT_OK_AND_ASSIGN(auto collector, RolloutCollector::Create(spec, 5, 1));
  ActorCritic policy = SharpPolicy(spec, *collector);
  Rollout r = collector->AllocateRollout();
  ASSERT_OK(collector->Collect(policy, &r));
  const auto saved = collector->SaveState();
  ASSERT_EQ(saved.count("collector.policy_state"), 1u);

  ASSERT_OK_AND_ASSIGN(auto restored, RolloutCollector::Create(spec, 99, 1));
  ASSERT_OK(restored->RestoreState(saved));
  Rollout a = collector->AllocateRollout(), b = restored->AllocateRollout();
  ASSERT_OK(collector->Collect(policy, &a));
  ASSERT_OK(restored->Collect(policy, &b));
  EXPECT_TRUE(torch::equal(a.initial_state, b.initial_state));
  EXPECT_GT(a.initial_state.abs().sum().item<float>(), 0);

  auto wrong = saved;
  wrong["collector.policy_state"] = torch::zeros({4, 3});
  EXPECT_THAT(restored->RestoreState(wrong),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       testing::HasSubstr("policy state")));
}

}  // namespace
}  // namespace rl
