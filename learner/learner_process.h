// The learner process: its telemetry, its LearnerService on a port, and
// either one run given on the command line (standalone) or the runs a
// coordinator assigns (worker mode, through worker/).
//
//   main: flags -> LearnerProcessOptions -> Create -> Wait
#ifndef RL_LEARNER_LEARNER_PROCESS_H_
#define RL_LEARNER_LEARNER_PROCESS_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/security.h"
#include "telemetry/client/process_telemetry.h"

namespace rl {

struct LearnerProcessOptions {
  // TLS, tokens and roles of its server, its calls to the coordinator and
  // its telemetry (the main's, from its flags; null:
  // Security::ProcessDefault()).
  std::shared_ptr<const Security> security;
  std::string host = "127.0.0.1";
  int port = 0;  // 0: a free one
  std::string port_file;
  int max_message_mb = 256;          // largest rollout segment accepted
  int max_streams = 1024;            // rollout + policy streams open at once
  int max_streams_per_client = 256;  // of those, from one client
  // Rollout segments waiting for the PPO thread, in MiB over all streams;
  // beyond, a segment is refused (the actor resends it).
  int max_inflight_segment_mb = 1024;
  // Worker mode when set: register with this coordinator (HOST:PORT) and
  // train the runs it assigns.
  std::string coordinator;
  std::string worker_name;  // default learner-HOST:PORT
  // A file holding the operator-issued credential for worker_name (empty:
  // none); see RegisterWorkerRequest.worker_credential.
  std::string worker_credential_file;
  // The address actors and peer learners reach this learner at (default
  // `host`; required when host is 0.0.0.0 and other hosts take part).
  std::string advertise_address;
  // Port of the learner's rendezvous store (c10d TCPStore; a gang of
  // learners meets at its rank 0's); 0: a free one.
  int rendezvous_port = 0;
  // A gang's ranks must all join within this.
  absl::Duration rendezvous_timeout = absl::Seconds(60);
  // Standalone mode: the run file, the run's id (default its name),
  // checkpoints (<run_dir>/checkpoints, resumed), a JSON summary at the end.
  std::string run_file;
  std::string run_id;
  std::string run_dir;
  std::string result_file;
  // A Chrome trace of each run's first N updates (LearnerOptions); 0: none.
  int profile_updates = 0;
  std::string profile_output;
  // Its source defaults to the worker name or learner/<pid>.
  ProcessTelemetryOptions telemetry;
};

class LearnerProcess {
 public:
  // Loads the run (INVALID_ARGUMENT for a bad run file or options), starts
  // telemetry and the server (prints "learner listening on HOST:PORT"),
  // then the run's core or the worker runtime.
  static absl::StatusOr<std::unique_ptr<LearnerProcess>> Create(
      const LearnerProcessOptions& options);
  ~LearnerProcess();

  // Standalone: until the run is done or SIGTERM/SIGINT (blocked by the
  // caller, common/signal_waiter.h); then the summary. Worker mode: until
  // a stop signal. The run's error if it failed.
  absl::Status Wait();

 private:
  class Impl;
  explicit LearnerProcess(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rl

#endif  // RL_LEARNER_LEARNER_PROCESS_H_
