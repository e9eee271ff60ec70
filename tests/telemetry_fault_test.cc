// Telemetry faults with real processes: the service down at an emitter's
// start (points buffered up to the bound, the rest dropped and counted, then
// delivered), killed and restarted (every acknowledged point still there),
// and killed in the middle of an embedded training run (the run goes on and
// succeeds; no learner point lost or stored twice).
#include <signal.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc_util.h"
#include "common/port_file.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"
#include "proto/telemetry.grpc.pb.h"
#include "runspec/run_spec.h"
#include "telemetry/client/grpc_transport.h"
#include "testing/embedded_coordinator.h"
#include "testing/process_fixture.h"
#include "testing/status_matchers.h"
#include "testing/wait_for.h"

namespace rl {
namespace {

using ::testing::Not;

constexpr char kTelemetry[] = "telemetry/telemetry_main";
constexpr char kCoordinator[] = "coordinator/coordinator_main";

class TelemetryFaultTest : public ProcessTest {
 protected:
  // Starts telemetry_main on `port` with the test's store; waits until up.
  void StartTelemetry(int port) {
    const std::string port_file = Path(absl::StrCat("tport", ++starts_));
    telemetry_ =
        Start(kTelemetry,
              {absl::StrCat("--port=", port), "--port_file=" + port_file,
               "--http_port=-1", "--store=" + Path("telemetry.db"),
               "--tensorboard_dir=" + Path("tb")},
              absl::StrCat("telemetry", starts_, ".log"));
    ASSERT_EQ(WaitForPort(*telemetry_, port_file), port);
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

  int starts_ = 0;
  Subprocess* telemetry_ = nullptr;  // the latest; owned by the fixture
  std::unique_ptr<TelemetryService::Stub> stub_;
};

TEST_F(TelemetryFaultTest, DownAtStartThenUpThenKilledLosesNoAckedPoint) {
  ASSERT_OK_AND_ASSIGN(const int port, PickFreePort());
  const std::string target = absl::StrCat("127.0.0.1:", port);

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
  EXPECT_THAT(emitter->Flush(absl::Milliseconds(300)), Not(IsOk()));

  // The service comes up: everything buffered is delivered, and the drop
  // count is stored as a series.
  StartTelemetry(port);
  Connect(target);
  ASSERT_OK(emitter->Flush(absl::Seconds(120)));
  stats = emitter->stats();
  EXPECT_EQ(stats.acked_points, stats.emitted);
  EXPECT_EQ(Count("fault-run", "m"), stats.emitted);
  double dropped = 0;
  EXPECT_GT(Count("fault-run", "telemetry/dropped_points", &dropped), 0);
  EXPECT_EQ(static_cast<int64_t>(dropped), stats.dropped);

  // More points, acknowledged; then the service is SIGKILLed and restarted
  // on the same store: every acknowledged point is there, once.
  for (int i = kPoints; i < kPoints + 3000; ++i) emitter->Emit("m", i, i);
  ASSERT_OK(emitter->Flush(absl::Seconds(120)));
  const int64_t acked = emitter->stats().acked_points;
  EXPECT_EQ(Stop(*telemetry_, SIGKILL), std::optional<int>(128 + SIGKILL));
  // Emitted while it is down: buffered, delivered after the restart.
  for (int i = kPoints + 3000; i < kPoints + 3500; ++i) {
    emitter->Emit("m", i, i);
  }
  StartTelemetry(port);
  EXPECT_EQ(Count("fault-run", "m"), acked);  // before the resend at least
  ASSERT_OK(emitter->Flush(absl::Seconds(120)));
  EXPECT_EQ(Count("fault-run", "m"), acked + 500);
}

// The pid of the telemetry service the coordinator started on the store in
// `runs_dir`, or -1.
pid_t FindTelemetry(const std::string& runs_dir) {
  const std::vector<pid_t> pids =
      FindProcesses({"--store=" + runs_dir + "/telemetry.db"});
  return pids.empty() ? -1 : pids.back();
}

TEST_F(TelemetryFaultTest, TrainingGoesOnWhileTelemetryIsKilled) {
  const std::string port_file = Path("port");
  const std::string tport_file = Path("tport");
  const std::string runs = Path("runs");
  Subprocess& coordinator =
      *Start(kCoordinator,
             {"--port=0", "--port_file=" + port_file,
              "--telemetry_port_file=" + tport_file, "--store=" + Path("c.db"),
              "--runs_dir=" + runs, "--log_dir=" + Path("logs"),
              "--local_workers=learners=1,actors=1"},
             "coordinator.log");
  const int port = WaitForPort(coordinator, port_file);
  const int tport = WaitForPort(coordinator, tport_file);
  ASSERT_GT(port, 0);
  ASSERT_GT(tport, 0);
  UseLocalAdminToken(runs);
  auto runs_stub =
      RunService::NewStub(CreateChannel(absl::StrCat("127.0.0.1:", port)));
  Connect(absl::StrCat("127.0.0.1:", tport));

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
  ASSERT_OK(spec);
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
  ASSERT_TRUE(
      WaitFor([&] { return Count(run_id, "learner/policy_loss") >= 10; },
              absl::Seconds(300), absl::Milliseconds(100)));
  const pid_t telemetry_pid = FindTelemetry(runs);
  ASSERT_GT(telemetry_pid, 0);

  // First it hangs (SIGSTOP: connections open, nothing answers): training
  // goes on, emitters buffer.
  ASSERT_EQ(kill(telemetry_pid, SIGSTOP), 0);
  const int64_t steps_at_stop = get().progress().env_steps();
  rl::Run run;
  WaitFor(
      [&] {
        run = get();
        return run.state() != RUNNING ||
               run.progress().env_steps() >= steps_at_stop + 4 * 256;
      },
      absl::Seconds(300), absl::Milliseconds(50));
  EXPECT_TRUE(run.state() == SUCCEEDED ||
              run.progress().env_steps() >= steps_at_stop + 4 * 256)
      << run.DebugString();
  // Then it dies (SIGKILL); the coordinator restarts it on the same port
  // and store. The run succeeds.
  ASSERT_EQ(kill(telemetry_pid, SIGKILL), 0);
  WaitFor(
      [&] {
        run = get();
        return run.state() == SUCCEEDED || run.state() == FAILED;
      },
      absl::Seconds(480), absl::Milliseconds(100));
  ASSERT_EQ(run.state(), SUCCEEDED) << run.DebugString();
  // The supervisor restarted telemetry on the same port and store; the
  // learner's buffered points were resent: one policy_loss point per
  // update, none lost, none twice (each update trains on 8 x 32 steps).
  const int64_t updates = run.progress().env_steps() / 256;
  WaitFor([&] { return Count(run_id, "learner/policy_loss") == updates; },
          absl::Seconds(120), absl::Milliseconds(200));
  EXPECT_EQ(Count(run_id, "learner/policy_loss"), updates);
  EXPECT_GT(FindTelemetry(runs), 0);
  EXPECT_TRUE(Stop(coordinator).has_value());
}

}  // namespace
}  // namespace rl
