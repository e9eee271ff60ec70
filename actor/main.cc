// actor_main: one actor of a run. Steps the run's environments with the
// newest policy from the learner and streams rollout segments to it; with
// --coordinator, the actor of whatever run the coordinator assigns.
//
//   actor_main --learner=127.0.0.1:50051 --run=examples/cartpole.yaml
//
// Exit codes: 0 the learner sent its final policy, or SIGTERM/SIGINT;
// 2 bad flags or run file; 1 other errors (e.g. the learner unreachable for
// longer than --max_disconnected_seconds).
#include <torch/types.h>
#include <torch/utils.h>

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "actor/actor_process.h"
#include "common/command_line.h"
#include "common/logging.h"
#include "common/security_flags.h"
#include "common/signal_waiter.h"
#include "policy/cuda_runtime.h"

ABSL_FLAG(std::string, learner, "", "Learner address HOST:PORT (required).");
ABSL_FLAG(std::string, run, "", "Run file, YAML or JSON (required).");
ABSL_FLAG(std::string, run_id, "",
          "Run id sent to the learner (default: the run file's name).");
ABSL_FLAG(int, actor_id, 0, "Rank of this actor in the run (>= 0).");
ABSL_FLAG(int, env_threads, 1,
          "Threads stepping the environments; above 1 also the most a run's "
          "resources.actor_threads may ask for.");
ABSL_FLAG(std::vector<std::string>, env_plugin_dirs, {},
          "Directories environment plugins may be loaded from (comma-"
          "separated); a run naming a library elsewhere fails. Empty: beside "
          "the binaries, $RL_ENV_PLUGIN_PATH and the working directory; '*': "
          "any path a run file names (docs/security.md).");
ABSL_FLAG(std::vector<std::string>, python_env_modules, {},
          "Python modules whose functions and envs runs may name through the "
          "Gymnasium bridge (`id: module:function`; comma-separated, 'pkg.*' "
          "for a package, '*' for any). Empty: $RL_PYTHON_ENV_MODULES, else "
          "only registered Gymnasium ids and rl_atari (docs/security.md).");
ABSL_FLAG(int, torch_threads, 1, "LibTorch intra-op threads.");
ABSL_FLAG(bool, shared_memory, true,
          "Offer a learner on this host (same PID namespace, same user) "
          "shared memory for segments, which it then reads there instead of "
          "from the socket; false: segments always go over the socket.");
ABSL_FLAG(int64_t, max_rss_mb, 8192,
          "Worker mode: when a run ends and this process's resident memory "
          "is over this many MiB (a leaking environment plugin), it exits "
          "76 for its supervisor to start a fresh one; 0: no limit.");
ABSL_FLAG(int, profile, 0,
          "Write a Chrome trace (LibTorch's profiler) of each run's first N "
          "segments; 0: none.");
ABSL_FLAG(std::string, profile_output, "",
          "The trace file of --profile (default "
          "profile-<run>-actor<actor_id>.json).");
ABSL_FLAG(std::string, coordinator, "",
          "Worker mode: register with this coordinator (HOST:PORT) and run "
          "the assignments it gives (no --learner/--run needed).");
ABSL_FLAG(std::string, advertise_address, "",
          "Worker mode: this host's reachable address, shown to operators "
          "(rlctl workers) with the metrics port.");
ABSL_FLAG(std::string, worker_name, "",
          "Worker mode: stable name (default actor-<pid>).");
ABSL_FLAG(std::string, worker_credential_file, "",
          "Worker mode: a file holding the credential the operator issued "
          "for --worker_name (coordinator_main --issue_worker_credential); "
          "lets a restarted worker take its name back at once.");
ABSL_FLAG(int, max_disconnected_seconds, 120,
          "Exit with an error after this long without a learner connection.");
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
      "actor_main --learner=HOST:PORT --run=RUN_FILE [--actor_id=N] "
      "[--env_threads=N] [--torch_threads=N] [--max_disconnected_seconds=S] "
      "| --coordinator=HOST:PORT");
  if (absl::GetFlag(FLAGS_torch_threads) < 1) {
    return rl::ExitCode(absl::InvalidArgumentError(
        absl::StrCat("--torch_threads: must be >= 1 (got ",
                     absl::GetFlag(FLAGS_torch_threads), ")")));
  }
  rl::InitLogging(absl::GetFlag(FLAGS_coordinator).empty()
                      ? absl::StrCat("actor/", absl::GetFlag(FLAGS_actor_id))
                      : "actor");
  // Before LibTorch is first asked about CUDA (policy/cuda_runtime.h).
  rl::PrepareCudaRuntime();
  absl::StatusOr<std::shared_ptr<const rl::Security>> security =
      rl::SecurityFromFlags();
  if (!security.ok()) return rl::ExitCode(security.status());
  torch::set_num_threads(absl::GetFlag(FLAGS_torch_threads));

  rl::ActorProcessOptions options;
  options.security = *security;
  options.coordinator = absl::GetFlag(FLAGS_coordinator);
  options.worker_name = absl::GetFlag(FLAGS_worker_name);
  options.worker_credential_file = absl::GetFlag(FLAGS_worker_credential_file);
  options.advertise_address = absl::GetFlag(FLAGS_advertise_address);
  options.learner = absl::GetFlag(FLAGS_learner);
  options.run_file = absl::GetFlag(FLAGS_run);
  options.run_id = absl::GetFlag(FLAGS_run_id);
  options.actor_id = absl::GetFlag(FLAGS_actor_id);
  options.env_threads = absl::GetFlag(FLAGS_env_threads);
  options.env_plugin_dirs = absl::GetFlag(FLAGS_env_plugin_dirs);
  options.shared_memory = absl::GetFlag(FLAGS_shared_memory);
  options.python_env_modules = absl::GetFlag(FLAGS_python_env_modules);
  options.max_rss_mb = absl::GetFlag(FLAGS_max_rss_mb);
  options.profile_segments = absl::GetFlag(FLAGS_profile);
  options.profile_output = absl::GetFlag(FLAGS_profile_output);
  if (options.profile_segments < 0) {
    return rl::ExitCode(absl::InvalidArgumentError(absl::StrCat(
        "--profile: must be >= 0 (got ", options.profile_segments, ")")));
  }
  options.max_disconnected =
      absl::Seconds(absl::GetFlag(FLAGS_max_disconnected_seconds));
  options.telemetry.telemetry_target = absl::GetFlag(FLAGS_telemetry);
  options.telemetry.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  options.telemetry.metrics_port_file = absl::GetFlag(FLAGS_metrics_port_file);

  auto process = rl::ActorProcess::Create(options);
  if (!process.ok()) return rl::ExitCode(process.status());
  return rl::ExitCode((*process)->Wait());
}
