#include "actor/rollout_collector.h"

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "testing/run_specs.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

TEST(RolloutCollectorTest, FillsTheRolloutConsistently) {
  const RunSpec spec = SmallRunSpec(
      "env: {id: CartPole-v1, max_episode_steps: 20}\n"
      "envs_per_actor: 6\nsegment_length: 50\nppo: {num_minibatches: 2}");
  auto collector = RolloutCollector::Create(spec, 3, 1);
  ASSERT_OK(collector);
  torch::manual_seed(0);
  ActorCritic policy(RunNetworkConfig(spec));
  Rollout rollout = (*collector)->AllocateRollout();
  ASSERT_OK((*collector)->Collect(policy, &rollout));

  EXPECT_TRUE(torch::all(rollout.rewards == 1).item<bool>());
  // The time limit of 20 < 50 steps: some episodes were truncated, and
  // their bootstrap values were filled in (non-zero exactly there).
  const torch::Tensor truncated = rollout.truncated.to(torch::kBool);
  EXPECT_GT(truncated.sum().item<int64_t>(), 0);
  EXPECT_TRUE(torch::all(rollout.truncated_values.index({~truncated}) == 0)
                  .item<bool>());
  EXPECT_TRUE(torch::all(rollout.truncated_values.index({truncated}) != 0)
                  .item<bool>());
  // Stored log-probs and values are those of the policy on the stored data.
  const PolicyEvaluation eval = policy->Evaluate(
      rollout.observations.reshape({300, 4}), rollout.actions.reshape({300}));
  EXPECT_TRUE(torch::allclose(eval.log_probs, rollout.log_probs.reshape({300}),
                              1e-5, 1e-5));
  EXPECT_TRUE(
      torch::allclose(eval.values, rollout.values.reshape({300}), 1e-5, 1e-5));
  // Every finished episode is reported with its return (= its length here).
  const auto& returns = (*collector)->episode_returns();
  const auto& lengths = (*collector)->episode_lengths();
  ASSERT_EQ(returns.size(), lengths.size());
  const int64_t ended =
      (rollout.terminated | rollout.truncated).sum().item<int64_t>();
  EXPECT_EQ(static_cast<int64_t>(returns.size()), ended);
  for (size_t i = 0; i < returns.size(); ++i) {
    EXPECT_FLOAT_EQ(returns[i], lengths[i]);
    EXPECT_LE(lengths[i], 20);
  }
  // The next segment continues from next_observations.
  const torch::Tensor next = rollout.next_observations.clone();
  ASSERT_OK((*collector)->Collect(policy, &rollout));
  EXPECT_TRUE(torch::equal(rollout.observations[0], next));
}

// This process's threads (/proc/self/task).
int Threads() {
  int n = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator("/proc/self/task")) {
    (void)entry;
    ++n;
  }
  return n;
}

// resources.actor_threads was accepted and checked, then ignored: the
// worker's --env_threads alone said how many threads stepped the envs. The
// run's count steps them where it asks for more than 1 (at most the
// worker's, where the worker gives one above 1); else the worker's.
TEST(RolloutCollectorTest, TheRunsActorThreadsStepTheEnvs) {
  const auto threads_with = [](const std::string& resources, int env_threads) {
    const RunSpec spec = SmallRunSpec(
        "env: {id: CartPole-v1}\nenvs_per_actor: 8\nsegment_length: 8\n" +
        resources);
    const int before = Threads();
    auto collector = RolloutCollector::Create(spec, 3, env_threads);
    EXPECT_OK(collector);
    return Threads() - before;
  };
  threads_with("", 1);  // whatever starts once per process, started
  const int one = threads_with("", 1);
  EXPECT_EQ(threads_with("resources: {actor_threads: 4}", 1) - one, 3);
  EXPECT_EQ(threads_with("resources: {actor_threads: 1}", 4) - one, 3);
  EXPECT_EQ(threads_with("resources: {actor_threads: 2}", 4) - one, 1);
  // A worker's --env_threads above 1 caps what a run asks for.
  EXPECT_EQ(threads_with("resources: {actor_threads: 8}", 3) - one, 2);
}

// Agents that leave early (envs/testdata/leaving_plugin.cc: agent k's
// episode ends after 2 (k + 1) steps, 1 a step): the rollout's alive says
// which steps are padding, each agent's episode is reported once with its
// own return, the padding is not, and the next segment goes on from the
// alive the last step left.
TEST(RolloutCollectorTest, AgentsThatLeaveEarlyLeavePaddingRows) {
  const RunSpec spec = SmallRunSpec(
      "env: {id: Leavers-v0, plugin: envs/testdata/libleaving_plugin.so,\n"
      "      observation_size: 2, num_discrete_actions: 2, agents_per_env: 3,\n"
      "      agents_leave: true}\n"
      "envs_per_actor: 3\nsegment_length: 4\n"
      "ppo: {num_minibatches: 1, normalize_rewards: true}");
  ASSERT_OK_AND_ASSIGN(auto collector, RolloutCollector::Create(spec, 3, 1));
  torch::manual_seed(0);
  ActorCritic policy(RunNetworkConfig(spec));
  Rollout rollout = collector->AllocateRollout();
  ASSERT_TRUE(rollout.alive.defined());
  ASSERT_OK(collector->Collect(policy, &rollout));
  // Steps 1-4: agent 0 leaves after step 2, agent 1 after step 4.
  const torch::Tensor want_first =
      torch::tensor({1, 1, 1, 1, 1, 1, 0, 1, 1, 0, 1, 1}, torch::kUInt8)
          .reshape({4, 3});
  EXPECT_TRUE(torch::equal(rollout.alive, want_first)) << rollout.alive;
  EXPECT_EQ(collector->episode_returns(), (std::vector<float>{2, 4}));
  // Padding pays nothing, even scaled.
  EXPECT_EQ(rollout.rewards[2][0].item<float>(), 0.f);
  EXPECT_GT(rollout.rewards[2][1].item<float>(), 0.f);
  // Steps 5-8: agent 2 ends the game at step 6, all are alive again, and
  // agent 0 of the next game leaves after its step 2 (step 8).
  ASSERT_OK(collector->Collect(policy, &rollout));
  const torch::Tensor want_second =
      torch::tensor({0, 0, 1, 0, 0, 1, 1, 1, 1, 1, 1, 1}, torch::kUInt8)
          .reshape({4, 3});
  EXPECT_TRUE(torch::equal(rollout.alive, want_second)) << rollout.alive;
  EXPECT_EQ(collector->episode_returns(), (std::vector<float>{6, 2}));
  EXPECT_EQ(collector->episode_lengths(), (std::vector<int32_t>{6, 2}));
  // A collector resumed from its state goes on from the same alive.
  const std::map<std::string, torch::Tensor> state = collector->SaveState();
  ASSERT_TRUE(state.count("collector.alive"));
  EXPECT_TRUE(torch::equal(state.at("collector.alive"),
                           torch::tensor({0, 1, 1}, torch::kUInt8)));
}

// The probe plugin's run (a plugin without save_state), 4 envs x 7 steps,
// with `more` run-file lines.
RunSpec ProbeRun(const std::string& more) {
  return SmallRunSpec(
      "env: {id: Probe-v0, plugin: envs/testdata/libtest_plugin.so,\n"
      "      observation_size: 3, num_discrete_actions: 2}\n"
      "envs_per_actor: 4\nsegment_length: 7\n" +
      more);
}

// A collector of `spec` after one segment into `rollout`: its saved state.
std::map<std::string, torch::Tensor> CollectedOnce(const RunSpec& spec,
                                                   ActorCritic& policy,
                                                   Rollout* rollout) {
  auto first = RolloutCollector::Create(spec, 3, 1);
  EXPECT_OK(first);
  if (!first.ok()) return {};
  *rollout = (*first)->AllocateRollout();
  EXPECT_OK((*first)->Collect(policy, rollout));
  return (*first)->SaveState();
}

// A plugin that saves no state (no save_state): a resumed collector keeps
// the observations of the episodes its environments began, not the saved
// ones of environments that are gone.
TEST(RolloutCollectorTest, APluginWithoutStateResumesOnFreshEpisodes) {
  const RunSpec spec = ProbeRun("ppo: {num_minibatches: 1}");
  ActorCritic policy(RunNetworkConfig(spec));
  Rollout rollout;
  const auto state = CollectedOnce(spec, policy, &rollout);
  EXPECT_GT(rollout.next_observations[0][0].item<float>(), 0);  // t = 7
  auto second = RolloutCollector::Create(spec, 3, 1);
  ASSERT_OK(second);
  ASSERT_OK((*second)->RestoreState(state));
  ASSERT_OK((*second)->Collect(policy, &rollout));
  // Its first observations are of t = 0 (fresh episodes), not t = 7.
  EXPECT_EQ(rollout.observations[0][0][0].item<float>(), 0.0f);
}

// Nor does anything kept per episode come back for the fresh episodes: a
// recurrent policy's state starts from zeros, the reward scaler's running
// returns from 0 (its statistics stay).
TEST(RolloutCollectorTest, FreshEpisodesAfterAResumeStartFromZeroState) {
  const RunSpec spec = ProbeRun(
      "policy: {core: gru, core_size: 4}\n"
      "ppo: {num_minibatches: 1, normalize_rewards: true}");
  ActorCritic policy(RunNetworkConfig(spec));
  Rollout rollout;
  const auto saved = CollectedOnce(spec, policy, &rollout);
  ASSERT_GT(saved.at("collector.policy_state").abs().sum().item<float>(), 0);
  const torch::Tensor scaler = saved.at("collector.reward_scaler");
  ASSERT_GT(scaler.slice(0, 0, 4).abs().sum().item<double>(), 0);
  auto second = RolloutCollector::Create(spec, 3, 1);
  ASSERT_OK(second);
  ASSERT_OK((*second)->RestoreState(saved));
  const auto resumed = (*second)->SaveState();
  EXPECT_EQ(resumed.at("collector.policy_state").abs().sum().item<float>(), 0);
  const torch::Tensor kept = resumed.at("collector.reward_scaler");
  EXPECT_EQ(kept.slice(0, 0, 4).abs().sum().item<double>(), 0);
  EXPECT_TRUE(torch::equal(kept.slice(0, 4), scaler.slice(0, 4)));
  // A damaged state (a tensor of another dtype) is an error naming it, not
  // an abort.
  for (const auto& [key, says] :
       std::vector<std::pair<std::string, std::string>>{
           {"collector.reward_scaler", "reward-scaler state does not fit"},
           {"collector.generator", "is not a random generator's state"},
           {"collector.env", "is not the environments' state bytes"}}) {
    auto damaged = saved;
    damaged[key] = torch::zeros({7}, torch::kFloat32);
    auto third = RolloutCollector::Create(spec, 3, 1);
    ASSERT_OK(third);
    EXPECT_THAT((*third)->RestoreState(damaged),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(says)))
        << key;
  }
}

TEST(RolloutCollectorTest, ContinuousActionsAndRewardScaling) {
  const RunSpec spec = SmallRunSpec(
      "env: {id: Pendulum-v1}\nenvs_per_actor: 4\nsegment_length: 64\n"
      "ppo: {normalize_rewards: true, num_minibatches: 1}");
  auto collector = RolloutCollector::Create(spec, 1, 1);
  ASSERT_OK(collector);
  ActorCritic policy(RunNetworkConfig(spec));
  Rollout rollout = (*collector)->AllocateRollout();
  EXPECT_EQ(rollout.actions.sizes(), (std::vector<int64_t>{64, 4, 1}));
  ASSERT_OK((*collector)->Collect(policy, &rollout));
  // Pendulum rewards are in [-16.3, 0]; scaled ones are still <= 0, and
  // differ from the raw ones.
  EXPECT_TRUE(torch::all(rollout.rewards <= 0).item<bool>());
  EXPECT_GT(rollout.rewards.abs().max().item<float>(), 0);
}

TEST(RolloutCollectorTest, WrongRolloutShapeIsAnError) {
  const RunSpec spec = SmallRunSpec(
      "env: {id: CartPole-v1}\nenvs_per_actor: 4\n"
      "segment_length: 8\nppo: {num_minibatches: 1}");
  auto collector = RolloutCollector::Create(spec, 1, 1);
  ASSERT_OK(collector);
  ActorCritic policy(RunNetworkConfig(spec));
  Rollout wrong = Rollout::Allocate(8, 5, 4, 0);
  EXPECT_THAT((*collector)->Collect(policy, &wrong),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace rl
