// What a plugin declares about its agents, read and checked without a
// library: tables with and without `agents`, counts and names refused
// naming what is wrong, and the run's env.agents_per_env against them.
#include "envs/env_agents.h"

#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// What the fake table's `agents` hands out.
int32_t g_count = 2;
const char* const* g_names = nullptr;
bool g_fail = false;

int FakeAgents(rl_env*, rl_env_agents* agents, char* error, size_t size) {
  if (g_fail) {
    std::snprintf(error, size, "no agents today");
    return 1;
  }
  agents->agents_per_env = g_count;
  agents->agent_names = g_names;
  return 0;
}

rl_env_plugin Table() {
  rl_env_plugin table{};
  table.agents = FakeAgents;
  g_count = 2;
  g_names = nullptr;
  g_fail = false;
  return table;
}

TEST(EnvAgentsTest, ATableWithoutAgentsHasOnePerEnvironment) {
  const rl_env_plugin table{};
  ASSERT_OK_AND_ASSIGN(const EnvAgents agents,
                       ReadEnvAgents(&table, nullptr, "lib.so"));
  EXPECT_EQ(agents.per_env, 1);
  EXPECT_EQ(DescribeAgents(agents), "1 agent per environment");
  EnvSpec spec;
  EXPECT_OK(CheckEnvAgents(agents, spec, "lib.so"));
  spec.set_agents_per_env(1);
  EXPECT_OK(CheckEnvAgents(agents, spec, "lib.so"));
}

TEST(EnvAgentsTest, NamesDefaultToIndicesAndAreChecked) {
  rl_env_plugin table = Table();
  ASSERT_OK_AND_ASSIGN(EnvAgents agents, ReadEnvAgents(&table, nullptr, "x"));
  EXPECT_EQ(DescribeAgents(agents), "2 agents per environment (0, 1)");
  const char* const named[] = {"red", "blue"};
  g_names = named;
  ASSERT_OK_AND_ASSIGN(agents, ReadEnvAgents(&table, nullptr, "x"));
  EXPECT_EQ(DescribeAgents(agents), "2 agents per environment (red, blue)");
  const char* const twice[] = {"red", "red"};
  g_names = twice;
  EXPECT_THAT(
      ReadEnvAgents(&table, nullptr, "x"),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               AllOf(HasSubstr("agent 1"), HasSubstr("\"red\" is taken"))));
  const char* const empty[] = {"red", ""};
  g_names = empty;
  EXPECT_THAT(ReadEnvAgents(&table, nullptr, "x"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("agent 1: a name of 1 to 64 characters")));
}

TEST(EnvAgentsTest, CountsOutsideTheRangeAndFailuresAreRefused) {
  rl_env_plugin table = Table();
  for (int32_t count : {0, -3, kMaxAgentsPerEnv + 1}) {
    g_count = count;
    EXPECT_THAT(ReadEnvAgents(&table, nullptr, "lib.so"),
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         AllOf(HasSubstr("environment plugin lib.so"),
                               HasSubstr("per environment (1 to 1024)"))))
        << count;
  }
  g_count = 2;
  g_fail = true;
  EXPECT_THAT(ReadEnvAgents(&table, nullptr, "lib.so"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("agents failed: no agents today")));
}

TEST(EnvAgentsTest, TheRunMustDeclareThePluginsCount) {
  EnvAgents two;
  two.per_env = 2;
  two.names = {"a", "b"};
  EnvSpec spec;
  EXPECT_THAT(CheckEnvAgents(two, spec, "lib.so"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("declares 2 agents per environment"),
                             HasSubstr("env.agents_per_env is 1"),
                             HasSubstr("declare env.agents_per_env: 2"))));
  spec.set_agents_per_env(2);
  EXPECT_OK(CheckEnvAgents(two, spec, "lib.so"));
  spec.set_agents_per_env(3);
  EXPECT_THAT(CheckEnvAgents(two, spec, "lib.so"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("env.agents_per_env is 3")));
}

TEST(EnvAgentsTest, WholeCopiesRoundsRowsUp) {
  EnvSpec spec;
  EXPECT_EQ(WholeCopies(7, spec), 7);
  spec.set_agents_per_env(2);
  EXPECT_EQ(WholeCopies(7, spec), 8);
  EXPECT_EQ(WholeCopies(8, spec), 8);
  spec.set_agents_per_env(3);
  EXPECT_EQ(WholeCopies(1, spec), 3);
  EXPECT_EQ(WholeCopies(0, spec), 3);
}

// A step of agents that leave early, against the ABI's rules: two copies of
// two agents; each case changes one thing of a good step.
struct LeavingStep {
  std::vector<uint8_t> was = {1, 1, 0, 1};
  std::vector<uint8_t> alive = {0, 1, 0, 1};
  std::vector<float> rewards = {1, 1, 0, 1};
  std::vector<uint8_t> terminated = {1, 0, 0, 0};
  std::vector<uint8_t> truncated = {0, 0, 0, 0};
  std::string Check() const {
    return CheckLeavingStep(was.data(), alive.data(), rewards.data(),
                            terminated.data(), truncated.data(), 4, 2);
  }
};

TEST(CheckLeavingStepTest, AStepThatKeepsTheRulesPassesAndEachBreachIsNamed) {
  // Copy 0: agent 0 leaves, agent 1 plays on. Copy 1: agent 0 is padding.
  EXPECT_EQ(LeavingStep().Check(), "");
  // Copy 1's last agent ends: the copy resets, every row alive.
  LeavingStep reset;
  reset.terminated[3] = 1;
  reset.alive[2] = reset.alive[3] = 1;
  EXPECT_EQ(reset.Check(), "");
  // ... but not with a row left out of the reset.
  reset.alive[2] = 0;
  EXPECT_THAT(reset.Check(), AllOf(HasSubstr("row 2 (agent 0 of environment "
                                             "1)"),
                                   HasSubstr("resets")));
  LeavingStep padding_paid;
  padding_paid.rewards[2] = 0.5f;
  EXPECT_THAT(padding_paid.Check(),
              AllOf(HasSubstr("row 2"), HasSubstr("reward 0.5"),
                    HasSubstr("left its game earlier")));
  LeavingStep padding_ended;
  padding_ended.truncated[2] = 1;
  EXPECT_THAT(padding_ended.Check(), HasSubstr("truncated=1"));
  LeavingStep stays;
  stays.alive[0] = 1;
  EXPECT_THAT(stays.Check(),
              AllOf(HasSubstr("row 0"), HasSubstr("still alive while others")));
  LeavingStep leaves_early;
  leaves_early.alive[1] = 0;
  leaves_early.alive[0] = 1;
  leaves_early.terminated = {0, 0, 0, 0};
  EXPECT_THAT(leaves_early.Check(),
              AllOf(HasSubstr("row 1"),
                    HasSubstr("alive=0 without its episode ending")));
  LeavingStep comes_back;
  comes_back.alive[2] = 1;
  EXPECT_THAT(comes_back.Check(),
              AllOf(HasSubstr("row 2"), HasSubstr("alive again")));
  LeavingStep nobody;
  nobody.alive[3] = 0;
  nobody.terminated[3] = 1;
  EXPECT_THAT(nobody.Check(), HasSubstr("environment 1: no agent is alive"));
  LeavingStep two;
  two.alive[1] = 2;
  EXPECT_THAT(two.Check(), HasSubstr("alive=2"));
}

}  // namespace
}  // namespace rl
