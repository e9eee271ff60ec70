// What a plugin declares about its agents, read and checked without a
// library: tables with and without `agents`, counts and names refused
// naming what is wrong, and the run's env.agents_per_env against them.
#include "envs/env_agents.h"

#include <cstdio>

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

}  // namespace
}  // namespace rl
