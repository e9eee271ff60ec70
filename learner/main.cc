// learner: serves LearnerService for one run: actors stream rollouts in,
// policies stream out; PPO updates in between.
//
//   learner --run=examples/cartpole.yaml --port=0 --run_dir=runs/cartpole
// prints "learner listening on HOST:PORT" (and writes PORT to --port_file).
#include <torch/torch.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/grpc_util.h"
#include "common/logging.h"
#include "common/port_file.h"
#include "common/run_spec.h"
#include "common/status.h"
#include "coordinator/worker_agent.h"
#include "learner/learner_core.h"
#include "learner/learner_service.h"
#include "telemetry/process_telemetry.h"

ABSL_FLAG(std::string, run, "", "Run file (YAML or JSON).");
ABSL_FLAG(std::string, host, "127.0.0.1", "Address to listen on.");
ABSL_FLAG(int, port, 0, "Port; 0 picks a free one.");
ABSL_FLAG(std::string, port_file, "", "Write the bound port here.");
ABSL_FLAG(std::string, run_dir, "",
          "Checkpoints go to <run_dir>/checkpoints; resumes from the newest.");
ABSL_FLAG(std::string, run_id, "", "Run id (default: the run's name).");
ABSL_FLAG(std::string, result_file, "",
          "At the end, write a JSON summary of the run here.");
ABSL_FLAG(int, torch_threads, 1, "LibTorch intra-op threads.");
ABSL_FLAG(std::string, coordinator, "",
          "Worker mode: register with this coordinator (host:port) and train "
          "the runs it assigns (no --run needed).");
ABSL_FLAG(std::string, worker_name, "",
          "Worker mode: stable name (default learner-<host>-<port>).");
ABSL_FLAG(int, max_message_mb, 256,
          "Largest rollout segment accepted, in MiB.");

namespace {

volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

// The process's telemetry, and the core it reports on (Prometheus reads the
// current one's status at every scrape).
std::unique_ptr<rl::ProcessTelemetry> g_telemetry;
absl::Mutex g_core_mu;
std::shared_ptr<rl::LearnerCore> g_core ABSL_GUARDED_BY(g_core_mu);

void SetCurrentCore(std::shared_ptr<rl::LearnerCore> core) {
  absl::MutexLock lock(&g_core_mu);
  g_core = std::move(core);
}

void RegisterLearnerMetrics(rl::MetricsRegistry* registry) {
  auto family = [registry](const std::string& name, const std::string& help,
                           const std::string& type,
                           std::function<double(const rl::LearnerStatus&)> f) {
    registry->AddCallback(name, help, type, [f]() {
      std::shared_ptr<rl::LearnerCore> core;
      {
        absl::MutexLock lock(&g_core_mu);
        core = g_core;
      }
      if (core == nullptr) return rl::MetricSamples{};
      return rl::MetricSamples{
          {{{"run", core->run_id()}}, f(core->GetStatus())}};
    });
  };
  using S = rl::LearnerStatus;
  family("learner_env_steps_total", "Environment steps trained on.", "counter",
         [](const S& s) { return double(s.env_steps()); });
  family("learner_updates_total", "PPO updates.", "counter",
         [](const S& s) { return double(s.updates()); });
  family("learner_policy_version", "Current policy version.", "gauge",
         [](const S& s) { return double(s.policy_version()); });
  family("learner_steps_per_second", "Training throughput.", "gauge",
         [](const S& s) { return s.progress().steps_per_second(); });
  family("learner_connected_actors", "Actors streaming rollouts.", "gauge",
         [](const S& s) { return double(s.connected_actors()); });
  family("learner_segments_received_total", "Rollout segments received.",
         "counter", [](const S& s) { return double(s.segments_received()); });
  family("learner_segments_rejected_total", "Malformed segments refused.",
         "counter", [](const S& s) { return double(s.segments_rejected()); });
  family("learner_segments_dropped_stale_total",
         "Segments dropped for policy lag.", "counter",
         [](const S& s) { return double(s.segments_dropped_stale()); });
}

bool WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << text;
    if (!out) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

std::string ResultJson(const rl::LearnerStatus& s, bool done) {
  const double mean = s.progress().mean_return();
  return absl::StrFormat(
      "{\"done\": %s, \"env_steps\": %d, \"updates\": %d, "
      "\"policy_version\": %d, \"episodes\": %d, \"mean_return\": %s, "
      "\"steps_per_second\": %.1f, \"segments_received\": %d, "
      "\"segments_rejected\": %d, \"segments_dropped_stale\": %d, "
      "\"segments_duplicate\": %d}\n",
      done ? "true" : "false", s.env_steps(), s.updates(), s.policy_version(),
      s.progress().episodes(),
      std::isfinite(mean) ? absl::StrFormat("%.3f", mean) : "null",
      s.progress().steps_per_second(), s.segments_received(),
      s.segments_rejected(), s.segments_dropped_stale(),
      s.segments_duplicate());
}

absl::StatusOr<rl::RunningServer> Serve(rl::LearnerServiceImpl* service) {
  rl::ServerOptions server_options;
  server_options.address =
      absl::StrCat(absl::GetFlag(FLAGS_host), ":", absl::GetFlag(FLAGS_port));
  // Rollout segments are large; other messages are small anyway.
  server_options.max_receive_message_bytes = absl::GetFlag(FLAGS_max_message_mb)
                                             << 20;
  server_options.max_send_message_bytes = 256 << 20;
  auto server = rl::StartServer({service}, server_options);
  if (!server.ok()) return server;
  std::printf("learner listening on %s:%d\n", absl::GetFlag(FLAGS_host).c_str(),
              server->port);
  std::fflush(stdout);
  RETURN_IF_ERROR(
      rl::WritePortFile(absl::GetFlag(FLAGS_port_file), server->port));
  return server;
}

// Worker mode: one LearnerCore per assignment from the coordinator; progress
// reported every second, the end of the run once.
int RunWorker() {
  rl::LearnerServiceImpl service;
  auto server = Serve(&service);
  if (!server.ok()) {
    std::fprintf(stderr, "error: %s\n",
                 std::string(server.status().message()).c_str());
    return 1;
  }
  absl::Mutex mu;
  std::shared_ptr<rl::LearnerCore> current;
  bool reported_end = false;
  rl::WorkerAgentOptions options;
  options.coordinator = absl::GetFlag(FLAGS_coordinator);
  options.role = rl::LEARNER;
  options.address = absl::StrCat(absl::GetFlag(FLAGS_host), ":", server->port);
  options.worker_name = absl::GetFlag(FLAGS_worker_name).empty()
                            ? absl::StrCat("learner-", options.address)
                            : absl::GetFlag(FLAGS_worker_name);
  std::string assignment_error;
  rl::WorkerAgent agent(options, [&](const rl::Assignment& assignment) {
    std::shared_ptr<rl::LearnerCore> core;
    std::string error;
    if (!assignment.run_id().empty()) {
      RL_LOG_INFO("assigned run {} (assignment {})", assignment.run_id(),
                  assignment.assignment_id());
      rl::LearnerOptions learner;
      learner.spec = assignment.spec();
      learner.run_id = assignment.run_id();
      learner.run_dir = assignment.checkpoint_dir();
      learner.emitter = g_telemetry->emitter();
      g_telemetry->emitter()->SetRun(assignment.run_id());
      auto created = rl::LearnerCore::Create(learner);
      if (created.ok()) {
        core = std::move(*created);
      } else {
        error = std::string(created.status().message());
      }
    } else {
      RL_LOG_INFO("assignment ended; idle");
    }
    service.SetCore(core);
    SetCurrentCore(core);
    absl::MutexLock lock(&mu);
    current = core;
    reported_end = false;
    assignment_error = error;
  });
  agent.Start();
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  while (!g_stop) {
    absl::SleepFor(absl::Seconds(1));
    std::shared_ptr<rl::LearnerCore> core;
    std::string error;
    bool reported;
    {
      absl::MutexLock lock(&mu);
      core = current;
      error = assignment_error;
      reported = reported_end;
    }
    if (!error.empty() && !reported) {
      agent.Report(rl::RunProgress(), true, error).IgnoreError();
      absl::MutexLock lock(&mu);
      reported_end = true;
      continue;
    }
    if (core == nullptr || reported) continue;
    const bool done = core->WaitUntilDone(absl::ZeroDuration());
    const absl::Status final_status = core->final_status();
    agent
        .Report(core->GetStatus().progress(), done,
                final_status.ok() ? "" : std::string(final_status.message()))
        .IgnoreError();
    if (done) {
      absl::MutexLock lock(&mu);
      reported_end = true;
    }
  }
  agent.Stop();
  server->server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  rl::InitLogging("learner");
  torch::set_num_threads(std::max(1, absl::GetFlag(FLAGS_torch_threads)));
  {
    const std::string source = absl::GetFlag(FLAGS_worker_name).empty()
                                   ? absl::StrCat("learner/", getpid())
                                   : absl::GetFlag(FLAGS_worker_name);
    auto telemetry =
        rl::ProcessTelemetry::StartFromFlags(source, absl::GetFlag(FLAGS_host));
    if (!telemetry.ok()) {
      std::fprintf(stderr, "error: %s\n",
                   std::string(telemetry.status().message()).c_str());
      return 1;
    }
    g_telemetry = std::move(*telemetry);
    RegisterLearnerMetrics(g_telemetry->registry());
  }
  if (!absl::GetFlag(FLAGS_coordinator).empty()) {
    const int code = RunWorker();
    g_telemetry.reset();
    return code;
  }
  if (absl::GetFlag(FLAGS_run).empty()) {
    std::fprintf(stderr, "error: --run is required (a run file)\n");
    return 2;
  }
  auto spec = rl::LoadRunSpecFile(absl::GetFlag(FLAGS_run));
  if (!spec.ok()) {
    std::fprintf(stderr, "error: %s\n",
                 std::string(spec.status().message()).c_str());
    return 2;
  }
  rl::LearnerOptions options;
  options.spec = *spec;
  options.run_id = absl::GetFlag(FLAGS_run_id).empty()
                       ? spec->name()
                       : absl::GetFlag(FLAGS_run_id);
  options.run_dir = absl::GetFlag(FLAGS_run_dir);
  options.emitter = g_telemetry->emitter();
  g_telemetry->emitter()->SetRun(options.run_id);
  auto core = rl::LearnerCore::Create(options);
  if (!core.ok()) {
    std::fprintf(stderr, "error: %s\n",
                 std::string(core.status().message()).c_str());
    return 1;
  }
  std::shared_ptr<rl::LearnerCore> shared_core = std::move(*core);
  SetCurrentCore(shared_core);
  rl::LearnerServiceImpl service(shared_core);
  auto server = Serve(&service);
  if (!server.ok()) {
    std::fprintf(stderr, "error: %s\n",
                 std::string(server.status().message()).c_str());
    return 1;
  }
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);

  bool done = false;
  absl::Time last_log = absl::Now();
  while (!g_stop && !done) {
    done = shared_core->WaitUntilDone(absl::Milliseconds(200));
    if (absl::Now() - last_log > absl::Seconds(5)) {
      const rl::LearnerStatus s = shared_core->GetStatus();
      RL_LOG_INFO(
          "version {} | {} steps | {:.0f} steps/s | return(100) {:.1f} | "
          "actors {} | rejected {} stale {} duplicate {}",
          s.policy_version(), s.env_steps(), s.progress().steps_per_second(),
          s.progress().mean_return(), s.connected_actors(),
          s.segments_rejected(), s.segments_dropped_stale(),
          s.segments_duplicate());
      last_log = absl::Now();
    }
  }
  const rl::LearnerStatus status = shared_core->GetStatus();
  if (done) {
    // Give subscribers a moment to receive the final version.
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    while (absl::Now() < deadline &&
           shared_core->GetStatus().connected_actors() > 0) {
      absl::SleepFor(absl::Milliseconds(50));
    }
  }
  server->server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  if (!absl::GetFlag(FLAGS_result_file).empty()) {
    WriteFileAtomically(absl::GetFlag(FLAGS_result_file),
                        ResultJson(status, done));
  }
  const absl::Status final_status = shared_core->final_status();
  SetCurrentCore(nullptr);
  g_telemetry.reset();  // flushes what is left
  if (!final_status.ok()) {
    std::fprintf(stderr, "error: %s\n",
                 std::string(final_status.message()).c_str());
    return 1;
  }
  std::printf("learner %s: %lld env steps, %lld updates, mean return %.1f\n",
              done ? "done" : "stopped",
              static_cast<long long>(status.env_steps()),
              static_cast<long long>(status.updates()),
              status.progress().mean_return());
  return 0;
}
