#include "coordinator/embedded_system.h"

#include <cstdio>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/port_file.h"
#include "common/status.h"

namespace rl {
namespace {

namespace fs = std::filesystem;

// `given`, or <bin>/<package>/<name> where <bin> holds this binary's
// package; INVALID_ARGUMENT naming `flag` if it is not there.
absl::StatusOr<std::string> FindBinary(const std::string& given,
                                       const std::string& package,
                                       const std::string& name,
                                       const std::string& flag) {
  std::string path = given;
  if (path.empty()) {
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    path = (self.parent_path().parent_path() / package / name).string();
  }
  if (!fs::exists(path)) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, " binary ", path, " not found (build it, or pass --", flag, ")"));
  }
  return path;
}

}  // namespace

absl::StatusOr<std::unique_ptr<EmbeddedSystem>> EmbeddedSystem::Create(
    const EmbeddedSystemOptions& options) {
  auto system = std::unique_ptr<EmbeddedSystem>(new EmbeddedSystem());
  LocalWorkerOptions& pool = system->pool_options_;
  RETURN_IF_ERROR(ParseLocalWorkers(options.local_workers, &pool));
  ASSIGN_OR_RETURN(pool.learner_binary,
                   FindBinary(options.learner_binary, "learner", "learner_main",
                              "learner_binary"));
  ASSIGN_OR_RETURN(pool.actor_binary, FindBinary(options.actor_binary, "actor",
                                                 "actor_main", "actor_binary"));
  pool.coordinator_address =
      absl::StrCat("127.0.0.1:", options.coordinator_port);
  pool.log_dir = options.log_dir;
  if (options.local_telemetry) {
    ASSIGN_OR_RETURN(
        const std::string binary,
        FindBinary(options.telemetry_binary, "telemetry", "telemetry_main",
                   "telemetry_binary (or --nolocal_telemetry)"));
    int grpc_port = options.telemetry_port;
    if (grpc_port < 0) {
      grpc_port = options.ephemeral_ports ? 0 : options.coordinator_port + 1;
    }
    int http_port = options.telemetry_http_port;
    if (http_port < 0) http_port = options.ephemeral_ports ? 0 : 8080;
    for (int* port : {&grpc_port, &http_port}) {
      if (*port != 0) continue;
      absl::StatusOr<int> free_port = PickFreePort(options.host);
      if (!free_port.ok()) return free_port.status();
      *port = *free_port;
    }
    system->telemetry_address_ = absl::StrCat(options.host, ":", grpc_port);
    pool.telemetry_argv = {
        binary,
        absl::StrCat("--host=", options.host),
        absl::StrCat("--port=", grpc_port),
        absl::StrCat("--http_port=", http_port),
        absl::StrCat("--store=", options.runs_dir, "/telemetry.db"),
        absl::StrCat("--tensorboard_dir=", options.runs_dir, "/tensorboard"),
        absl::StrCat("--coordinator=127.0.0.1:", options.coordinator_port)};
    // The child writes the port files itself, once it is listening.
    if (!options.telemetry_port_file.empty()) {
      pool.telemetry_argv.push_back("--port_file=" +
                                    options.telemetry_port_file);
    }
    if (!options.telemetry_http_port_file.empty()) {
      pool.telemetry_argv.push_back("--http_port_file=" +
                                    options.telemetry_http_port_file);
    }
    pool.worker_args.push_back("--telemetry=" + system->telemetry_address_);
    std::printf("telemetry on %s, web page http://%s:%d/\n",
                system->telemetry_address_.c_str(), options.host.c_str(),
                http_port);
    std::fflush(stdout);
  }
  return system;
}

void EmbeddedSystem::Start() {
  RL_LOG_INFO("starting {} local learners and {} local actors (logs in {})",
              pool_options_.learners, pool_options_.actors,
              pool_options_.log_dir);
  pool_ = std::make_unique<LocalWorkerPool>(pool_options_);
}

void EmbeddedSystem::Supervise() {
  if (pool_ != nullptr) pool_->Supervise();
}

void EmbeddedSystem::Shutdown() {
  if (pool_ != nullptr) pool_->Shutdown();
}

}  // namespace rl
