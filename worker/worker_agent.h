// The worker side of WorkerService, shared by the learner and actor
// binaries: registers with the coordinator, heartbeats (every 0.5 s, or a
// third of the lease TTL if shorter), re-registers (keeping its current
// assignment) when the lease is lost or the coordinator restarted, and hands
// every change of assignment to the worker. Runs in its own thread; Stop() ends
// it.
#ifndef RL_WORKER_WORKER_AGENT_H_
#define RL_WORKER_WORKER_AGENT_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/security.h"
#include "common/thread.h"
#include "grpcpp/channel.h"
#include "proto/coordinator.grpc.pb.h"

namespace rl {

struct WorkerAgentOptions {
  std::string coordinator;  // host:port
  // The channel's TLS and bearer token (null: Security::ProcessDefault()).
  std::shared_ptr<const Security> security;
  // Used instead of a channel to `coordinator` when set (in-process tests).
  std::shared_ptr<grpc::Channel> channel;
  std::string worker_name;  // stable across restarts of the worker
  // The operator-issued credential for worker_name (empty: none), sent
  // with every registration (RegisterWorkerRequest.worker_credential).
  std::string credential;
  WorkerRole role = WORKER_ROLE_UNSPECIFIED;
  std::vector<std::string> devices;
  std::string address;  // learners: where actors reach them
  // Learners: host:port of their rendezvous store (c10d TCPStore).
  std::string rendezvous_address;
  // Memory this worker offers, reported so that the coordinator places no
  // run here that it estimates cannot fit; 0: the host's (the smaller of
  // physical memory and the cgroup limit, HostMemoryBytes()).
  int64_t memory_bytes = 0;
  // The device checks this process has run so far, sent with every
  // heartbeat (HeartbeatRequest.device_checks); null: none.
  std::function<std::vector<DeviceCheck>()> device_checks;
};

// Device checks as the heartbeat carries them, from (what was checked, its
// result) pairs (policy/device_act_check.h's DeviceChecksRun()).
std::vector<DeviceCheck> DeviceChecksOf(
    const std::vector<std::pair<std::string, absl::Status>>& checks);

// The memory of this host as a process sees it: physical memory, or the
// cgroup (v2 memory.max, v1 limit_in_bytes) limit when smaller; 0 unknown.
int64_t HostMemoryBytes();

class WorkerAgent {
 public:
  // `on_assignment` is called (from the agent's thread) whenever the
  // assignment id changes; an assignment with an empty run_id means: stop.
  WorkerAgent(const WorkerAgentOptions& options,
              std::function<void(const Assignment&)> on_assignment);
  ~WorkerAgent();  // Stop() + join.

  void Start();
  void Stop();

  // Reports progress or the end of the current assignment (best effort,
  // with a deadline).
  // `status` is the end's (OK: done); ABORTED marks it retryable (the
  // gang's failure, not the run's).
  // Without `progress` (a start that failed) the run keeps the progress
  // it last had.
  // `assignment_id`: the assignment reported on (default: the current).
  absl::Status Report(const std::optional<RunProgress>& progress, bool finished,
                      const absl::Status& status,
                      std::optional<int64_t> assignment_id = std::nullopt);

 private:
  void Loop();

  const WorkerAgentOptions options_;
  std::function<void(const Assignment&)> on_assignment_;
  std::unique_ptr<WorkerService::Stub> stub_;
  NamedThread thread_;

  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::string worker_id_ ABSL_GUARDED_BY(mu_);
  // From the coordinator at registration; sent with every report.
  std::string worker_key_ ABSL_GUARDED_BY(mu_);
  Assignment current_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rl

#endif  // RL_WORKER_WORKER_AGENT_H_
