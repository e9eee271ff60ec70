#include "coordinator/embedded_system.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/port_file.h"
#include "common/security.h"
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

absl::StatusOr<LocalDoors> LockLocalDoors(
    const std::string& runs_dir,
    std::shared_ptr<const Security> operator_security) {
  SecurityOptions options = operator_security->options();
  LocalDoors doors;
  if (options.insecure || !options.tokens_file.empty()) {
    doors.flags = SecurityFlags(options);  // the operator's, token included
    doors.security = std::move(operator_security);
    return doors;
  }
  const fs::path dir = fs::path(runs_dir) / "auth";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || ::chmod(dir.c_str(), 0700) != 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot make ", dir.string(),
        " for the local tokens: ", ec ? ec.message() : std::strerror(errno)));
  }
  std::ostringstream table;
  table << "# Made by coordinator_main for the embedded default: "
           "<token> <role> <name>\n";
  for (const char* role : {"admin", "user", "worker"}) {
    const std::string path = (dir / absl::StrCat(role, ".token")).string();
    ASSIGN_OR_RETURN(const std::string token, EnsureSecretFile(path));
    table << token << " " << role << " local-" << role << "\n";
  }
  options.tokens_file = (dir / "tokens").string();
  RETURN_IF_ERROR(WriteSecretFile(options.tokens_file, table.str()));
  doors.flags = SecurityFlags(options);
  doors.admin_token_file = (dir / "admin.token").string();
  doors.user_token_file = (dir / "user.token").string();
  doors.worker_token_file = (dir / "worker.token").string();
  options.token_file = doors.admin_token_file;
  ASSIGN_OR_RETURN(doors.security, Security::Load(options));
  std::printf("tokens in %s (rlctl reads %s)\n", dir.c_str(),
              doors.user_token_file.c_str());
  std::fflush(stdout);
  return doors;
}

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
  pool.credential = options.worker_credential;
  pool.on_exit = options.on_worker_exit;
  pool.credential_dir =
      (fs::path(options.runs_dir) / "auth" / "workers").string();
  pool.worker_args = options.doors.flags;
  if (!options.doors.worker_token_file.empty()) {
    pool.worker_args.push_back("--token_file=" +
                               options.doors.worker_token_file);
  }
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
    pool.telemetry_argv.insert(pool.telemetry_argv.end(),
                               options.doors.flags.begin(),
                               options.doors.flags.end());
    if (!options.doors.admin_token_file.empty()) {
      pool.telemetry_argv.push_back("--token_file=" +
                                    options.doors.admin_token_file);
    }
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
    std::printf("telemetry on %s, web page http://%s:%d/%s\n",
                system->telemetry_address_.c_str(), options.host.c_str(),
                http_port,
                options.doors.user_token_file.empty()
                    ? ""
                    : absl::StrCat("#token=<the token in ",
                                   options.doors.user_token_file, ">")
                          .c_str());
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
