// coordinator: accepts runs (RunService), leases work to registered learner
// and actor workers (WorkerService), keeps its state in SQLite.
//
//   coordinator --port=50051 --store=runs/coordinator.db
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "common/grpc_util.h"
#include "common/logging.h"
#include "coordinator/coordinator_core.h"
#include "coordinator/coordinator_service.h"
#include "coordinator/local_workers.h"

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

namespace {
volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }
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
  if (!absl::GetFlag(FLAGS_port_file).empty()) {
    const std::string tmp = absl::GetFlag(FLAGS_port_file) + ".tmp";
    std::ofstream(tmp) << server->port << "\n";
    std::rename(tmp.c_str(), absl::GetFlag(FLAGS_port_file).c_str());
  }
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);

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
    pool = std::make_unique<rl::LocalWorkerPool>(local);
    RL_LOG_INFO("starting {} local learners and {} local actors (logs in {})",
                local.learners, local.actors, local.log_dir);
  }
  while (!g_stop) {
    if (pool != nullptr) pool->Supervise();
    (*core)->Tick();
    absl::SleepFor(absl::Milliseconds(200));
  }
  if (pool != nullptr) pool->Shutdown();
  server->server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  return 0;
}
