#include "learner/other_policies.h"

#include <filesystem>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "learner/checkpoint.h"
#include "testing/run_specs.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

// Duel-v0 (2 agents) in 4 rows; red plays agent 0 (the learner's own),
// blue agent 1.
RunSpec TwoPolicies() {
  return SmallRunSpec(
      "env: {id: Duel-v0, plugin: duel, agents_per_env: 2, "
      "observation_size: 4, num_discrete_actions: 2, reward_low: -1, "
      "reward_high: 1}\n"
      "envs_per_actor: 4\nsegment_length: 4\n"
      "ppo: {num_minibatches: 1, num_epochs: 1}\n"
      "policies: [{name: red, agents: [0]},\n"
      "  {name: blue, agents: [1], policy: {hidden_sizes: [8]}}]\n");
}

std::set<std::string> Names(const std::string& root) {
  std::set<std::string> names;
  std::error_code error;
  for (const auto& e : std::filesystem::directory_iterator(root, error)) {
    names.insert(e.path().filename().string());
  }
  return names;
}

// The others' checkpoints are written without pruning and pruned to the
// run's own afterwards: a run checkpoint that failed to be written (here:
// 3, never made) costs them none of the ones the run still has.
TEST(OtherPoliciesTest, CheckpointsFollowTheRunsOwnAndReadBack) {
  const std::string dir = MakeTestDir();
  ASSERT_OK_AND_ASSIGN(
      OtherPolicies others,
      OtherPolicies::Create(TwoPolicies(), torch::kCPU, nullptr, 3));
  ASSERT_EQ(others.policies().size(), 1u);
  EXPECT_EQ(others.policies()[0].name, "blue");
  for (int64_t n = 1; n <= 3; ++n) ASSERT_OK(others.Write(dir, n));
  const std::string blue = dir + "/policies/blue/checkpoints";
  EXPECT_EQ(Names(blue).size(), 3u);
  // The run kept 1 and 2 (3 failed).
  for (const char* n : {"ckpt-000000000001", "ckpt-000000000002"}) {
    std::filesystem::create_directories(dir + "/checkpoints/" + n);
  }
  ASSERT_OK(others.Prune(dir));
  EXPECT_EQ(Names(blue),
            (std::set<std::string>{"ckpt-000000000001", "ckpt-000000000002"}));
  // Read back beside the run's checkpoint of the same number.
  ASSERT_OK(others.Read(dir + "/checkpoints/ckpt-000000000002/"));
  EXPECT_THAT(others.Read(dir + "/checkpoints/ckpt-000000000003"),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("policy blue's checkpoint beside")));
  // A run without a policies block has none.
  ASSERT_OK_AND_ASSIGN(
      OtherPolicies none,
      OtherPolicies::Create(SmallRunSpec(""), torch::kCPU, nullptr, 3));
  EXPECT_TRUE(none.empty());
}

}  // namespace
}  // namespace rl
