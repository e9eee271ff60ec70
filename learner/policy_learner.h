// One policy of a run's policies block trained on a learner of its own
// (proto/policy_learner.proto; docs/multi_agent.md#several-policies-per-run):
// the run's first learner (rank r of the run's gang: member r of the
// policy's gang) sends it the policy's rows of every batch; this updates
// the policy's network on them as a learner that trains every policy does
// (OtherPolicies::CreatePolicy and UpdatePolicy: the same seeds, so the same
// weights), answers with the weights, and writes, reads and prunes the policy's
// checkpoints under <run_dir>/policies/<name>/ checkpoints. Updates arrive in
// order: update n + 1 follows n, so a batch resent after a lost answer is
// refused rather than learned from twice. No gRPC here
// (policy_learner_service.h is the thin service).
#ifndef RL_LEARNER_POLICY_LEARNER_H_
#define RL_LEARNER_POLICY_LEARNER_H_

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "learner/collective.h"
#include "learner/other_policies.h"
#include "learner/policy_learner_client.h"
#include "policy/segment_codec.h"
#include "proto/common.pb.h"
#include "proto/policy_learner.pb.h"

namespace rl {

struct PolicyLearnerOptions {
  // The run (validated, defaults applied) and its id on the wire.
  RunSpec spec;
  std::string run_id;
  // The policy this learner trains: a name in spec.policies after the
  // first (the first is the run's own learner's).
  std::string policy;
  // Where its checkpoints go: <run_dir>/policies/<policy>/checkpoints.
  std::string run_dir;
  // The placement of the run's learners this one belongs to
  // (Assignment.gang_id); calls from another are UNAVAILABLE. Empty: any.
  std::string gang_id;
  torch::Device device = torch::kCPU;
  // The policy's gang (resources.num_learners > 1): this learner is member
  // `member` of `gang_size`, taking the rows of that rank of the run's
  // gang. The members all-reduce their gradients (JoinGang gives the
  // collective) and before each update take member 0's state where member
  // 0 has read a checkpoint since they last did; only member 0 writes,
  // reads and prunes the policy's checkpoints.
  int member = 0;
  int gang_size = 1;
  // As LearnerOptions.max_nonfinite_updates.
  int max_nonfinite_updates = 3;
  // Tests only: called as an update addressed here starts, before it takes
  // the learner's lock; while it runs, the call is in flight.
  std::function<void()> update_started;
};

class PolicyLearner {
 public:
  // INVALID_ARGUMENT naming `policy` when the run has no such policy after
  // its first.
  static absl::StatusOr<std::unique_ptr<PolicyLearner>> Create(
      PolicyLearnerOptions options);

  // A gang's collective (rank `member` of `gang_size`): until it is given,
  // updates are UNAVAILABLE (the caller retries) while checkpoint calls
  // are served, so that a resume can read member 0's checkpoint while the
  // members still meet. INVALID_ARGUMENT for a collective of another rank
  // or size, or a second one.
  absl::Status JoinGang(std::shared_ptr<Collective> gang)
      ABSL_LOCKS_EXCLUDED(mu_);

  // ABORTED for another run or policy, and for an update that does not
  // follow the last (the run's learners are then placed again);
  // UNAVAILABLE for a call from another placement of the run's learners
  // (the caller waits for this learner to take up its own);
  // INVALID_ARGUMENT naming the field for rows that are not the policy's
  // (shape, dtype, values); INTERNAL where the weights are no longer
  // finite (they are not answered with); the updater's errors as they are
  // (a setting it refuses is FAILED_PRECONDITION: the run fails). In a
  // gang also UNAVAILABLE before JoinGang, and ABORTED where another
  // member refused the update.
  absl::StatusOr<UpdatePolicyResponse> Update(
      const UpdatePolicyRequest& request) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<CheckpointPolicyResponse> Checkpoint(
      const CheckpointPolicyRequest& request) ABSL_LOCKS_EXCLUDED(mu_);

  const std::string& name() const { return options_.policy; }
  // The run's updates this policy has made (or was read back at).
  int64_t updates() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  explicit PolicyLearner(PolicyLearnerOptions options)
      : options_(std::move(options)) {}
  absl::Status CheckAddressed(const std::string& run_id,
                              const std::string& policy,
                              const std::string& gang_id) const;
  absl::Status Encode(NamedPolicyParameters* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The request's rows, checked as the update will check them, and on the
  // device; ABORTED for an update that does not follow the last.
  absl::StatusOr<Rollout> RowsOf(const UpdatePolicyRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A gang: member 0's update count, and its state where it read a
  // checkpoint since the members last took it. Every member calls it; its
  // error is the collective's, and `taken` says whether this member took
  // the state (the update is then refused on every member if not).
  absl::Status TakeMemberZeroState(absl::Status* taken)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A gang: every member's verdict on an update (`rows`), so that all make
  // it or none: a member whose rows were fine is ABORTED where another's
  // were not. Every member calls it.
  absl::Status AgreeOnUpdate(const absl::Status& rows, int64_t update)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const PolicyLearnerOptions options_;
  // The segment shape of the policy's rows but their count (a batch holds
  // any number of copies).
  SegmentShape shape_;
  mutable absl::Mutex mu_;
  OtherPolicies::Policy policy_ ABSL_GUARDED_BY(mu_);
  // The policy's PPO settings (its rows are checked against them).
  PPOConfig ppo_;
  std::shared_ptr<Collective> gang_ ABSL_GUARDED_BY(mu_);
  int64_t updates_ ABSL_GUARDED_BY(mu_) = 0;
  bool updated_ ABSL_GUARDED_BY(mu_) = false;  // made one since Create
  // Checkpoints read here (member 0 counts), and member 0's count when the
  // gang last took its state (-1: never).
  int64_t reads_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t synced_reads_ ABSL_GUARDED_BY(mu_) = -1;
};

}  // namespace rl

#endif  // RL_LEARNER_POLICY_LEARNER_H_
