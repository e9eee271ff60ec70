// PolicyLearnerService (proto/policy_learner.proto): the calls of a run's
// first learner to the learner of one of its other policies, turned into
// PolicyLearner's. Only the run's own learner may call: it presents the
// run's key (Assignment.run_key, metadata x-rl-run-key); an actor's key,
// another run's or none is PERMISSION_DENIED. Before the first SetLearner
// every call is UNAVAILABLE (the caller waits); once a learner is
// stopped, a call of its placement (gang id) is ABORTED, even after the
// next placement's learner is taken up, and any other placement's waits
// (UNAVAILABLE) until its own is here. The calls run on gRPC's synchronous
// threads: an update takes as long as the policy's PPO update; SetLearner waits
// for the calls in flight to end, so that a stopped learner is no longer used.
#ifndef RL_LEARNER_POLICY_LEARNER_SERVICE_H_
#define RL_LEARNER_POLICY_LEARNER_SERVICE_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "learner/policy_learner.h"
#include "proto/policy_learner.grpc.pb.h"

namespace rl {

class PolicyLearnerServiceImpl final : public PolicyLearnerService::Service {
 public:
  // `learner` null: none (stopped); `run_key` empty: no key asked for
  // (tests, a learner started by hand); `gang_id`: the placement it
  // belongs to (Assignment.gang_id).
  void SetLearner(std::shared_ptr<PolicyLearner> learner, std::string run_key,
                  std::string gang_id = "") ABSL_LOCKS_EXCLUDED(mu_);

  grpc::Status UpdatePolicy(grpc::ServerContext* context,
                            const UpdatePolicyRequest* request,
                            UpdatePolicyResponse* response) override;
  grpc::Status CheckpointPolicy(grpc::ServerContext* context,
                                const CheckpointPolicyRequest* request,
                                CheckpointPolicyResponse* response) override;

 private:
  // OK: `learner` is the current one, and the call counts as in flight
  // until Done().
  grpc::Status Admit(const grpc::ServerContext& context,
                     const std::string& gang_id,
                     std::shared_ptr<PolicyLearner>* learner)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Done() ABSL_LOCKS_EXCLUDED(mu_);
  // Admit, `call` on the current learner, Done; its answer into `response`.
  template <typename Request, typename Response>
  grpc::Status Serve(
      const grpc::ServerContext& context, const Request& request,
      absl::StatusOr<Response> (PolicyLearner::*call)(const Request&),
      Response* response) ABSL_LOCKS_EXCLUDED(mu_);

  absl::Mutex mu_;
  std::shared_ptr<PolicyLearner> learner_ ABSL_GUARDED_BY(mu_);
  std::string run_key_ ABSL_GUARDED_BY(mu_);
  std::string gang_ ABSL_GUARDED_BY(mu_);
  // The last learner stopped ("policy blue of its run") and its placement
  // (empty: none stopped yet).
  std::string stopped_ ABSL_GUARDED_BY(mu_);
  std::string stopped_gang_ ABSL_GUARDED_BY(mu_);
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace rl

#endif  // RL_LEARNER_POLICY_LEARNER_SERVICE_H_
