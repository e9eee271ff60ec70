// coordinator: accepts runs (RunService), leases work to registered learner
// and actor workers (WorkerService), keeps its state in SQLite.
//
//   coordinator --port=50051 --store=runs/coordinator.db
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_util.h"
#include "common/logging.h"
#include "common/port_file.h"
#include "coordinator/coordinator_core.h"
#include "coordinator/coordinator_service.h"
#include "coordinator/local_workers.h"
#include "telemetry/emitter.h"
#include "telemetry/process_telemetry.h"

ABSL_FLAG(std::string, host, "127.0.0.1", "Address to listen on.");
ABSL_FLAG(int, port, 50051, "Port; 0 picks a free one.");
ABSL_FLAG(std::string, port_file, "", "Write the bound port here.");
ABSL_FLAG(std::string, store, "runs/coordinator.db", "SQLite state file.");
ABSL_FLAG(std::string, runs_dir, "runs",
          "Checkpoints go to <runs_dir>/<run id>.");
ABSL_FLAG(double, lease_ttl_s, 10, "Seconds a worker lease lasts.");
ABSL_FLAG(int, max_request_kb, 1024, "Largest request accepted, in KiB.");
ABSL_FLAG(std::string, local_workers, "",
          "Embedded default: spawn and supervise local workers, e.g. "
          "learners=1,actors=2.");
ABSL_FLAG(std::string, learner_binary, "",
          "Learner worker binary (default: ../learner/learner_main beside "
          "this binary).");
ABSL_FLAG(std::string, actor_binary, "",
          "Actor worker binary (default: ../actor/actor_main beside this "
          "binary).");
ABSL_FLAG(std::string, log_dir, "runs/logs", "Logs of local workers.");
ABSL_FLAG(bool, local_telemetry, true,
          "With --local_workers: also start and supervise the telemetry "
          "service (workers and the coordinator report to it).");
ABSL_FLAG(std::string, telemetry_binary, "",
          "Telemetry binary (default: ../telemetry/telemetry_main beside "
          "this binary).");
ABSL_FLAG(int, telemetry_port, -1,
          "Local telemetry gRPC port; -1: --port + 1 (a free one when --port "
          "is 0).");
ABSL_FLAG(std::string, telemetry_port_file, "",
          "The local telemetry writes its gRPC port here once it listens.");
ABSL_FLAG(std::string, telemetry_http_port_file, "",
          "The local telemetry writes its web page port here.");
ABSL_FLAG(int, telemetry_http_port, -1,
          "Local telemetry web page port; -1: 8080 (a free one when --port "
          "is 0).");

namespace {
volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

// Runs per state and workers per role, now.
struct Census {
  std::map<std::string, int> runs_by_state;
  std::map<std::string, int> workers_by_role;
};

Census TakeCensus(rl::CoordinatorCore* core) {
  Census c;
  for (int s = rl::RunState_MIN; s <= rl::RunState_MAX; ++s) {
    if (rl::RunState_IsValid(s) && s != rl::RUN_STATE_UNSPECIFIED) {
      c.runs_by_state[rl::RunState_Name(static_cast<rl::RunState>(s))] = 0;
    }
  }
  rl::ListRunsRequest request;
  request.set_page_size(1000);
  for (;;) {
    absl::StatusOr<rl::ListRunsResponse> page = core->ListRuns(request);
    if (!page.ok()) break;
    for (const rl::Run& run : page->runs()) {
      ++c.runs_by_state[rl::RunState_Name(run.state())];
    }
    if (page->next_page_token().empty()) break;
    request.set_page_token(page->next_page_token());
  }
  const rl::ListWorkersResponse workers = core->ListWorkers();
  for (const rl::Worker& w : workers.workers()) {
    if (w.alive())
      ++c.workers_by_role[rl::WorkerRole_Name(w.capabilities().role())];
  }
  return c;
}

void EmitCoordinatorMetrics(rl::CoordinatorCore* core, rl::Emitter* emitter,
                            int64_t step) {
  if (!emitter->enabled()) return;
  const Census c = TakeCensus(core);
  for (const auto& [state, n] : c.runs_by_state) {
    emitter->Emit("coordinator/runs", step, n, {{"state", state}});
  }
  int workers = 0;
  for (const auto& [role, n] : c.workers_by_role) workers += n;
  emitter->Emit("coordinator/workers", step, workers);
}

void RegisterCoordinatorMetrics(rl::CoordinatorCore* core,
                                rl::MetricsRegistry* registry) {
  registry->AddCallback(
      "coordinator_runs", "Runs by state.", "gauge", [core]() {
        rl::MetricSamples out;
        for (const auto& [state, n] : TakeCensus(core).runs_by_state) {
          out.push_back({{{"state", state}}, n});
        }
        return out;
      });
  registry->AddCallback(
      "coordinator_workers", "Registered workers by role.", "gauge", [core]() {
        rl::MetricSamples out;
        for (const auto& [role, n] : TakeCensus(core).workers_by_role) {
          out.push_back({{{"role", role}}, n});
        }
        return out;
      });
}
}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  rl::InitLogging("coordinator");
  const std::string store = absl::GetFlag(FLAGS_store);
  std::error_code ec;
  const auto parent = std::filesystem::path(store).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);

  rl::CoordinatorOptions options;
  options.store_path = store;
  options.runs_dir = absl::GetFlag(FLAGS_runs_dir);
  options.lease_ttl = absl::Seconds(absl::GetFlag(FLAGS_lease_ttl_s));
  auto core = rl::CoordinatorCore::Create(options);
  if (!core.ok()) {
    std::fprintf(stderr, "error: %s\n",
                 std::string(core.status().message()).c_str());
    return 1;
  }
  rl::RunServiceImpl runs(core->get());
  rl::WorkerServiceImpl workers(core->get());
  rl::ServerOptions server_options;
  server_options.address =
      absl::StrCat(absl::GetFlag(FLAGS_host), ":", absl::GetFlag(FLAGS_port));
  server_options.max_receive_message_bytes = absl::GetFlag(FLAGS_max_request_kb)
                                             << 10;
  auto server = rl::StartServer({&runs, &workers}, server_options);
  if (!server.ok()) {
    std::fprintf(stderr, "error: %s\n",
                 std::string(server.status().message()).c_str());
    return 1;
  }
  std::printf("coordinator listening on %s:%d\n",
              absl::GetFlag(FLAGS_host).c_str(), server->port);
  std::fflush(stdout);
  if (absl::Status st =
          rl::WritePortFile(absl::GetFlag(FLAGS_port_file), server->port);
      !st.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(st.message()).c_str());
    return 1;
  }
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);

  // Embedded telemetry: fixed ports (so a restarted child comes back where
  // the workers look for it), chosen before anything is started.
  std::string telemetry_address;
  std::vector<std::string> telemetry_argv;
  const std::string host = absl::GetFlag(FLAGS_host);
  if (!absl::GetFlag(FLAGS_local_workers).empty() &&
      absl::GetFlag(FLAGS_local_telemetry)) {
    const bool ephemeral = absl::GetFlag(FLAGS_port) == 0;
    int grpc_port = absl::GetFlag(FLAGS_telemetry_port);
    if (grpc_port < 0) grpc_port = ephemeral ? 0 : server->port + 1;
    int http_port = absl::GetFlag(FLAGS_telemetry_http_port);
    if (http_port < 0) http_port = ephemeral ? 0 : 8080;
    for (int* p : {&grpc_port, &http_port}) {
      if (*p != 0) continue;
      absl::StatusOr<int> free_port = rl::PickFreePort(host);
      if (!free_port.ok()) {
        std::fprintf(stderr, "error: %s\n",
                     std::string(free_port.status().message()).c_str());
        return 1;
      }
      *p = *free_port;
    }
    const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    const std::string binary = absl::GetFlag(FLAGS_telemetry_binary).empty()
                                   ? (self.parent_path().parent_path() /
                                      "telemetry" / "telemetry_main")
                                         .string()
                                   : absl::GetFlag(FLAGS_telemetry_binary);
    if (!std::filesystem::exists(binary)) {
      std::fprintf(stderr,
                   "error: telemetry binary %s not found (build it, pass "
                   "--telemetry_binary, or --nolocal_telemetry)\n",
                   binary.c_str());
      return 2;
    }
    const std::string runs_dir = absl::GetFlag(FLAGS_runs_dir);
    telemetry_address = absl::StrCat(host, ":", grpc_port);
    telemetry_argv = {
        binary,
        absl::StrCat("--host=", host),
        absl::StrCat("--port=", grpc_port),
        absl::StrCat("--http_port=", http_port),
        absl::StrCat("--store=", runs_dir, "/telemetry.db"),
        absl::StrCat("--tensorboard_dir=", runs_dir, "/tensorboard"),
        absl::StrCat("--coordinator=127.0.0.1:", server->port)};
    // The child writes the port files itself, once it is listening.
    if (!absl::GetFlag(FLAGS_telemetry_port_file).empty()) {
      telemetry_argv.push_back("--port_file=" +
                               absl::GetFlag(FLAGS_telemetry_port_file));
    }
    if (!absl::GetFlag(FLAGS_telemetry_http_port_file).empty()) {
      telemetry_argv.push_back("--http_port_file=" +
                               absl::GetFlag(FLAGS_telemetry_http_port_file));
    }
    std::printf("telemetry on %s, web page http://%s:%d/\n",
                telemetry_address.c_str(), host.c_str(), http_port);
    std::fflush(stdout);
  }
  auto telemetry = rl::ProcessTelemetry::StartFromFlags("coordinator", host,
                                                        telemetry_address);
  if (!telemetry.ok()) {
    std::fprintf(stderr, "error: %s\n",
                 std::string(telemetry.status().message()).c_str());
    return 1;
  }
  rl::Emitter* emitter = (*telemetry)->emitter();
  // Queue wait: submission to first RUNNING, once per run (step: how many
  // runs have started since this coordinator did).
  struct Started {
    absl::Mutex mu;
    std::set<std::string> runs;
  };
  auto started = std::make_shared<Started>();
  const int64_t watch_id =
      (*core)->Watch([emitter, started](const rl::Run& run) {
        if (run.state() != rl::RUNNING) return;
        int64_t count;
        {
          absl::MutexLock lock(&started->mu);
          if (!started->runs.insert(run.run_id()).second) return;
          count = static_cast<int64_t>(started->runs.size());
        }
        const absl::Time created =
            absl::FromUnixSeconds(run.create_time().seconds()) +
            absl::Nanoseconds(run.create_time().nanos());
        emitter->Emit("coordinator/queue_wait_seconds", count,
                      absl::ToDoubleSeconds(absl::Now() - created));
      });
  RegisterCoordinatorMetrics(core->get(), (*telemetry)->registry());

  std::unique_ptr<rl::LocalWorkerPool> pool;
  if (!absl::GetFlag(FLAGS_local_workers).empty()) {
    rl::LocalWorkerOptions local;
    const absl::Status parsed =
        rl::ParseLocalWorkers(absl::GetFlag(FLAGS_local_workers), &local);
    if (!parsed.ok()) {
      std::fprintf(stderr, "error: %s\n",
                   std::string(parsed.message()).c_str());
      return 2;
    }
    const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    const auto bin = self.parent_path().parent_path();
    local.learner_binary = absl::GetFlag(FLAGS_learner_binary).empty()
                               ? (bin / "learner" / "learner_main").string()
                               : absl::GetFlag(FLAGS_learner_binary);
    local.actor_binary = absl::GetFlag(FLAGS_actor_binary).empty()
                             ? (bin / "actor" / "actor_main").string()
                             : absl::GetFlag(FLAGS_actor_binary);
    for (const std::string& binary :
         {local.learner_binary, local.actor_binary}) {
      if (!std::filesystem::exists(binary)) {
        std::fprintf(stderr,
                     "error: worker binary %s not found (build it, or "
                     "pass --learner_binary/--actor_binary)\n",
                     binary.c_str());
        return 2;
      }
    }
    local.coordinator_address = absl::StrCat("127.0.0.1:", server->port);
    local.log_dir = absl::GetFlag(FLAGS_log_dir);
    local.telemetry_argv = telemetry_argv;
    if (!telemetry_address.empty()) {
      local.worker_args.push_back("--telemetry=" + telemetry_address);
    }
    pool = std::make_unique<rl::LocalWorkerPool>(local);
    RL_LOG_INFO("starting {} local learners and {} local actors (logs in {})",
                local.learners, local.actors, local.log_dir);
  }
  absl::Time next_report = absl::Now();
  int64_t report = 0;
  while (!g_stop) {
    if (pool != nullptr) pool->Supervise();
    (*core)->Tick();
    if (absl::Now() >= next_report) {
      next_report = absl::Now() + absl::Seconds(5);
      EmitCoordinatorMetrics(core->get(), emitter, ++report);
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
  (*core)->Unwatch(watch_id);
  if (pool != nullptr) pool->Shutdown();
  server->server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  return 0;
}
