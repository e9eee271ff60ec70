// The run's first learner's end of PolicyLearnerService
// (proto/policy_learner.proto): one policy's learner of its own, called
// with the run's key and the placement's gang id. Each call has a
// deadline. A learner that is not there yet (placed at the same time,
// still starting, or still on an older placement) is waited for up to
// `ready_timeout`. A learner that is gone (unreachable after that, timed
// out) is ABORTED, as is one no longer where the run is (its own ABORTED:
// stopped, started again, another run's), so that the run's learner ends
// retryably and the coordinator places the run's learners again, each
// resuming from the run's last checkpoint; other errors keep their codes
// (a setting the policy's updater refuses fails the run). Every message
// names the policy and the address.
#ifndef RL_LEARNER_POLICY_LEARNER_CLIENT_H_
#define RL_LEARNER_POLICY_LEARNER_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/security.h"
#include "learner/ppo_update_stats.h"
#include "policy/rollout.h"
#include "proto/common.pb.h"
#include "proto/policy_learner.grpc.pb.h"

namespace rl {

struct PolicyLearnerClientOptions {
  // host:port of the policy's learner.
  std::string address;
  std::string run_id;
  std::string policy;
  // The run's key (Assignment.run_key); empty: none presented.
  std::string run_key;
  // TLS and the bearer token (null: the process default).
  std::shared_ptr<const Security> security;
  // Assignment.gang_id of the caller's placement.
  std::string gang_id;
  // True once the caller's assignment is being replaced (a newer one
  // waits): a call stops retrying, as after StopWaiting. Null: never.
  std::function<bool()> cancelled;
  // Per call: an update takes as long as the policy's PPO update there.
  absl::Duration deadline = absl::Minutes(60);
  // How long a call waits for a learner that is not there yet.
  absl::Duration ready_timeout = absl::Minutes(5);
  // The largest batch of rows sent (the policy learner's --max_message_mb
  // bounds what it takes).
  int max_send_message_bytes = 2047 << 20;
};

// The figures of an update, both ways.
PolicyUpdateFigures PolicyUpdateFiguresOf(const UpdateStats& stats);
UpdateStats UpdateStatsOf(const PolicyUpdateFigures& figures);

class PolicyLearnerClient {
 public:
  explicit PolicyLearnerClient(PolicyLearnerClientOptions options);

  const std::string& policy() const { return options_.policy; }
  const std::string& address() const { return options_.address; }

  // Update `update` of the policy on its `rows` of a batch of `env`.
  absl::StatusOr<UpdatePolicyResponse> Update(const Rollout& rows,
                                              const EnvSpec& env,
                                              int64_t update,
                                              int64_t env_steps_before);
  // The run's learner stops: the call in flight is cancelled (ABORTED) and
  // later calls make one attempt each, waiting for no learner that is not
  // there. Thread-safe.
  void StopWaiting() ABSL_LOCKS_EXCLUDED(mu_);

  // READ: `run_checkpoint` the run's checkpoint to read beside.
  absl::StatusOr<CheckpointPolicyResponse> Checkpoint(
      CheckpointPolicyRequest::Action action, int64_t updates,
      const std::vector<int64_t>& keep = {},
      const std::string& run_checkpoint = "");

 private:
  std::unique_ptr<grpc::ClientContext> Context() const;
  // `call` (one attempt with a fresh context), again while the learner is
  // not there yet, its status mapped as the top says and prefixed `where`.
  absl::Status Call(
      const std::function<grpc::Status(grpc::ClientContext*)>& call,
      const std::string& where) ABSL_LOCKS_EXCLUDED(mu_);

  const PolicyLearnerClientOptions options_;
  std::unique_ptr<PolicyLearnerService::Stub> stub_;
  mutable absl::Mutex mu_;
  grpc::ClientContext* current_ ABSL_GUARDED_BY(mu_) = nullptr;  // in flight
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // StopWaiting was called, or options_.cancelled says so.
  bool Stopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || (options_.cancelled && options_.cancelled());
  }
};

}  // namespace rl

#endif  // RL_LEARNER_POLICY_LEARNER_CLIENT_H_
