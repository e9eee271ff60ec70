// The actor process: its telemetry and either one actor of a run given on
// the command line (standalone: --learner, --run) or the assignments a
// coordinator hands out (worker mode, through worker/).
//
//   main: flags -> ActorProcessOptions -> Create -> Wait
#ifndef RL_ACTOR_ACTOR_PROCESS_H_
#define RL_ACTOR_ACTOR_PROCESS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/security.h"
#include "telemetry/client/process_telemetry.h"

namespace rl {

struct ActorProcessOptions {
  // TLS and bearer token of its calls to the coordinator, the learners and
  // telemetry, and the doors of its /metrics (the main's, from its flags;
  // null: Security::ProcessDefault()).
  std::shared_ptr<const Security> security;
  // Worker mode when set: register with this coordinator (HOST:PORT).
  std::string coordinator;
  std::string worker_name;  // default actor-<pid>
  // A file holding the operator-issued credential for worker_name (empty:
  // none); see RegisterWorkerRequest.worker_credential.
  std::string worker_credential_file;
  // Reported at registration (operators' view); empty: none.
  std::string advertise_address;
  // Standalone: the learner (HOST:PORT), the run file, the run id sent to
  // the learner (default the run's name), this actor's rank.
  std::string learner;
  std::string run_file;
  std::string run_id;
  int actor_id = 0;
  int env_threads = 1;
  // Directories environment plugins may be loaded from; empty:
  // DefaultEnvPluginDirs() (envs/env_plugin.h); {"*"}: any path a run file
  // names.
  std::vector<std::string> env_plugin_dirs;
  // Python modules runs may name through the Gymnasium bridge; when not
  // empty, set as $RL_PYTHON_ENV_MODULES, which the bridge enforces
  // (envs/gym_bridge/gym_bridge.py); empty: that variable as it is.
  std::vector<std::string> python_env_modules;
  // Streams offer a learner on this host shared memory for segments
  // (ActorOptions::shared_memory).
  bool shared_memory = true;
  // Worker mode: between runs, over this much resident memory (MiB) the
  // process ends itself (kRecycledExitCode); 0: no limit.
  int64_t max_rss_mb = 8192;
  // A Chrome trace of each run's first N segments (ActorOptions); 0: none.
  int profile_segments = 0;
  std::string profile_output;
  absl::Duration max_disconnected = absl::Seconds(120);
  // Its source defaults to the worker name or actor/<actor_id>.
  ProcessTelemetryOptions telemetry;
};

class ActorProcess {
 public:
  // INVALID_ARGUMENT naming the flag for bad options or the run file's
  // field for a bad run.
  static absl::StatusOr<std::unique_ptr<ActorProcess>> Create(
      const ActorProcessOptions& options);
  ~ActorProcess();

  // Standalone: collects and streams until the learner sends its final
  // policy (OK) or SIGTERM/SIGINT (blocked by the caller; stops at the next
  // segment boundary after flushing), or fails (the learner unreachable for
  // longer than max_disconnected). Worker mode: until a stop signal.
  absl::Status Wait();

 private:
  class Impl;
  explicit ActorProcess(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rl

#endif  // RL_ACTOR_ACTOR_PROCESS_H_
