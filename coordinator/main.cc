// coordinator: accepts runs (RunService), leases work to registered learner
// and actor workers (WorkerService), keeps its state in SQLite. With
// --local_workers, the embedded default: it also starts and supervises the
// telemetry service and local workers.
//
//   coordinator_main --port=50051 --store=runs/coordinator.db
//       --local_workers=learners=1,actors=2   (one command line)
// Exit codes: 0 stopped by SIGTERM/SIGINT, 2 bad flags, 1 other errors.
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "common/command_line.h"
#include "common/logging.h"
#include "common/security_flags.h"
#include "common/signal_waiter.h"
#include "coordinator/coordinator_process.h"
#include "coordinator/worker_keys.h"

ABSL_FLAG(std::string, host, "127.0.0.1", "Address to listen on.");
ABSL_FLAG(int, port, 50051, "Port; 0 picks a free one.");
ABSL_FLAG(std::string, port_file, "", "Write the bound port here.");
ABSL_FLAG(std::string, store, "runs/coordinator.db", "SQLite state file.");
ABSL_FLAG(std::string, runs_dir, "runs",
          "Checkpoints go to <runs_dir>/<run id>.");
ABSL_FLAG(double, lease_ttl_s, 10, "Seconds a worker lease lasts.");
ABSL_FLAG(int, max_request_kb, 4096,
          "Largest request accepted, in KiB (a submitted run file is at "
          "most 1 MiB; clients send at most 2 MiB of one).");
ABSL_FLAG(
    int, max_watchers, 1024,
    "Concurrent WatchRun streams; more are refused (RESOURCE_EXHAUSTED).");
ABSL_FLAG(int, max_watchers_per_user, 64,
          "Concurrent WatchRun streams of one user (token name); more are "
          "refused (RESOURCE_EXHAUSTED). 0: no limit.");
ABSL_FLAG(int64_t, max_store_mb, 0,
          "Cap of the SQLite state file in MiB (0: none); beyond it submits "
          "fail with RESOURCE_EXHAUSTED, as on a full disk.");
ABSL_FLAG(double, unplaceable_timeout_s, 600,
          "A queued run that no registered workers could hold (device, "
          "memory, count) FAILS after this many seconds; 0: waits for ever.");
ABSL_FLAG(int, max_worker_failures, 10,
          "A run whose workers fail more often than this within "
          "--worker_failure_window_s FAILS with the last error.");
ABSL_FLAG(int, max_queued_runs_per_user, 256,
          "Runs one user (token name) may have waiting to start; more "
          "submits are refused with RESOURCE_EXHAUSTED. 0: no limit.");
ABSL_FLAG(int, max_sweeps_per_user, 16,
          "Sweeps one user may have running at once; more are refused with "
          "RESOURCE_EXHAUSTED. 0: no limit.");
ABSL_FLAG(double, worker_failure_window_s, 600,
          "Window of --max_worker_failures, in seconds.");
ABSL_FLAG(int, max_message_mb, 256,
          "Runs whose rollout segment or policy would exceed this on the "
          "wire are refused at submit (match the learners' --max_message_mb).");
ABSL_FLAG(double, max_seconds_without_progress, 600,
          "A running run whose learner reports no new environment steps for "
          "this long has its gang restarted with that reason (counted "
          "against the run's restarts); 0: no limit.");
ABSL_FLAG(bool, require_worker_credentials, true,
          "Where tokens are required (--tokens, the embedded default), "
          "refuse any worker registration without an operator-issued "
          "credential (--issue_worker_credential); false: a worker token "
          "alone registers a worker.");
ABSL_FLAG(std::string, issue_worker_credential, "",
          "Print the credential of this worker name (derived from the "
          "secret beside --store) and exit; give it to that worker as "
          "--worker_credential_file.");
ABSL_FLAG(std::string, local_workers, "",
          "Embedded default: spawn and supervise local workers, e.g. "
          "learners=1,actors=2; gpus=G spreads them over G GPUs (learner "
          "i and actor i see GPU i mod G alone).");
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
ABSL_FLAG(std::string, telemetry, "",
          "Telemetry service HOST:PORT to stream metrics to; empty: none.");
ABSL_FLAG(int, metrics_port, 0,
          "Prometheus /metrics port; 0 picks a free one, -1: off.");
ABSL_FLAG(std::string, metrics_port_file, "",
          "Write the bound /metrics port here.");

int main(int argc, char** argv) {
  rl::BlockStopSignals();  // before any thread starts
  rl::ParseCommandLineOrExit(
      argc, argv,
      "coordinator_main [--port=N] [--store=FILE] [--local_workers=...]");
  rl::InitLogging("coordinator");
  absl::StatusOr<std::shared_ptr<const rl::Security>> security =
      rl::SecurityFromFlags();
  if (!security.ok()) return rl::ExitCode(security.status());

  if (const std::string name = absl::GetFlag(FLAGS_issue_worker_credential);
      !name.empty()) {
    absl::StatusOr<std::string> secret =
        rl::LoadKeySecret("", absl::GetFlag(FLAGS_store));
    if (!secret.ok()) return rl::ExitCode(secret.status());
    std::printf("%s\n", rl::WorkerCredentialFromSecret(*secret, name).c_str());
    return 0;
  }

  rl::CoordinatorProcessOptions options;
  options.security = *security;
  options.host = absl::GetFlag(FLAGS_host);
  options.port = absl::GetFlag(FLAGS_port);
  options.port_file = absl::GetFlag(FLAGS_port_file);
  options.store = absl::GetFlag(FLAGS_store);
  options.max_store_mb = absl::GetFlag(FLAGS_max_store_mb);
  options.runs_dir = absl::GetFlag(FLAGS_runs_dir);
  options.lease_ttl = absl::Seconds(absl::GetFlag(FLAGS_lease_ttl_s));
  options.max_request_kb = absl::GetFlag(FLAGS_max_request_kb);
  options.max_watchers = absl::GetFlag(FLAGS_max_watchers);
  options.max_watchers_per_user = absl::GetFlag(FLAGS_max_watchers_per_user);
  options.unplaceable_timeout =
      absl::Seconds(absl::GetFlag(FLAGS_unplaceable_timeout_s));
  options.max_worker_failures = absl::GetFlag(FLAGS_max_worker_failures);
  options.max_queued_runs_per_user =
      absl::GetFlag(FLAGS_max_queued_runs_per_user);
  options.max_sweeps_per_user = absl::GetFlag(FLAGS_max_sweeps_per_user);
  options.worker_failure_window =
      absl::Seconds(absl::GetFlag(FLAGS_worker_failure_window_s));
  options.max_message_mb = absl::GetFlag(FLAGS_max_message_mb);
  options.max_time_without_progress =
      absl::Seconds(absl::GetFlag(FLAGS_max_seconds_without_progress));
  options.require_worker_credentials =
      absl::GetFlag(FLAGS_require_worker_credentials);
  rl::EmbeddedSystemOptions& embedded = options.embedded;
  embedded.local_workers = absl::GetFlag(FLAGS_local_workers);
  embedded.learner_binary = absl::GetFlag(FLAGS_learner_binary);
  embedded.actor_binary = absl::GetFlag(FLAGS_actor_binary);
  embedded.telemetry_binary = absl::GetFlag(FLAGS_telemetry_binary);
  embedded.log_dir = absl::GetFlag(FLAGS_log_dir);
  embedded.local_telemetry = absl::GetFlag(FLAGS_local_telemetry);
  embedded.telemetry_port = absl::GetFlag(FLAGS_telemetry_port);
  embedded.telemetry_http_port = absl::GetFlag(FLAGS_telemetry_http_port);
  embedded.telemetry_port_file = absl::GetFlag(FLAGS_telemetry_port_file);
  embedded.telemetry_http_port_file =
      absl::GetFlag(FLAGS_telemetry_http_port_file);
  options.telemetry.telemetry_target = absl::GetFlag(FLAGS_telemetry);
  options.telemetry.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  options.telemetry.metrics_port_file = absl::GetFlag(FLAGS_metrics_port_file);

  auto process = rl::CoordinatorProcess::Create(options);
  if (!process.ok()) return rl::ExitCode(process.status());
  return rl::ExitCode((*process)->Wait());
}
