// The embedded one-machine default: the coordinator starts and supervises
// the telemetry service and a pool of local learner and actor workers as its
// children (local_workers.h). Telemetry gets fixed ports, chosen before
// anything starts, so a restarted child comes back where the workers look
// for it.
#ifndef RL_COORDINATOR_EMBEDDED_SYSTEM_H_
#define RL_COORDINATOR_EMBEDDED_SYSTEM_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/security.h"
#include "coordinator/local_workers.h"

namespace rl {

// The embedded default's locked doors: flags every child gets (TLS, the
// token table, --insecure) and the token each kind of child sends.
struct LocalDoors {
  std::vector<std::string> flags;
  std::string worker_token_file;  // workers ("": the flags carry one)
  std::string admin_token_file;   // telemetry, this coordinator
  std::string user_token_file;    // rlctl
  // This coordinator's: its servers check the local tokens, its calls send
  // the admin token (or the operator's, when the operator set the doors).
  std::shared_ptr<const Security> security;
};

// Unless the operator gave --tokens or --insecure, makes tokens once into
// <runs_dir>/auth (directory 0700, files 0600, reused after a restart):
// admin.token, user.token, worker.token and their table `tokens`, and
// returns them as this process's security (`security`: its servers check
// them; its calls send the admin token). Loopback needs no other set-up.
// `operator_security` is what the operator's flags gave.
absl::StatusOr<LocalDoors> LockLocalDoors(
    const std::string& runs_dir,
    std::shared_ptr<const Security> operator_security);

struct EmbeddedSystemOptions {
  std::string local_workers;  // "learners=1,actors=2"
  // Binaries; empty: ../learner/learner_main (and so on) beside this one.
  std::string learner_binary;
  std::string actor_binary;
  std::string telemetry_binary;
  std::string log_dir = "runs/logs";
  bool local_telemetry = true;
  // -1: the coordinator's port + 1 (a free one when that port is 0).
  int telemetry_port = -1;
  // -1: 8080 (a free one when the coordinator's port is 0).
  int telemetry_http_port = -1;
  std::string telemetry_port_file;  // written by the child once listening
  std::string telemetry_http_port_file;
  // Set by the coordinator: where it listens and keeps runs.
  std::string host = "127.0.0.1";
  int coordinator_port = 0;
  bool ephemeral_ports = false;  // the coordinator was asked for port 0
  std::string runs_dir = "runs";
  LocalDoors doors;
  // The credential of a local worker's name (CoordinatorCore's), handed to
  // each child; empty: none.
  std::function<std::string(const std::string& worker_name)> worker_credential;
  // How a local worker's process ended (LocalWorkerOptions::on_exit).
  std::function<void(const std::string& worker_name, const std::string& how)>
      on_worker_exit;
};

class EmbeddedSystem {
 public:
  // Resolves binaries and ports; starts nothing. INVALID_ARGUMENT for a bad
  // --local_workers or a binary that is not there.
  static absl::StatusOr<std::unique_ptr<EmbeddedSystem>> Create(
      const EmbeddedSystemOptions& options);

  // HOST:PORT of the local telemetry service ("" without one).
  const std::string& telemetry_address() const { return telemetry_address_; }

  // Starts the children; then Supervise() periodically restarts the dead.
  void Start();
  void Supervise();
  void Shutdown();

 private:
  EmbeddedSystem() = default;

  LocalWorkerOptions pool_options_;
  std::string telemetry_address_;
  std::unique_ptr<LocalWorkerPool> pool_;
};

}  // namespace rl

#endif  // RL_COORDINATOR_EMBEDDED_SYSTEM_H_
