// The embedded default: a pool of learner and actor workers on this machine,
// as child processes of the coordinator. Each child registers with the
// coordinator like any worker; the pool restarts a child that dies (with
// exponential backoff) and stops them all on shutdown (SIGTERM, then
// SIGKILL after a grace period).
#ifndef RL_COORDINATOR_LOCAL_WORKERS_H_
#define RL_COORDINATOR_LOCAL_WORKERS_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/subprocess.h"
#include "proto/coordinator.pb.h"

namespace rl {

struct LocalWorkerOptions {
  int learners = 0;
  int actors = 0;
  // GPUs to spread the workers over (empty: none named): learner i and
  // actor i each see gpu_ids[i mod size] alone (CUDA_VISIBLE_DEVICES), so
  // a run's "cuda" means a GPU of its own for each of up to that many
  // learners. ParseLocalWorkers' gpus=G: the first G of the coordinator's
  // own CUDA_VISIBLE_DEVICES where it has one, else 0 to G - 1.
  std::vector<std::string> gpu_ids;
  std::string learner_binary;
  std::string actor_binary;
  std::string coordinator_address;
  std::string log_dir;
  // Passed to every worker too (e.g. --telemetry=HOST:PORT).
  std::vector<std::string> worker_args;
  // When set, started first and supervised like the workers: the telemetry
  // service (argv[0] is its binary).
  std::vector<std::string> telemetry_argv;
  // When set: each worker child gets the credential for its name, written
  // to <credential_dir>/<name>.credential (mode 0600) and passed as
  // --worker_credential_file, so a restarted child takes its name back at
  // once instead of waiting out the dead one's lease.
  std::function<std::string(const std::string& worker_name)> credential;
  std::string credential_dir;
  // Called from Supervise when a worker's process ends, with its name and
  // how it ended ("exited with 3", "killed by SIGABRT").
  std::function<void(const std::string& worker_name, const std::string& how)>
      on_exit;
};

// "exited with 3", "killed by SIGABRT (signal 6)": a Subprocess exit code
// (128+N for signal N) in words.
std::string DescribeExit(int code);

// Parses "learners=1,actors=2[,gpus=G]" into `options` (INVALID_ARGUMENT
// naming the part that is wrong, or gpus=G beyond the GPUs this process's
// CUDA_VISIBLE_DEVICES names).
absl::Status ParseLocalWorkers(const std::string& text,
                               LocalWorkerOptions* options);

// The names the pool's workers register under (local-learner-0, ...), of
// `role` (LEARNER or ACTOR).
std::vector<std::string> LocalWorkerNames(const LocalWorkerOptions& options,
                                          WorkerRole role);

class LocalWorkerPool {
 public:
  explicit LocalWorkerPool(const LocalWorkerOptions& options);
  ~LocalWorkerPool();  // Shutdown().

  // Starts every worker that is not running and whose backoff has passed;
  // call periodically.
  void Supervise();
  void Shutdown(absl::Duration grace = absl::Seconds(5));
  int restarts() const { return restarts_; }

 private:
  struct Child {
    std::string name;
    std::vector<std::string> argv;
    std::vector<std::string> env;  // NAME=VALUE, over the pool's
    std::unique_ptr<Subprocess> process;
    absl::Duration backoff = absl::Seconds(1);
    absl::Time next_start;
    absl::Time started;
    int starts = 0;
  };
  LocalWorkerOptions options_;
  std::vector<Child> children_;
  int restarts_ = 0;
};

}  // namespace rl

#endif  // RL_COORDINATOR_LOCAL_WORKERS_H_
