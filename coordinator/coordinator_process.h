// The coordinator process: the core (run store, scheduler), its services on
// a port, its telemetry (census every 5 s, queue waits, /metrics), and in
// the embedded default the local telemetry and workers it supervises.
//
//   main: flags -> CoordinatorProcessOptions -> Create -> Wait
#ifndef RL_COORDINATOR_COORDINATOR_PROCESS_H_
#define RL_COORDINATOR_COORDINATOR_PROCESS_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/security.h"
#include "coordinator/embedded_system.h"
#include "telemetry/client/process_telemetry.h"

namespace rl {

struct CoordinatorProcessOptions {
  // TLS, tokens and roles of its server and its calls (the main's, from its
  // flags; null: Security::ProcessDefault()). With local workers and no
  // --tokens or --insecure, the embedded system's local tokens replace it.
  std::shared_ptr<const Security> security;
  std::string host = "127.0.0.1";
  int port = 50051;  // 0: a free one
  std::string port_file;
  std::string store = "runs/coordinator.db";
  int64_t max_store_mb = 0;       // 0: no cap
  std::string runs_dir = "runs";  // checkpoints: <runs_dir>/<run id>
  absl::Duration lease_ttl = absl::Seconds(10);
  int max_request_kb = 4096;
  int max_watchers = 1024;         // concurrent WatchRun streams
  int max_watchers_per_user = 64;  // ... of one caller (0: no limit)
  // Admission and crash loops (coordinator_core.h's CoordinatorOptions).
  absl::Duration unplaceable_timeout = absl::Minutes(10);
  int max_worker_failures = 10;
  // Runs one user may have waiting to start (0: no limit).
  int max_queued_runs_per_user = 256;
  // Sweeps one user may have running at once (0: no limit).
  int max_sweeps_per_user = 16;
  absl::Duration worker_failure_window = absl::Minutes(10);
  // Largest segment or policy a run may need on the wire; the learners'
  // --max_message_mb must be at least this.
  int max_message_mb = 256;
  // A RUNNING run without new environment steps this long has its gang
  // restarted (zero: no limit).
  absl::Duration max_time_without_progress = absl::Minutes(10);
  // Every worker must show an operator-issued credential to register
  // (where tokens are required; without tokens this changes nothing).
  bool require_worker_credentials = true;
  // Embedded default when embedded.local_workers is set; its host, port and
  // runs_dir are filled from the above.
  EmbeddedSystemOptions embedded;
  // Its source is "coordinator"; the local telemetry's address, when there
  // is one, replaces telemetry_target.
  ProcessTelemetryOptions telemetry;
};

class CoordinatorProcess {
 public:
  // Opens the store, serves RunService and WorkerService (prints
  // "coordinator listening on HOST:PORT"), starts telemetry and the
  // embedded system. INVALID_ARGUMENT for bad options.
  static absl::StatusOr<std::unique_ptr<CoordinatorProcess>> Create(
      const CoordinatorProcessOptions& options);
  ~CoordinatorProcess();

  // Places runs, expires leases and supervises the children until
  // SIGTERM/SIGINT (blocked by the caller, common/signal_waiter.h); then
  // stops the children and the server.
  absl::Status Wait();

 private:
  class Impl;
  explicit CoordinatorProcess(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rl

#endif  // RL_COORDINATOR_COORDINATOR_PROCESS_H_
