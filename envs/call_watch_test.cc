#include "envs/call_watch.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "envs/env_plugin.h"
#include "envs/env_registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

TEST(CallWatchTest, ACallThatOverrunsItsDeadlineEndsOnceNamingTheCall) {
  CallWatch watch(/*exit_process=*/false);
  absl::Mutex mu;
  std::vector<std::string> reasons;
  watch.SetEndHandler([&](const std::string& reason) {
    absl::MutexLock lock(&mu);
    reasons.push_back(reason);
  });
  CallWatch::Slot* slot = watch.Register("environment plugin /x/libslow.so");
  {
    // Within its deadline: nothing happens.
    CallWatch::Scope call(slot, "reset", absl::Seconds(30));
    absl::SleepFor(absl::Milliseconds(250));
  }
  {
    CallWatch::Scope call(slot, "step", absl::Milliseconds(200));
    // A hung call, until the watch has ended it (a deadline, not a sleep).
    const absl::Time give_up = absl::Now() + absl::Seconds(30);
    while (watch.overruns() == 0 && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(20));
    }
    absl::SleepFor(absl::Milliseconds(300));  // no second report
  }
  watch.Unregister(slot);
  absl::MutexLock lock(&mu);
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_EQ(watch.overruns(), 1);
  EXPECT_THAT(reasons[0],
              HasSubstr("environment call step of environment plugin "
                        "/x/libslow.so did not return within 0.2 s "
                        "(env.call_timeout_s)"));
}

TEST(CallWatchTest, NoSlotWatchesNothing) {
  CallWatch::Scope call(nullptr, "step", absl::ZeroDuration());
  EXPECT_EQ(DescribeTimeout(absl::Seconds(120)), "120 s");
  EXPECT_EQ(DescribeTimeout(absl::Milliseconds(1500)), "1.5 s");
}

constexpr char kProbe[] = "envs/testdata/libtest_plugin.so";

EnvSpec Probe(const std::string& mode, float timeout_s) {
  EnvSpec spec;
  spec.set_id("Probe-v0");
  spec.set_plugin(kProbe);
  spec.set_observation_size(3);
  spec.set_num_discrete_actions(2);
  spec.set_call_timeout_s(timeout_s);
  (*spec.mutable_kwargs()->mutable_fields())["mode"].set_string_value(mode);
  (*spec.mutable_kwargs()->mutable_fields())["fail_at"].set_number_value(2);
  EXPECT_OK(ResolveEnvSpec(&spec));
  return spec;
}

// Steps `spec`'s plugin until it fails; returns its error.
void StepUntilItFails(const EnvSpec& spec) {
  EnvOpenOptions options;
  options.num_envs = 2;
  auto env = OpenEnv(spec, options);
  if (!env.ok()) return;
  std::vector<float> obs(2 * 3), final_obs(2 * 3), rewards(2), returns(2);
  std::vector<uint8_t> terminated(2), truncated(2);
  std::vector<int32_t> lengths(2);
  std::vector<int64_t> actions(2, 1);
  StepOutputs out;
  out.observations = obs.data();
  out.final_observations = final_obs.data();
  out.rewards = rewards.data();
  out.terminated = terminated.data();
  out.truncated = truncated.data();
  out.episode_returns = returns.data();
  out.episode_lengths = lengths.data();
  if (!(*env)->Reset(obs.data()).ok()) return;
  for (int t = 0; t < 10; ++t) {
    if (!(*env)->StepDiscrete(actions.data(), out).ok()) return;
  }
}

// Issue 46 item 2: a plugin whose step never returns ends the process with
// kEnvHungExitCode after its deadline, naming the call, the plugin and the
// run file's field; the end handler ran first.
TEST(CallWatchDeathTest, AHungPluginStepEndsTheProcessNamingTheCall) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        CallWatch::Process().SetEndHandler(
            [](const std::string&) { fprintf(stderr, "end handler ran\n"); });
        CallWatch::Process().EnableEnd();
        StepUntilItFails(Probe("hang", 0.5f));
        fprintf(stderr, "the hung step returned\n");
        _exit(0);
      },
      ::testing::ExitedWithCode(kEnvHungExitCode),
      "environment call step of environment plugin "
      ".*libtest_plugin.so \\(env Probe-v0\\) did not return within 0.5 "
      "s(.|\n)*end handler ran");
}

// A plugin's save_state and restore_state are watched as its step is: a
// checkpoint (or a resume) that hangs in a plugin ends the process naming
// the call, not a run that stops without a word.
void SaveAndRestoreDrifter(const std::string& save) {
  EnvSpec spec;
  spec.set_id("Drifter-v0");
  spec.set_plugin("envs/testdata/libstate_plugin.so");
  spec.set_observation_size(2);
  spec.set_num_discrete_actions(2);
  spec.set_call_timeout_s(0.5f);
  (*spec.mutable_kwargs()->mutable_fields())["save"].set_string_value(save);
  if (!ResolveEnvSpec(&spec).ok()) return;
  EnvOpenOptions options;
  options.num_envs = 2;
  auto env = OpenEnv(spec, options);
  if (!env.ok()) return;
  std::vector<float> obs(2 * 2);
  if (!(*env)->Reset(obs.data()).ok()) return;
  const std::string bytes = (*env)->SaveState();
  fprintf(stderr, "saved %zu bytes\n", bytes.size());
  (void)(*env)->RestoreState(bytes);
}

TEST(CallWatchDeathTest, AHungSaveOrRestoreEndsTheProcessNamingTheCall) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (const char* call : {"save_state", "restore_state"}) {
    EXPECT_EXIT(
        {
          CallWatch::Process().EnableEnd();
          SaveAndRestoreDrifter(
              std::string(call) == "save_state" ? "hang_save" : "hang_restore");
          fprintf(stderr, "the hung call returned\n");
          _exit(0);
        },
        ::testing::ExitedWithCode(kEnvHungExitCode),
        absl::StrCat("environment call ", call,
                     " of environment plugin .*libstate_plugin.so \\(env "
                     "Drifter-v0\\) did not return within 0.5 s"));
  }
}

// Issue 46 item 6: a plugin that crashes the process inside a call ends it
// with 128 + the signal, naming the signal and the plugin, after the end
// handler (a worker's report of the run's failure) ran.
TEST(CallWatchDeathTest, APluginCrashEndsTheProcessNamingSignalAndPlugin) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        CallWatch::Process().SetEndHandler(
            [](const std::string&) { fprintf(stderr, "end handler ran\n"); });
        CallWatch::Process().EnableEnd();
        CallWatch::Process().CatchCrashes();
        StepUntilItFails(Probe("crash", 30));
        _exit(0);
      },
      ::testing::ExitedWithCode(128 + SIGABRT),
      "environment call step of environment plugin .*libtest_plugin.so "
      "\\(env Probe-v0\\) crashed the process \\(SIGABRT\\)(.|\n)*end "
      "handler ran");
}

}  // namespace
}  // namespace rl
