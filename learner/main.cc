// learner: serves LearnerService for one run (actors stream rollouts in,
// policies stream out; PPO updates in between), or, with --coordinator, for
// the runs a coordinator assigns.
//
//   learner_main --run=examples/cartpole.yaml --port=0 --run_dir=runs/cartpole
// prints "learner listening on HOST:PORT" (and writes PORT to --port_file).
// Exit codes: 0 done (or stopped by SIGTERM/SIGINT), 2 bad flags or run
// file, 1 other errors (the run failed).
#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/command_line.h"
#include "common/logging.h"
#include "common/process_memory.h"
#include "common/security_flags.h"
#include "common/signal_waiter.h"
#include "learner/learner_process.h"
#include "policy/cuda_runtime.h"

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
ABSL_FLAG(int, profile, 0,
          "Write a Chrome trace (LibTorch's profiler) of each run's first N "
          "updates; 0: none.");
ABSL_FLAG(std::string, profile_output, "",
          "The trace file of --profile (default <run_dir>/profile.json).");
ABSL_FLAG(std::string, coordinator, "",
          "Worker mode: register with this coordinator (host:port) and train "
          "the runs it assigns (no --run needed).");
ABSL_FLAG(std::string, worker_name, "",
          "Worker mode: stable name (default learner-<host>-<port>).");
ABSL_FLAG(std::string, worker_credential_file, "",
          "Worker mode: a file holding the credential the operator issued "
          "for --worker_name (coordinator_main --issue_worker_credential); "
          "lets a restarted worker take its name back at once.");
ABSL_FLAG(std::string, advertise_address, "",
          "Worker mode: the address actors and peer learners reach this "
          "learner at (default: --host; required when --host is 0.0.0.0).");
ABSL_FLAG(int, rendezvous_port, 0,
          "Worker mode: port of this learner's rendezvous store (c10d "
          "TCPStore) for gangs it leads; 0 picks a free one.");
ABSL_FLAG(double, rendezvous_timeout_s, 60,
          "Worker mode: seconds for all ranks of a learner gang to join.");
ABSL_FLAG(int, max_streams, 1024,
          "Rollout and policy streams open at once; more are refused "
          "(RESOURCE_EXHAUSTED).");
ABSL_FLAG(int, max_streams_per_client, 256,
          "Of those, at most this many from one client (its token's "
          "identity and its host); more are refused (RESOURCE_EXHAUSTED).");
ABSL_FLAG(int, max_message_mb, 256,
          "Largest rollout segment accepted, in MiB.");
ABSL_FLAG(int, max_inflight_segment_mb, 1024,
          "Rollout segments waiting for the PPO thread, in MiB over all "
          "streams; beyond, a segment is refused (RESOURCE_EXHAUSTED) and the "
          "actor resends it.");
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
      "learner_main --run=RUN_FILE [--port=N] [--run_dir=DIR] | "
      "--coordinator=HOST:PORT");
  rl::InitLogging("learner");
  // Segments are parsed into large blocks: reused, not faulted in afresh.
  if (!rl::KeepLargeBlocksInHeap()) {
    RL_LOG_WARNING("glibc refused the heap settings for large blocks");
  }
  // Before LibTorch is first asked about CUDA (policy/cuda_runtime.h).
  rl::PrepareCudaRuntime();
  absl::StatusOr<std::shared_ptr<const rl::Security>> security =
      rl::SecurityFromFlags();
  if (!security.ok()) return rl::ExitCode(security.status());
  torch::set_num_threads(std::max(1, absl::GetFlag(FLAGS_torch_threads)));

  rl::LearnerProcessOptions options;
  options.security = *security;
  options.host = absl::GetFlag(FLAGS_host);
  options.port = absl::GetFlag(FLAGS_port);
  options.port_file = absl::GetFlag(FLAGS_port_file);
  options.max_message_mb = absl::GetFlag(FLAGS_max_message_mb);
  options.max_streams = absl::GetFlag(FLAGS_max_streams);
  options.max_streams_per_client = absl::GetFlag(FLAGS_max_streams_per_client);
  options.max_inflight_segment_mb =
      absl::GetFlag(FLAGS_max_inflight_segment_mb);
  options.coordinator = absl::GetFlag(FLAGS_coordinator);
  options.worker_name = absl::GetFlag(FLAGS_worker_name);
  options.worker_credential_file = absl::GetFlag(FLAGS_worker_credential_file);
  options.advertise_address = absl::GetFlag(FLAGS_advertise_address);
  options.rendezvous_port = absl::GetFlag(FLAGS_rendezvous_port);
  options.rendezvous_timeout =
      absl::Seconds(absl::GetFlag(FLAGS_rendezvous_timeout_s));
  options.run_file = absl::GetFlag(FLAGS_run);
  options.run_id = absl::GetFlag(FLAGS_run_id);
  options.run_dir = absl::GetFlag(FLAGS_run_dir);
  options.result_file = absl::GetFlag(FLAGS_result_file);
  options.profile_updates = absl::GetFlag(FLAGS_profile);
  options.profile_output = absl::GetFlag(FLAGS_profile_output);
  if (options.profile_updates < 0) {
    return rl::ExitCode(absl::InvalidArgumentError(absl::StrCat(
        "--profile: must be >= 0 (got ", options.profile_updates, ")")));
  }
  options.telemetry.telemetry_target = absl::GetFlag(FLAGS_telemetry);
  options.telemetry.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  options.telemetry.metrics_port_file = absl::GetFlag(FLAGS_metrics_port_file);

  auto process = rl::LearnerProcess::Create(options);
  if (!process.ok()) return rl::ExitCode(process.status());
  return rl::ExitCode((*process)->Wait());
}
