// The fixture of the sweep tests (sweep_manager_test.cc, sweep_pbt_test.cc):
// a real CoordinatorCore and SQLite store, its workers registered and
// reporting by hand (no processes).
#ifndef RL_COORDINATOR_SWEEP_TEST_FIXTURE_H_
#define RL_COORDINATOR_SWEEP_TEST_FIXTURE_H_

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "coordinator/sweep_manager.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace rl {

inline constexpr char kSweep[] = R"(
name: lr
base: {env: {id: CartPole-v1}, total_env_steps: 4000, envs_per_actor: 8,
       segment_length: 32}
method: grid
parameters:
  ppo.learning_rate: {values: [0.001, 0.002, 0.003, 0.004]}
metric: {series: learner/mean_return, goal: max}
concurrency: 4
early_stopping: {kind: asha, first_rung_steps: 1000, reduction_factor: 2,
                 min_trials_at_rung: 2}
)";

// kSweep's 4 trials one at a time.
inline std::string OneAtATime() {
  return absl::StrCat(kSweep, "\nconcurrency: 1\n")
      .replace(std::string(kSweep).find("concurrency: 4"), 14, "max_trials: 9");
}

class SweepManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = MakeTestDir();
    options_.store_path = dir + "/coordinator.db";
    options_.runs_dir = dir + "/runs";
    options_.lease_ttl = absl::Hours(1);
    Start();
  }

  void Start() {
    sweeps_.reset();
    core_.reset();
    auto core = CoordinatorCore::Create(options_);
    ASSERT_OK(core);
    core_ = *std::move(core);
    auto sweeps = SweepManager::Create(core_.get(), core_->store());
    ASSERT_OK(sweeps);
    sweeps_ = *std::move(sweeps);
  }

  absl::StatusOr<Sweep> Submit(const std::string& text,
                               const std::string& base = "") {
    SubmitSweepRequest request;
    request.set_sweep_file(text);
    request.set_sweep_file_name("lr.yaml");
    request.set_base_run_file(base);
    return sweeps_->Submit(request, "alice");
  }

  // Learner and actor pairs 0..n-1, registered once.
  void Workers(int n) {
    for (int i = 0; i < n; ++i) {
      for (const WorkerRole role : {LEARNER, ACTOR}) {
        const std::string name =
            absl::StrCat(role == LEARNER ? "learner-" : "actor-", i);
        RegisterWorkerRequest request;
        request.set_worker_name(name);
        request.mutable_capabilities()->set_role(role);
        if (role == LEARNER) request.set_address("127.0.0.1:5000");
        request.set_worker_key(keys_[name]);  // again after a restart
        auto response = core_->RegisterWorker(request);
        ASSERT_OK(response);
        keys_[name] = response->worker_key();
        epochs_[name] = response->lease().epoch();
      }
    }
  }

  // Run id -> the learner holding it (from the heartbeats).
  std::map<std::string, std::pair<std::string, int64_t>> Learners(int n) {
    std::map<std::string, std::pair<std::string, int64_t>> held;
    for (int i = 0; i < n; ++i) {
      const std::string name = absl::StrCat("learner-", i);
      HeartbeatRequest beat;
      beat.set_worker_id(name);
      beat.set_worker_key(keys_[name]);
      beat.set_lease_epoch(epochs_[name]);
      auto response = core_->Heartbeat(beat);
      EXPECT_OK(response);
      if (response.ok() && !response->assignment().run_id().empty()) {
        held[response->assignment().run_id()] = {
            name, response->assignment().assignment_id()};
        assignments_[response->assignment().run_id()] = response->assignment();
      }
    }
    return held;
  }

  void Report(const std::pair<std::string, int64_t>& learner, int64_t steps,
              double mean_return, int64_t version, bool finished = false) {
    ReportStatusRequest report;
    report.set_worker_id(learner.first);
    report.set_worker_key(keys_[learner.first]);
    report.set_assignment_id(learner.second);
    report.mutable_progress()->set_env_steps(steps);
    report.mutable_progress()->set_mean_return(mean_return);
    report.mutable_progress()->set_policy_version(version);
    report.set_finished(finished);
    ASSERT_OK(core_->ReportStatus(report));
  }

  void Tick() {
    core_->Tick();
    sweeps_->Tick();
  }

  CoordinatorOptions options_;
  std::unique_ptr<CoordinatorCore> core_;
  std::unique_ptr<SweepManager> sweeps_;
  std::map<std::string, std::string> keys_;
  std::map<std::string, int64_t> epochs_;
  // Run id -> its learner's last assignment (from Learners).
  std::map<std::string, Assignment> assignments_;
};

}  // namespace rl

#endif  // RL_COORDINATOR_SWEEP_TEST_FIXTURE_H_
