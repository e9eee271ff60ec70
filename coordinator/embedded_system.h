// The embedded one-machine default: the coordinator starts and supervises
// the telemetry service and a pool of local learner and actor workers as its
// children (local_workers.h). Telemetry gets fixed ports, chosen before
// anything starts, so a restarted child comes back where the workers look
// for it.
#ifndef RL_COORDINATOR_EMBEDDED_SYSTEM_H_
#define RL_COORDINATOR_EMBEDDED_SYSTEM_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "coordinator/local_workers.h"

namespace rl {

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
