// Telemetry faults with real processes: the service down at an emitter's
// start (points buffered up to the bound, the rest dropped and counted, then
// delivered), killed and restarted (every acknowledged point still there),
// and killed in the middle of an embedded training run (the run goes on and
// succeeds; no learner point lost or stored twice).
#include <dirent.h>
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/grpc_util.h"
#include "common/port_file.h"
#include "common/run_spec.h"
#include "common/subprocess.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"
#include "proto/telemetry.grpc.pb.h"
#include "telemetry/grpc_transport.h"

namespace rl {
namespace {

namespace fs = std::filesystem;

constexpr char kTelemetry[] = "telemetry/telemetry_main";
constexpr char kCoordinator[] = "coordinator/coordinator_main";

class TelemetryFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(std::getenv("TEST_TMPDIR")) /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }

  // Starts telemetry_main on `port` with the test's store; waits until up.
  void StartTelemetry(int port) {
    const std::string port_file =
        (dir_ / absl::StrCat("tport", ++starts_)).string();
    telemetry_ = std::make_unique<Subprocess>(
        std::vector<std::string>{kTelemetry, absl::StrCat("--port=", port),
                                 "--port_file=" + port_file, "--http_port=-1",
                                 "--store=" + (dir_ / "telemetry.db").string(),
                                 "--tensorboard_dir=" + (dir_ / "tb").string()},
        (dir_ / absl::StrCat("telemetry", starts_, ".log")).string());
    ASSERT_TRUE(WaitForFile(port_file, absl::Seconds(60)).has_value())
        << telemetry_->Log();
  }

  void Connect(const std::string& target) {
    stub_ = TelemetryService::NewStub(CreateChannel(target));
  }

  // Points of `name` in `run` (-1 if the query fails).
  int64_t Count(const std::string& run, const std::string& name,
                double* last_value = nullptr) {
    QueryRequest q;
    q.set_run_id(run);
    q.add_names(name);
    QueryResponse r;
    auto context = ContextWithDeadline(absl::Seconds(10));
    if (!stub_->Query(context.get(), q, &r).ok()) return -1;
    int64_t n = 0;
    for (const Series& s : r.series()) {
      n += s.points_size();
      if (last_value && s.points_size() > 0) {
        *last_value = s.points(s.points_size() - 1).value();
      }
    }
    return n;
  }

  fs::path dir_;
  int starts_ = 0;
  std::unique_ptr<Subprocess> telemetry_;
  std::unique_ptr<TelemetryService::Stub> stub_;
};

TEST_F(TelemetryFaultTest, DownAtStartThenUpThenKilledLosesNoAckedPoint) {
  absl::StatusOr<int> port = PickFreePort();
  ASSERT_TRUE(port.ok());
  const std::string target = absl::StrCat("127.0.0.1:", *port);

  // Nothing listens yet: Emit never blocks; beyond the bound, points drop.
  EmitterOptions options;
  options.source = "fault-test";
  options.queue_capacity = 1024;
  options.max_unacked_points = 2048;
  options.batch_max_points = 256;
  options.max_backoff = absl::Milliseconds(300);
  auto emitter = MakeEmitter(target, options);
  emitter->SetRun("fault-run");
  constexpr int kPoints = 20000;
  for (int i = 0; i < kPoints; ++i) emitter->Emit("m", i, i);
  EmitterStats stats = emitter->stats();
  EXPECT_EQ(stats.emitted + stats.dropped, kPoints);
  EXPECT_GT(stats.dropped, 0);
  EXPECT_LE(stats.emitted, 1024 + 2048 + 256);
  EXPECT_FALSE(emitter->Flush(absl::Milliseconds(300)).ok());

  // The service comes up: everything buffered is delivered, and the drop
  // count is stored as a series.
  StartTelemetry(*port);
  Connect(target);
  ASSERT_TRUE(emitter->Flush(absl::Seconds(60)).ok());
  stats = emitter->stats();
  EXPECT_EQ(stats.acked_points, stats.emitted);
  EXPECT_EQ(Count("fault-run", "m"), stats.emitted);
  double dropped = 0;
  EXPECT_GT(Count("fault-run", "telemetry/dropped_points", &dropped), 0);
  EXPECT_EQ(static_cast<int64_t>(dropped), stats.dropped);

  // More points, acknowledged; then the service is SIGKILLed and restarted
  // on the same store: every acknowledged point is there, once.
  for (int i = kPoints; i < kPoints + 3000; ++i) emitter->Emit("m", i, i);
  ASSERT_TRUE(emitter->Flush(absl::Seconds(60)).ok());
  const int64_t acked = emitter->stats().acked_points;
  telemetry_->Signal(SIGKILL);
  telemetry_->Wait(absl::Seconds(10));
  // Emitted while it is down: buffered, delivered after the restart.
  for (int i = kPoints + 3000; i < kPoints + 3500; ++i) {
    emitter->Emit("m", i, i);
  }
  StartTelemetry(*port);
  EXPECT_EQ(Count("fault-run", "m"), acked);  // before the resend at least
  ASSERT_TRUE(emitter->Flush(absl::Seconds(60)).ok());
  EXPECT_EQ(Count("fault-run", "m"), acked + 500);
}

// Finds the pid of the process whose command line contains `needle`.
int FindProcess(const std::string& needle) {
  DIR* proc = opendir("/proc");
  int found = -1;
  while (dirent* e = readdir(proc)) {
    const int pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::ifstream in(absl::StrCat("/proc/", pid, "/cmdline"));
    std::stringstream ss;
    ss << in.rdbuf();
    if (absl::StrContains(ss.str(), needle)) found = pid;
  }
  closedir(proc);
  return found;
}

TEST_F(TelemetryFaultTest, TrainingGoesOnWhileTelemetryIsKilled) {
  const std::string port_file = (dir_ / "port").string();
  const std::string tport_file = (dir_ / "tport").string();
  const std::string runs = (dir_ / "runs").string();
  Subprocess coordinator(
      {kCoordinator, "--port=0", "--port_file=" + port_file,
       "--telemetry_port_file=" + tport_file,
       "--store=" + (dir_ / "c.db").string(), "--runs_dir=" + runs,
       "--log_dir=" + (dir_ / "logs").string(),
       "--local_workers=learners=1,actors=1"},
      (dir_ / "coordinator.log").string());
  auto port = WaitForFile(port_file, absl::Seconds(60));
  auto tport = WaitForFile(tport_file, absl::Seconds(60));
  ASSERT_TRUE(port.has_value() && tport.has_value()) << coordinator.Log();
  auto runs_stub = RunService::NewStub(
      CreateChannel(absl::StrCat("127.0.0.1:", std::atoi(port->c_str()))));
  Connect(absl::StrCat("127.0.0.1:", std::atoi(tport->c_str())));

  auto spec = ParseRunSpec(R"(
name: cartpole-telemetry-fault
env: {id: CartPole-v1}
envs_per_actor: 8
segment_length: 32
total_env_steps: 300000
target_return: 475
ppo: {learning_rate: 1.0e-3, gamma: 0.98, gae_lambda: 0.8, num_epochs: 20,
      num_minibatches: 1, clip_value_loss: false, entropy_coef: 0.0}
resources: {num_actors: 1}
)",
                           RunFileFormat::kYaml);
  ASSERT_TRUE(spec.ok()) << spec.status();
  SubmitRunRequest submit;
  *submit.mutable_spec() = *spec;
  SubmitRunResponse submitted;
  {
    auto context = ContextWithDeadline(absl::Seconds(10));
    ASSERT_TRUE(runs_stub->SubmitRun(context.get(), submit, &submitted).ok());
  }
  const std::string run_id = submitted.run().run_id();
  auto get = [&]() {
    GetRunRequest request;
    request.set_run_id(run_id);
    rl::Run run;
    auto context = ContextWithDeadline(absl::Seconds(10));
    runs_stub->GetRun(context.get(), request, &run);
    return run;
  };

  // Learner metrics arrive; then the telemetry process is SIGKILLed.
  absl::Time deadline = absl::Now() + absl::Seconds(120);
  while (absl::Now() < deadline && Count(run_id, "learner/policy_loss") < 10) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_GE(Count(run_id, "learner/policy_loss"), 10) << coordinator.Log();
  const int telemetry_pid = FindProcess(runs + "/telemetry.db");
  ASSERT_GT(telemetry_pid, 0);

  // First it hangs (SIGSTOP: connections open, nothing answers): training
  // goes on, emitters buffer.
  ASSERT_EQ(kill(telemetry_pid, SIGSTOP), 0);
  const int64_t steps_at_stop = get().progress().env_steps();
  deadline = absl::Now() + absl::Seconds(120);
  rl::Run run = get();
  while (absl::Now() < deadline && run.state() == RUNNING &&
         run.progress().env_steps() < steps_at_stop + 4 * 256) {
    absl::SleepFor(absl::Milliseconds(50));
    run = get();
  }
  EXPECT_TRUE(run.state() == SUCCEEDED ||
              run.progress().env_steps() >= steps_at_stop + 4 * 256)
      << run.DebugString();
  // Then it dies (SIGKILL); the coordinator restarts it on the same port
  // and store. The run succeeds.
  ASSERT_EQ(kill(telemetry_pid, SIGKILL), 0);
  deadline = absl::Now() + absl::Seconds(240);
  while (absl::Now() < deadline && run.state() != SUCCEEDED &&
         run.state() != FAILED) {
    absl::SleepFor(absl::Milliseconds(100));
    run = get();
  }
  ASSERT_EQ(run.state(), SUCCEEDED) << run.DebugString();
  // The supervisor restarted telemetry on the same port and store; the
  // learner's buffered points were resent: one policy_loss point per
  // update, none lost, none twice (each update trains on 8 x 32 steps).
  const int64_t updates = run.progress().env_steps() / 256;
  deadline = absl::Now() + absl::Seconds(60);
  while (absl::Now() < deadline &&
         Count(run_id, "learner/policy_loss") != updates) {
    absl::SleepFor(absl::Milliseconds(200));
  }
  EXPECT_EQ(Count(run_id, "learner/policy_loss"), updates);
  EXPECT_GT(FindProcess(runs + "/telemetry.db"), 0);
  coordinator.Signal(SIGTERM);
  EXPECT_TRUE(coordinator.Wait(absl::Seconds(30)).has_value());
}

}  // namespace
}  // namespace rl
