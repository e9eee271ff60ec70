// A learner worker's workload: one LearnerCore per assignment, served
// through the process's LearnerService. Its progress and its end (budget
// used, target reached, or the error that stopped PPO) are what the worker
// runtime reports to the coordinator.
#ifndef RL_LEARNER_LEARNER_WORKLOAD_H_
#define RL_LEARNER_LEARNER_WORKLOAD_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "learner/learner_core.h"
#include "learner/learner_service.h"
#include "learner/policy_learner.h"
#include "learner/policy_learner_service.h"
#include "telemetry/client/emitter.h"
#include "worker/workload.h"

namespace rl {

class LearnerWorkload : public Workload {
 public:
  // `service` and `emitter` (may be null) must outlive this. `on_core` (may
  // be empty) is told of every core started or stopped (null), e.g. for
  // /metrics.
  //
  // An assignment with world_size > 1 is one rank of a gang: Start joins
  // it (c10d_collective.h) at the assignment's rendezvous, binding
  // `collective_address` (the address peers reach this host at), within
  // `rendezvous_timeout`.
  //
  // Every core shares `segment_budget` (null: none), the process's.
  //
  // With resources.learner_per_policy, the ranks of the policies after the
  // first (runspec/run_spec.h LearnerRoleOf) each train theirs as a member
  // of its gang (learner/policy_learner.h) through `policy_service` (null:
  // such an assignment fails), and rank r of the run's gang calls member r
  // of each.
  LearnerWorkload(
      LearnerServiceImpl* service, Emitter* emitter,
      std::function<void(std::shared_ptr<LearnerCore>)> on_core = nullptr,
      std::string collective_address = "127.0.0.1",
      absl::Duration rendezvous_timeout = absl::Seconds(60),
      std::shared_ptr<SegmentBudget> segment_budget = nullptr,
      PolicyLearnerServiceImpl* policy_service = nullptr);
  ~LearnerWorkload() override;

  absl::Status Start(const Assignment& assignment) override;
  // Every run's first `updates` updates traced (LearnerOptions).
  void set_profile(int updates, std::string path) {
    profile_updates_ = updates;
    profile_path_ = std::move(path);
  }
  WorkloadState Poll() override;
  void Stop() override;

 private:
  void SetCore(std::shared_ptr<LearnerCore> core, std::string run_key = "");
  // A learner of a policy after the first (resources.learner_per_policy):
  // a member of that policy's gang (LearnerRoleOf).
  absl::Status StartPolicyLearner(const Assignment& assignment,
                                  const std::function<bool()>& cancelled);
  // Joins gang `gang_id` as `rank` of the assignment's world_size, at the
  // run's rendezvous store.
  absl::StatusOr<std::unique_ptr<Collective>> JoinGang(
      const Assignment& assignment, int rank, const std::string& gang_id,
      const std::function<bool()>& cancelled);

  LearnerServiceImpl* const service_;
  Emitter* const emitter_;
  const std::function<void(std::shared_ptr<LearnerCore>)> on_core_;
  const std::string collective_address_;
  const absl::Duration rendezvous_timeout_;
  int profile_updates_ = 0;
  std::string profile_path_;
  const std::shared_ptr<SegmentBudget> segment_budget_;
  PolicyLearnerServiceImpl* const policy_service_;
  std::shared_ptr<LearnerCore> core_;
  // This rank trains one policy of a run's block (learner_per_policy).
  std::shared_ptr<PolicyLearner> policy_learner_;
};

}  // namespace rl

#endif  // RL_LEARNER_LEARNER_WORKLOAD_H_
