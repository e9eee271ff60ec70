// An actor worker's workload: one ActorClient per assignment, run in its
// own thread, streaming to the assignment's learner. It ends when the
// learner sends its final policy (or fails, e.g. the learner unreachable
// for too long); a new assignment stops it first.
#ifndef RL_ACTOR_ACTOR_WORKLOAD_H_
#define RL_ACTOR_ACTOR_WORKLOAD_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "actor/actor_client.h"
#include "common/security.h"
#include "common/thread.h"
#include "worker/workload.h"

namespace rl {

struct ActorWorkloadOptions {
  // The learner channels' TLS and token (null: Security::ProcessDefault()).
  std::shared_ptr<const Security> security;
  int env_threads = 1;
  std::vector<std::string> env_plugin_dirs;  // ActorOptions'
  bool shared_memory = true;                 // ActorOptions'
  int profile_segments = 0;                  // ActorOptions'
  std::string profile_path;                  // ActorOptions'
  absl::Duration max_disconnected = absl::Seconds(120);
  Emitter* emitter = nullptr;  // not owned; null: none
  // When a run ends and this process's resident memory is over this many
  // bytes (0: no limit), `recycle` is called with it: a leaking plugin
  // must not keep its memory for the next user's run. The actor process
  // ends itself there (kRecycledExitCode) for its supervisor to restart.
  int64_t max_rss_bytes = 0;
  std::function<void(int64_t rss_bytes)> recycle;
};

class ActorWorkload : public Workload {
 public:
  explicit ActorWorkload(const ActorWorkloadOptions& options);
  ~ActorWorkload() override;

  absl::Status Start(const Assignment& assignment) override;
  WorkloadState Poll() override;
  void Stop() override;
  // After a run's end was reported: over max_rss_bytes, `recycle`.
  void Idle() override;

  // The assignment this workload runs (0: none yet). Thread-safe.
  int64_t assignment_id() const { return assignment_id_.load(); }

  // The current assignment's run and its actor's counters; nullopt when
  // idle. Thread-safe (the process's /metrics reads it).
  std::optional<std::pair<std::string, ActorCounters>> Counters() const
      ABSL_LOCKS_EXCLUDED(client_mu_);

 private:
  const ActorWorkloadOptions options_;
  std::atomic<int64_t> assignment_id_{0};
  // Held while client_ changes and while Counters() reads it.
  mutable absl::Mutex client_mu_;
  std::unique_ptr<ActorClient> client_;
  std::string run_id_ ABSL_GUARDED_BY(client_mu_);
  NamedThread runner_;

  absl::Mutex mu_;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status result_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rl

#endif  // RL_ACTOR_ACTOR_WORKLOAD_H_
