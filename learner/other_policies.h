// A learner that trains every policy of a run of several (RunSpec.policies;
// docs/multi_agent.md#several-policies-per-run): the first policy is the
// learner's own (its checkpoints are the run's); this holds the others,
// each with its network, its own PPO updater and settings (NamedPolicyRun),
// and the rows of the batch its agents play. They update on their rows,
// one after another in the run's order (the learner runs them beside the
// first's update when alone, after it in a gang: every rank runs the same
// all-reduces in the same order), are published beside the first
// (PolicyUpdate.policies), and keep their checkpoints under
// <run_dir>/policies/<name>/checkpoints, numbered as the run's.
//
// With resources.learner_per_policy each of them is trained by a learner of
// its own, or a gang of them (learner/policy_learner.h): this then keeps a
// copy of its network for publishing, sends its rows of every batch there
// (all such policies at once, beside the first's update, in a gang too:
// the copies take no part in this gang's all-reduces), takes the weights
// it answers with, and (rank 0) asks it to write, read and prune its
// checkpoints.
#ifndef RL_LEARNER_OTHER_POLICIES_H_
#define RL_LEARNER_OTHER_POLICIES_H_

#include <torch/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "learner/checkpoint.h"
#include "learner/collective.h"
#include "learner/policy_learner_client.h"
#include "learner/ppo_updater.h"
#include "policy/actor_critic.h"
#include "policy/rollout.h"
#include "proto/common.pb.h"
#include "proto/learner.pb.h"

namespace rl {

class Emitter;

// Policy `name`'s checkpoint of `updates` (its weights, optimizer and
// shuffling stream) under <run_dir>/policies/<name>/checkpoints, keeping
// its `keep` newest; rl_local's and the learner's alike.
absl::Status WritePolicyCheckpoint(const std::string& run_dir,
                                   const std::string& name, int64_t updates,
                                   ActorCritic& policy, PpoUpdater& updater,
                                   int keep);
// Policy `name`'s checkpoint of the same number as the run's checkpoint
// `run_checkpoint` (<dir>/checkpoints/ckpt-N: <dir>/policies/<name>/
// checkpoints/ckpt-N) into `policy` and `updater`; errors name the policy.
absl::Status ReadPolicyCheckpoint(const std::string& run_checkpoint,
                                  const std::string& name, ActorCritic& policy,
                                  PpoUpdater& updater);

class OtherPolicies {
 public:
  struct Policy {
    std::string name;
    int index = 0;  // in the run's policies block
    ActorCritic policy{nullptr};
    std::unique_ptr<PpoUpdater> updater;
    UpdateStats last_update;
    // Its learner of its own (null: trained here).
    std::shared_ptr<PolicyLearnerClient> remote;
  };

  // The learners of their own (resources.learner_per_policy): addresses[i]
  // trains policy i + 1; `client` holds what every call shares (run id and
  // key, security, deadline). Empty: every policy is trained here.
  struct Remotes {
    std::vector<std::string> addresses;
    PolicyLearnerClientOptions client;
  };

  // Policies 1.. of `spec`'s policies block (none without one) on `device`,
  // each seeded with spec.seed() + its index (as rl_local seeds them), in a
  // gang of `collective` (null: alone).
  static absl::StatusOr<OtherPolicies> Create(const RunSpec& spec,
                                              torch::Device device,
                                              Collective* collective,
                                              int max_nonfinite_updates,
                                              const Remotes& remotes = {});

  // Policy `index` (>= 1) of `spec`'s policies block alone, as Create
  // makes each (a learner of its own for it: learner/policy_learner.h).
  static absl::StatusOr<Policy> CreatePolicy(const RunSpec& spec, int index,
                                             torch::Device device,
                                             Collective* collective,
                                             int max_nonfinite_updates);
  // `p`'s PPO update on its `rows` (on its device), making the run's update
  // `update`; errors name the policy and the update.
  static absl::Status UpdatePolicy(Policy& p, const Rollout& rows,
                                   int64_t env_steps_before, int64_t update);

  bool empty() const { return policies_.empty(); }
  const std::vector<Policy>& policies() const { return policies_; }
  // The first policy's rows of `rollout` (a batch of whole copies; all of
  // it without a policies block): the learner's own policy updates on
  // these.
  Rollout FirstRows(const Rollout& rollout) const;

  // Each policy's update on its rows of `rollout` (on the host; `to_device`
  // takes each one's part where the updates run); errors name the policy.
  using ToDevice = std::function<absl::StatusOr<Rollout>(Rollout)>;
  absl::Status Update(const Rollout& rollout, int64_t env_steps_before,
                      int64_t update, const ToDevice& to_device);
  // INTERNAL naming the policy and the tensor where a weight is not
  // finite.
  absl::Status CheckWeightsFinite(int64_t update);

  // The learner stops: calls to the policies' learners of their own stop
  // waiting (PolicyLearnerClient::StopWaiting). Thread-safe.
  void StopWaiting();

  // Their weights, into update->policies.
  absl::Status Encode(PolicyUpdate* update);

  // Writes their checkpoints of `updates` under run_dir (before the run's:
  // a resume looks for the run's, and theirs must be there by then),
  // pruning none: a run checkpoint that then fails to be written must not
  // have cost them the ones the run's older checkpoints need.
  absl::Status Write(const std::string& run_dir, int64_t updates);
  // Removes each one's checkpoints that have no run checkpoint of the same
  // number under <run_dir>/checkpoints (after the run's were written and
  // pruned to its keep_checkpoints).
  absl::Status Prune(const std::string& run_dir);
  // Reads theirs of the same number as the run's checkpoint
  // `run_checkpoint` (<dir>/checkpoints/ckpt-N: <dir>/policies/<name>/
  // checkpoints/ckpt-N).
  absl::Status Read(const std::string& run_checkpoint);

  // A gang: every rank takes rank 0's weights, optimizer state and
  // shuffling stream of each.
  absl::Status ShareRankZeroState(Collective& collective);
  // The same for one policy, in two steps: the broadcasts (every rank
  // calls them; rank 0's shuffling stream comes back in `extra`), then
  // taking the stream (the same bytes on every rank, so it fails on all or
  // none).
  static absl::Status BroadcastRankZeroState(Collective& collective, Policy& p,
                                             TensorMap* extra);
  static absl::Status TakeRankZeroStream(Policy& p, const TensorMap& extra);
  // True when every policy here is trained on a learner of its own.
  bool remote() const;
  // A gang: DATA_LOSS naming the policy where the ranks' weights differ.
  absl::Status CheckInSync(Collective& collective, int64_t updates);

  // Each one's update figures, labelled {policy: name}.
  void EmitUpdates(Emitter* emitter, int64_t step, double seconds,
                   int64_t updates, int grad_norm_interval) const;

 private:
  // `p`'s update on its learner of its own, its answer taken.
  absl::Status UpdateRemote(Policy& p, const Rollout& rows,
                            int64_t env_steps_before, int64_t update);
  // Weights its learner sent into `p`'s copy.
  static absl::Status Take(Policy& p, const NamedPolicyParameters& parameters);

  RunSpec spec_;
  std::vector<Policy> policies_;
};

}  // namespace rl

#endif  // RL_LEARNER_OTHER_POLICIES_H_
