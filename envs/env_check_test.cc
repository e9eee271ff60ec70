#include "envs/env_check.h"

#include <string>

#include "envs/env_registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

EnvSpec Probe(const std::string& mode) {
  EnvSpec spec;
  spec.set_id("Probe-v0");
  spec.set_plugin("envs/testdata/libtest_plugin.so");
  spec.set_observation_size(3);
  spec.set_num_discrete_actions(2);
  (*spec.mutable_kwargs()->mutable_fields())["mode"].set_string_value(mode);
  EXPECT_OK(ResolveEnvSpec(&spec));
  return spec;
}

EnvCheckOptions Options() {
  EnvCheckOptions o;
  o.steps = 200;
  o.num_envs = 4;
  o.search_path = std::vector<std::string>{};
  return o;
}

TEST(EnvCheckTest, AWellBehavedPluginPassesWithItsFigures) {
  ASSERT_OK_AND_ASSIGN(const EnvCheckReport r,
                       CheckEnv(Probe("ok"), Options()));
  EXPECT_EQ(r.violation, "");
  EXPECT_EQ(r.plugin_name, "probe 1.0");
  EXPECT_EQ(r.observation, "Box(float32, [3])");
  EXPECT_EQ(r.action, "Discrete(2)");
  EXPECT_EQ(r.steps, 800);
  EXPECT_EQ(r.episodes, 80);  // every episode is 10 steps
  EXPECT_GT(r.steps_per_second, 0);
  EXPECT_THAT(FormatEnvCheckReport(r), HasSubstr("no violation found"));
}

// Agents that leave early: the env passes where the run allows it (each
// agent's episode counted once, at its own end), and fails the check that
// a copy's agents end together where the run does not.
TEST(EnvCheckTest, AgentsThatLeaveEarlyAreCheckedAsTheRunAllows) {
  EnvSpec spec;
  spec.set_id("Leavers-v0");
  spec.set_plugin("envs/testdata/libleaving_plugin.so");
  spec.set_observation_size(2);
  spec.set_num_discrete_actions(2);
  spec.set_agents_per_env(3);
  spec.set_agents_leave(true);
  ASSERT_OK(ResolveEnvSpec(&spec));
  EnvCheckOptions options = Options();
  options.num_envs = 6;
  options.steps = 60;  // 10 games of 6 steps a copy
  ASSERT_OK_AND_ASSIGN(const EnvCheckReport r, CheckEnv(spec, options));
  EXPECT_EQ(r.violation, "");
  EXPECT_THAT(r.agents, HasSubstr("agents may leave early"));
  EXPECT_EQ(r.episodes, 2 * 10 * 3);
  EXPECT_DOUBLE_EQ(r.mean_return, (2 + 4 + 6) / 3.0);
  // The helper ends everyone's episode at agent 0's without the run's
  // leave: the same env passes, its games 2 steps long.
  spec.set_agents_leave(false);
  ASSERT_OK_AND_ASSIGN(const EnvCheckReport t, CheckEnv(spec, options));
  EXPECT_EQ(t.violation, "");
  EXPECT_EQ(t.episodes, 2 * 30 * 3);
}

// A Dict env's report lays out its parts; parts the run declares wrong
// are the violation.
TEST(EnvCheckTest, DictSpacesAreLaidOut) {
  EnvSpec spec;
  spec.set_id("Lookout-v0");
  spec.set_plugin("envs/testdata/libdict_plugin.so");
  (*spec.mutable_kwargs()->mutable_fields())["size"].set_number_value(4);
  spec.set_observation_size(18);
  spec.add_action_nvec(2);
  spec.add_action_nvec(2);
  ASSERT_OK(ResolveEnvSpec(&spec));
  ASSERT_OK_AND_ASSIGN(const EnvCheckReport r, CheckEnv(spec, Options()));
  EXPECT_EQ(r.violation, "");
  EXPECT_EQ(r.observation,
            "Box(float32, [18]) = Dict(hint Discrete(2) at [0, 2), image "
            "Box(uint8, [4, 4, 1]) at [2, 18))");
  EXPECT_EQ(r.action,
            "MultiDiscrete([2, 2]) = Dict(col Discrete(2) at [0, 1), row "
            "Discrete(2) at [1, 2))");
  EnvSpec wrong = spec;
  wrong.clear_observation_size();
  wrong.clear_observation_dtype();
  ObservationPart* part = wrong.add_observation_parts();
  part->set_name("image");
  part->add_shape(18);
  ASSERT_OK(ResolveEnvSpec(&wrong));
  ASSERT_OK_AND_ASSIGN(const EnvCheckReport w, CheckEnv(wrong, Options()));
  EXPECT_THAT(w.violation, HasSubstr("env.observation_parts are (image "
                                     "float32 [18])"));
}

TEST(EnvCheckTest, BuiltinsPass) {
  for (const std::string& id : RegisteredEnvIds()) {
    EnvSpec spec;
    spec.set_id(id);
    ASSERT_OK(ResolveEnvSpec(&spec));
    ASSERT_OK_AND_ASSIGN(const EnvCheckReport r, CheckEnv(spec, Options()));
    EXPECT_EQ(r.violation, "") << id;
    // The built-ins save their state, and it plays on exactly.
    EXPECT_THAT(r.state, HasSubstr("played on as the original for 200 steps"))
        << id;
  }
}

// Where an env saves its state, check-env restores it into a fresh batch
// and steps both: a state that leaves something out is the
// violation; an env without save_state says so and passes.
TEST(EnvCheckTest, ASavedStateMustPlayOnExactly) {
  auto drifter = [](const std::string& save) {
    EnvSpec spec;
    spec.set_id("Drifter-v0");
    spec.set_plugin("envs/testdata/libstate_plugin.so");
    spec.set_observation_size(2);
    spec.set_num_discrete_actions(2);
    (*spec.mutable_kwargs()->mutable_fields())["save"].set_string_value(save);
    EXPECT_OK(ResolveEnvSpec(&spec));
    return spec;
  };
  ASSERT_OK_AND_ASSIGN(EnvCheckReport r, CheckEnv(drifter("whole"), Options()));
  EXPECT_EQ(r.violation, "");
  // Its bytes and the helper's (random streams, counters): it plays on
  // from a batch of another seed too.
  EXPECT_THAT(r.state, HasSubstr(" bytes; restored into a fresh batch, it "
                                 "played on as the original for 200 steps"));
  EXPECT_THAT(r.state, HasSubstr(" with the run's seed or another"));
  EXPECT_THAT(r.state, Not(HasSubstr("no episode ended")));
  EXPECT_THAT(FormatEnvCheckReport(r),
              HasSubstr("\nstate:       " + r.state + "\n"));
  ASSERT_OK_AND_ASSIGN(r, CheckEnv(drifter("partial"), Options()));
  EXPECT_THAT(r.violation,
              HasSubstr("save_state does not save the whole state: the "
                        "state saved after step 200, restored into a fresh "
                        "batch of the same seed, wrote observations "
                        "different"));
  EXPECT_THAT(FormatEnvCheckReport(r),
              HasSubstr("state:       does not play on exactly (the "
                        "violation below)"));
  ASSERT_OK_AND_ASSIGN(r, CheckEnv(drifter("refuse"), Options()));
  EXPECT_THAT(r.violation, HasSubstr("restored into a fresh batch: "
                                     "restore_state failed: "));
  EXPECT_THAT(r.violation, HasSubstr("Drifter-v0 refuses"));
  // The probe saves nothing: it passes, and the report says so.
  ASSERT_OK_AND_ASSIGN(r, CheckEnv(Probe("ok"), Options()));
  EXPECT_EQ(r.violation, "");
  EXPECT_EQ(r.state, "not saved (a resumed run starts new episodes)");
  // A replay in which no episode ends says that no reset was checked.
  EnvCheckOptions few = Options();
  few.steps = 1;
  ASSERT_OK_AND_ASSIGN(r, CheckEnv(drifter("whole"), few));
  EXPECT_EQ(r.violation, "");
  EXPECT_THAT(r.state, HasSubstr("for 1 steps (0 episodes ended in them)"));
  EXPECT_THAT(r.state, HasSubstr("no reset after the restore was checked"));
}

// A device env's randomness comes from the run's seed, not its state
// (rl_device_env.h): its state plays on with the run's seed, and the report
// says that another seed does not.
TEST(EnvCheckTest, ADeviceEnvsStatePlaysOnWithTheRunsSeed) {
  EnvSpec spec;
  spec.set_id("PixelBreakout-v0");
  spec.set_plugin("examples/device_env/libpixel_breakout.so");
  spec.add_observation_shape(2);
  spec.add_observation_shape(36);
  spec.add_observation_shape(36);
  spec.set_observation_dtype("uint8");
  spec.set_num_discrete_actions(3);
  spec.set_reward_low(0);
  spec.set_reward_high(1);
  spec.set_max_episode_steps(100);
  ASSERT_OK(ResolveEnvSpec(&spec));
  EnvCheckOptions options = Options();
  options.steps = 300;
  ASSERT_OK_AND_ASSIGN(const EnvCheckReport r, CheckEnv(spec, options));
  EXPECT_EQ(r.violation, "");
  EXPECT_THAT(r.state, HasSubstr("played on as the original for 200 steps"));
  EXPECT_THAT(r.state, HasSubstr("with the run's seed; with another seed it "
                                 "wrote other "));
  EXPECT_THAT(r.state, HasSubstr("the state carries no random stream, the "
                                 "seed does"));
}

// The examples built with the helper save their state: Chase-v0, and
// Walkers-v0 with its walkers that leave early (which rows are alive).
TEST(EnvCheckTest, TheExamplesStatesPlayOnExactly) {
  EnvSpec chase;
  chase.set_id("Chase-v0");
  chase.set_plugin("examples/plugin_env/libchase_env.so");
  chase.set_observation_size(2);
  chase.set_num_discrete_actions(3);
  chase.set_max_episode_steps(50);
  ASSERT_OK(ResolveEnvSpec(&chase));
  ASSERT_OK_AND_ASSIGN(EnvCheckReport r, CheckEnv(chase, Options()));
  EXPECT_EQ(r.violation, "");
  EXPECT_THAT(r.state, HasSubstr("played on as the original for 200 steps"));
  EnvSpec walkers;
  walkers.set_id("Walkers-v0");
  walkers.set_plugin("examples/multi_agent/libwalkers.so");
  walkers.set_observation_size(8);
  walkers.set_num_discrete_actions(2);
  walkers.set_agents_per_env(3);
  walkers.set_agents_leave(true);
  ASSERT_OK(ResolveEnvSpec(&walkers));
  EnvCheckOptions options = Options();
  options.num_envs = 6;
  ASSERT_OK_AND_ASSIGN(r, CheckEnv(walkers, options));
  EXPECT_EQ(r.violation, "");
  EXPECT_THAT(r.state, HasSubstr("played on as the original for 200 steps"));
}

TEST(EnvCheckTest, ReportsTheFirstViolation) {
  for (const auto& [mode, violation] :
       std::vector<std::pair<std::string, std::string>>{
           {"nan",
            "at step 3: observation element 0 of env row 0 is not "
            "finite"},
           {"oob",
            "at step 3: observation element 0 of env row 0 is 50, "
            "outside the declared bounds [-10, 10]"},
           {"nondet", "reset is not deterministic"},
           {"step_error", "at step 3: step failed: the probe broke"},
           {"big_reward", "disagree"}}) {
    EnvSpec spec = Probe(mode);
    if (mode == "big_reward") {  // the run says rewards lie in [0, 1]
      spec.set_reward_low(0);
      spec.set_reward_high(1);
    }
    ASSERT_OK_AND_ASSIGN(const EnvCheckReport r, CheckEnv(spec, Options()));
    EXPECT_THAT(r.violation, HasSubstr(violation)) << mode;
    EXPECT_THAT(FormatEnvCheckReport(r), HasSubstr("VIOLATION: ")) << mode;
  }
}

// Issue 46: an env that declares no reward range is checked against the
// run file's (the range the actors enforce), and the report shows it.
TEST(EnvCheckTest, TheRunFilesRewardRangeIsChecked) {
  EnvSpec spec = Probe("undeclared_big");
  ASSERT_OK_AND_ASSIGN(EnvCheckReport r, CheckEnv(spec, Options()));
  EXPECT_EQ(r.violation, "");  // no range anywhere: 5 is fine
  spec.set_reward_high(1);
  ASSERT_OK_AND_ASSIGN(r, CheckEnv(spec, Options()));
  EXPECT_THAT(r.violation, HasSubstr("the reward of env row 0 is 5, outside "
                                     "the declared range [-inf, 1]"));
  EXPECT_THAT(FormatEnvCheckReport(r), HasSubstr("[-inf, 1]"));
}

TEST(EnvCheckTest, APluginThatCannotBeCreatedIsAnError) {
  EXPECT_THAT(CheckEnv(Probe("create_error"), Options()).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("the probe refuses")));
}

}  // namespace
}  // namespace rl
