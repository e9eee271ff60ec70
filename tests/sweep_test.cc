// Sweeps run by the coordinator, through the embedded system's real
// learner and actor processes: examples/sweeps/cartpole_lr.yaml (8 CartPole
// learning rates, ASHA) ends with a best trial that solved CartPole and
// losers cancelled at their rung with the reason; a coordinator SIGKILLed
// mid-sweep and started again loses nothing and submits nothing twice; a
// bad sweep file is refused naming the field; cancelling a sweep cancels
// its trials; population-based training's rounds, each member's next
// round a run that starts from the round before's checkpoint.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/grpc_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"
#include "testing/embedded_coordinator.h"
#include "testing/wait_for.h"

namespace rl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool IsFinal(RunState s) {
  return s == SUCCEEDED || s == FAILED || s == CANCELLED;
}

class SweepTest : public EmbeddedCoordinatorTest {
 protected:
  // A sweep file's text named `name`, its base run file's text sent with
  // it (as rlctl does; examples/cartpole.yaml unless given).
  grpc::Status SubmitSweep(const std::string& text, const std::string& key,
                           Sweep* sweep,
                           const std::string& name = "cartpole_lr.yaml",
                           const std::string& base = "") {
    SubmitSweepRequest request;
    request.set_sweep_file(text);
    request.set_sweep_file_name(name);
    request.set_base_run_file(base.empty() ? Read("examples/cartpole.yaml")
                                           : base);
    request.set_idempotency_key(key);
    auto context = ContextWithDeadline(absl::Seconds(30));
    return stub_->SubmitSweep(context.get(), request, sweep);
  }

  Sweep GetSweep(const std::string& id) {
    GetSweepRequest request;
    request.set_sweep_id(id);
    Sweep sweep;
    auto context = ContextWithDeadline(absl::Seconds(10));
    stub_->GetSweep(context.get(), request, &sweep);  // not there yet: empty
    return sweep;
  }

  int Runs() {
    ListRunsRequest request;
    request.set_page_size(1000);
    ListRunsResponse response;
    auto context = ContextWithDeadline(absl::Seconds(10));
    stub_->ListRuns(context.get(), request, &response);
    return response.runs_size();
  }
};

TEST_F(SweepTest, AshaSweepSurvivesARestartAndCancelCancelsTrials) {
  StartCoordinator("learners=2,actors=2", {"--lease_ttl_s=3"});
  const std::string example = Read("examples/sweeps/cartpole_lr.yaml");
  ASSERT_THAT(example, HasSubstr("ppo.learning_rate"));

  // A bad sweep file: refused, naming the field.
  std::string typo = example;
  typo.replace(typo.find("ppo.learning_rate"), 17, "ppo.learnin_rate");
  Sweep refused;
  const grpc::Status bad = SubmitSweep(typo, "", &refused);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(bad.error_message(),
              AllOf(HasSubstr("cartpole_lr.yaml: "),
                    HasSubstr("parameters.ppo.learnin_rate: no such run-file "
                              "field")));

  Sweep sweep;
  ASSERT_TRUE(SubmitSweep(example, "lr", &sweep).ok());
  ASSERT_EQ(sweep.trials_size(), 8);
  const std::string id = sweep.sweep_id();
  // Mid-sweep (two trials started, one with progress), the coordinator is
  // killed and started again on the same store.
  ASSERT_TRUE(WaitFor(
      [&] {
        const Sweep s = GetSweep(id);
        return s.trials_size() == 8 && s.trials(0).env_steps() > 5000;
      },
      absl::Seconds(300), absl::Milliseconds(200)));
  const Sweep before = GetSweep(id);
  StopCoordinator(SIGKILL);
  StartCoordinator("learners=2,actors=2", {"--lease_ttl_s=3"});
  const Sweep after = GetSweep(id);
  ASSERT_EQ(after.trials_size(), 8);
  EXPECT_EQ(after.state(), RUNNING);
  for (int k = 0; k < 8; ++k) {
    if (!before.trials(k).run_id().empty()) {
      EXPECT_EQ(after.trials(k).run_id(), before.trials(k).run_id()) << k;
    }
  }
  // Submitting the same file with the same key gives the same sweep.
  Sweep again;
  ASSERT_TRUE(SubmitSweep(example, "lr", &again).ok());
  EXPECT_EQ(again.sweep_id(), id);

  ASSERT_TRUE(WaitFor([&] { return IsFinal(GetSweep(id).state()); },
                      absl::Seconds(1500), absl::Milliseconds(500)))
      << "sweep not ended";
  const Sweep done = GetSweep(id);
  ASSERT_EQ(done.state(), SUCCEEDED) << done.reason();
  // Every trial ran once: one run each, no duplicates after the restart.
  std::set<std::string> runs;
  int stopped = 0;
  for (const Trial& trial : done.trials()) {
    ASSERT_FALSE(trial.run_id().empty()) << trial.index();
    runs.insert(trial.run_id());
    const rl::Run run = Get(trial.run_id());
    EXPECT_EQ(run.state(), trial.state()) << trial.index();
    if (absl::StrContains(trial.reason(), "stopped early at rung")) {
      ++stopped;
      EXPECT_EQ(run.state(), CANCELLED);
      EXPECT_THAT(run.failure_reason(), HasSubstr("stopped early at rung"));
    }
  }
  EXPECT_EQ(runs.size(), 8u);
  EXPECT_EQ(Runs(), 8);
  EXPECT_GE(stopped, 1) << "ASHA stopped no loser";
  // The best trial solved CartPole (the base's target_return, 475).
  const rl::Run best = Get(done.best_run_id());
  EXPECT_EQ(best.state(), SUCCEEDED);
  EXPECT_GE(best.progress().mean_return(), 475);
  EXPECT_GT(best.progress().target_reached_at_steps(), 0);

  // Cancelling a sweep cancels its trials.
  Sweep second;
  ASSERT_TRUE(SubmitSweep(example, "second", &second).ok());
  ASSERT_TRUE(WaitFor(
      [&] {
        const Sweep s = GetSweep(second.sweep_id());
        return s.trials_size() > 0 && s.trials(0).state() == RUNNING;
      },
      absl::Seconds(120), absl::Milliseconds(200)));
  CancelSweepRequest cancel;
  cancel.set_sweep_id(second.sweep_id());
  Sweep cancelled;
  auto context = ContextWithDeadline(absl::Seconds(10));
  ASSERT_TRUE(stub_->CancelSweep(context.get(), cancel, &cancelled).ok());
  EXPECT_EQ(cancelled.state(), CANCELLED);
  for (const Trial& trial : cancelled.trials()) {
    EXPECT_EQ(trial.state(), CANCELLED) << trial.index();
    if (trial.run_id().empty()) continue;
    const rl::Run run = Get(trial.run_id());
    EXPECT_EQ(run.state(), CANCELLED);
    EXPECT_THAT(run.failure_reason(),
                HasSubstr(absl::StrCat("its sweep ", second.sweep_id(),
                                       " was cancelled")));
  }
  EXPECT_EQ(StopCoordinator(SIGTERM), std::optional<int>(0));
}

// Population-based training through the service (issue 50):
// examples/sweeps/cartpole_pbt.yaml on a 50k-step budget, two rounds of
// 25k. Every member's first round stops at 25k env steps; its second is a
// new run that the learner starts from the newest checkpoint of a first
// round's run (its own, or the better member's it copied, as its lineage
// says) and trains to the budget.
TEST_F(SweepTest, PbtRoundsGoOnFromTheRoundBeforesCheckpoints) {
  StartCoordinator("learners=2,actors=2");
  const std::string example = Read("examples/sweeps/cartpole_pbt.yaml");
  ASSERT_THAT(example, HasSubstr("method: pbt"));
  std::string base = Read("examples/cartpole.yaml");
  base.replace(base.find("total_env_steps: 200000"), 23,
               "total_env_steps: 50000");
  Sweep sweep;
  const grpc::Status submitted =
      SubmitSweep(example, "", &sweep, "cartpole_pbt.yaml", base);
  ASSERT_TRUE(submitted.ok()) << submitted.error_message();
  ASSERT_EQ(sweep.trials_size(), 4);
  const std::string id = sweep.sweep_id();
  ASSERT_TRUE(WaitFor([&] { return IsFinal(GetSweep(id).state()); },
                      absl::Seconds(1200), absl::Milliseconds(500)))
      << "sweep not ended";
  const Sweep done = GetSweep(id);
  ASSERT_EQ(done.state(), SUCCEEDED) << done.reason();
  EXPECT_EQ(done.pbt_round(), 1);
  std::string logs;
  for (const auto& entry : std::filesystem::directory_iterator(Path("logs"))) {
    logs += Read(entry.path().string());
  }
  std::set<std::string> first_round;
  for (const Trial& trial : done.trials()) {
    ASSERT_GE(trial.round_run_ids_size(), 1) << trial.index();
    first_round.insert(trial.round_run_ids(0));
  }
  int second_rounds = 0;
  for (const Trial& trial : done.trials()) {
    const rl::Run first = Get(trial.round_run_ids(0));
    EXPECT_EQ(first.state(), SUCCEEDED) << trial.index();
    EXPECT_EQ(first.stop_env_steps(), 25000);
    if (trial.round_run_ids_size() == 1) {
      // Solved CartPole in its first round: done early.
      EXPECT_GT(first.progress().target_reached_at_steps(), 0) << trial.index();
      continue;
    }
    ++second_rounds;
    ASSERT_EQ(trial.round_run_ids_size(), 2) << trial.index();
    EXPECT_GE(first.progress().env_steps(), 25000) << trial.index();
    EXPECT_LT(first.progress().env_steps(), 25000 + 256) << trial.index();
    const rl::Run second = Get(trial.round_run_ids(1));
    EXPECT_EQ(second.state(), SUCCEEDED) << trial.index();
    EXPECT_EQ(second.stop_env_steps(), 0);
    ASSERT_EQ(first_round.count(second.start_from_run()), 1u)
        << trial.index() << ": " << second.start_from_run();
    if (trial.lineage_size() == 0) {
      EXPECT_EQ(second.start_from_run(), first.run_id()) << trial.index();
    } else {
      EXPECT_THAT(trial.lineage(0), HasSubstr("copied trial"));
      EXPECT_NE(second.start_from_run(), first.run_id()) << trial.index();
    }
    // Its learner started from that run's checkpoint.
    EXPECT_THAT(logs, HasSubstr(absl::StrCat("started from ", Path("runs"), "/",
                                             second.start_from_run(),
                                             "/checkpoints/ckpt-")))
        << trial.index();
    if (second.progress().target_reached_at_steps() == 0) {
      EXPECT_GE(second.progress().env_steps(), 50000) << trial.index();
    }
  }
  EXPECT_GE(second_rounds, 1);
  EXPECT_EQ(Runs(), 4 + second_rounds);
  EXPECT_EQ(StopCoordinator(SIGTERM), std::optional<int>(0));
}

}  // namespace
}  // namespace rl
