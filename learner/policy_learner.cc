#include "learner/policy_learner.h"

#include <filesystem>
#include <limits>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status.h"
#include "learner/checkpoint.h"
#include "learner/rollout_check.h"
#include "learner/run_intake.h"
#include "policy/policy_codec.h"
#include "policy/torch_status.h"
#include "runspec/named_policies.h"

namespace rl {

absl::StatusOr<std::unique_ptr<PolicyLearner>> PolicyLearner::Create(
    PolicyLearnerOptions options) {
  int index = -1;
  for (int i = 1; i < options.spec.policies_size(); ++i) {
    if (options.spec.policies(i).name() == options.policy) index = i;
  }
  if (index < 0) {
    std::string names;
    for (int i = 1; i < options.spec.policies_size(); ++i) {
      absl::StrAppend(&names, i > 1 ? ", " : "",
                      options.spec.policies(i).name());
    }
    return absl::InvalidArgumentError(
        absl::StrCat("policy \"", options.policy, "\": not a policy of run ",
                     options.run_id, " after its first (",
                     names.empty() ? "it has no policies block" : names, ")"));
  }
  std::unique_ptr<PolicyLearner> learner(new PolicyLearner(std::move(options)));
  const PolicyLearnerOptions& o = learner->options_;
  if (o.gang_size < 1 || o.member < 0 || o.member >= o.gang_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("member ", o.member, " of a gang of ", o.gang_size));
  }
  learner->ppo_ = NamedPolicyRun(o.spec, index).ppo();
  learner->shape_ = RunSegmentShape(NamedPolicyRun(o.spec, index));
  learner->shape_.episodes = false;  // a batch's rows: the run's learner
                                     // counted their episodes
  absl::MutexLock lock(&learner->mu_);
  ASSIGN_OR_RETURN(learner->policy_,
                   OtherPolicies::CreatePolicy(o.spec, index, o.device, nullptr,
                                               o.max_nonfinite_updates));
  return learner;
}

absl::Status PolicyLearner::JoinGang(std::shared_ptr<Collective> gang) {
  absl::MutexLock lock(&mu_);
  if (gang == nullptr || gang_ != nullptr || gang->rank() != options_.member ||
      gang->world_size() != options_.gang_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "policy ", options_.policy, ": member ", options_.member, " of ",
        options_.gang_size, " given ",
        gang == nullptr
            ? std::string("no collective")
            : absl::StrCat("rank ", gang->rank(), " of ", gang->world_size()),
        gang_ != nullptr ? " after joining its gang" : ""));
  }
  gang_ = std::move(gang);
  policy_.updater->set_collective(gang_.get());
  return absl::OkStatus();
}

absl::Status PolicyLearner::CheckAddressed(const std::string& run_id,
                                           const std::string& policy,
                                           const std::string& gang_id) const {
  if (run_id != options_.run_id || policy != options_.policy) {
    return absl::AbortedError(absl::StrCat(
        "this learner trains policy \"", options_.policy, "\" of run ",
        options_.run_id, ", not policy \"", policy, "\" of run ", run_id));
  }
  if (!options_.gang_id.empty() && gang_id != options_.gang_id) {
    return absl::UnavailableError(absl::StrCat(
        "this learner of policy ", options_.policy, " belongs to placement ",
        options_.gang_id, " of the run's learners, the call to placement ",
        gang_id.empty() ? "(none)" : gang_id,
        " (one of them is not taken up yet, or is being stopped)"));
  }
  return absl::OkStatus();
}

absl::Status PolicyLearner::Encode(NamedPolicyParameters* out) {
  out->set_name(options_.policy);
  return EncodePolicyTensors(policy_.policy, out->mutable_parameters());
}

int64_t PolicyLearner::updates() const {
  absl::MutexLock lock(&mu_);
  return updates_;
}

absl::StatusOr<Rollout> PolicyLearner::RowsOf(
    const UpdatePolicyRequest& request) {
  if (request.update() != updates_ + 1) {
    return absl::AbortedError(
        absl::StrCat("policy ", options_.policy, ": update ", request.update(),
                     " does not follow its last, ", updates_));
  }
  // Any number of copies: the shape but the rows' count is the run's.
  const auto& rewards = request.rows().rewards().shape();
  if (rewards.size() != 2 || rewards[1] <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rows.rewards: shape [", absl::StrJoin(rewards, ", "),
                     "]; expected [T, rows] with rows > 0"));
  }
  SegmentShape shape = shape_;
  shape.num_envs = rewards[1];
  absl::StatusOr<Rollout> rows = DecodeSegment(request.rows(), shape);
  if (!rows.ok()) return Prefixed(rows.status(), "rows");
  absl::StatusOr<Rollout> here =
      CatchTorchErrors(absl::StrCat("policy ", options_.policy, ": rows to ",
                                    options_.device.str()),
                       [&] { return rows->To(options_.device); });
  RETURN_IF_ERROR(here.status());
  // In a gang, as the update will check them (once more, then: one
  // read-back), so that a member is never the only one to refuse its rows
  // inside the update's all-reduces.
  if (gang_ != nullptr) {
    RETURN_IF_ERROR(
        Prefixed(CheckRolloutForUpdate(*here, *policy_.policy, ppo_),
                 absl::StrCat("policy ", options_.policy, ": update ",
                              request.update())));
  }
  return here;
}

absl::Status PolicyLearner::TakeMemberZeroState(absl::Status* taken) {
  Collective& gang = *gang_;
  torch::Tensor head = torch::tensor({reads_, updates_}, torch::kInt64);
  RETURN_IF_ERROR(Prefixed(
      gang.Broadcast(head, 0),
      absl::StrCat("policy ", options_.policy, ": member 0's update count")));
  const int64_t reads = head[0].item<int64_t>();
  if (reads == synced_reads_) return absl::OkStatus();
  // Every member takes the same branch next time too, whatever happens
  // here on one of them (AgreeOnUpdate then refuses the update on all).
  synced_reads_ = reads;
  TensorMap extra;
  *taken = OtherPolicies::BroadcastRankZeroState(gang, policy_, &extra);
  if (!taken->ok()) return absl::OkStatus();
  *taken = OtherPolicies::TakeRankZeroStream(policy_, extra);
  if (taken->ok()) updates_ = head[1].item<int64_t>();
  return absl::OkStatus();
}

absl::Status PolicyLearner::AgreeOnUpdate(const absl::Status& rows,
                                          int64_t update) {
  torch::Tensor refused = torch::tensor({rows.ok() ? 0 : 1}, torch::kInt64);
  RETURN_IF_ERROR(gang_->AllReduce(refused, ReduceOp::kMax));
  if (rows.ok() && refused.item<int64_t>() > 0) {
    return absl::AbortedError(absl::StrCat(
        "policy ", options_.policy, ": update ", update,
        " was refused by another member of its gang (its rows, or the "
        "update's number)"));
  }
  return rows;
}

absl::StatusOr<UpdatePolicyResponse> PolicyLearner::Update(
    const UpdatePolicyRequest& request) {
  RETURN_IF_ERROR(
      CheckAddressed(request.run_id(), request.policy(), request.gang_id()));
  if (options_.update_started) options_.update_started();
  absl::MutexLock lock(&mu_);
  // A gang: the collective calls first, on every member, then what can
  // fail on one alone (a member that returned between them would leave
  // the others waiting).
  if (options_.gang_size > 1 && gang_ == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "member ", options_.member, " of policy ", options_.policy,
        "'s gang is still meeting the other ", options_.gang_size - 1));
  }
  absl::Status taken;
  if (gang_ != nullptr) RETURN_IF_ERROR(TakeMemberZeroState(&taken));
  absl::StatusOr<Rollout> here =
      taken.ok() ? RowsOf(request) : absl::StatusOr<Rollout>(taken);
  if (gang_ != nullptr) {
    RETURN_IF_ERROR(AgreeOnUpdate(here.status(), request.update()));
  }
  RETURN_IF_ERROR(here.status());
  RETURN_IF_ERROR(OtherPolicies::UpdatePolicy(
      policy_, *here, request.env_steps_before(), request.update()));
  ASSIGN_OR_RETURN(const std::string nonfinite,
                   FirstNonFiniteWeight(policy_.policy));
  if (!nonfinite.empty()) {
    return absl::InternalError(absl::StrCat(
        "after update ", request.update(), " policy ", options_.policy,
        "'s weights are not finite (NaN or inf in ", nonfinite,
        "); they were not published or checkpointed. Lower its "
        "ppo.learning_rate, or check the scale of the rewards"));
  }
  if (!updated_) {
    RL_LOG_INFO(
        "policy {} of run {}: its first update here, update {} of "
        "the run's learner",
        options_.policy, options_.run_id, request.update());
    updated_ = true;
  }
  updates_ = request.update();
  UpdatePolicyResponse response;
  RETURN_IF_ERROR(Encode(response.mutable_parameters()));
  *response.mutable_figures() = PolicyUpdateFiguresOf(policy_.last_update);
  return response;
}

absl::StatusOr<CheckpointPolicyResponse> PolicyLearner::Checkpoint(
    const CheckpointPolicyRequest& request) {
  RETURN_IF_ERROR(
      CheckAddressed(request.run_id(), request.policy(), request.gang_id()));
  namespace fs = std::filesystem;
  const fs::path root = PolicyCheckpointRoot(options_.run_dir, options_.policy);
  absl::MutexLock lock(&mu_);
  if (options_.member != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "policy ", options_.policy, ": member ", options_.member,
        " of its gang; member 0 writes, reads and prunes its checkpoints"));
  }
  CheckpointPolicyResponse response;
  switch (request.action()) {
    case CheckpointPolicyRequest::WRITE:
      if (request.updates() != updates_) {
        return absl::AbortedError(absl::StrCat(
            "policy ", options_.policy, ": a checkpoint of update ",
            request.updates(), " asked for at update ", updates_));
      }
      RETURN_IF_ERROR(WritePolicyCheckpoint(
          options_.run_dir, options_.policy, updates_, policy_.policy,
          *policy_.updater, std::numeric_limits<int>::max()));
      response.set_path((root / CheckpointName(updates_)).string());
      return response;
    case CheckpointPolicyRequest::READ: {
      // The policy's lies beside the run's checkpoint (this run's, or the
      // run it starts from), numbered alike.
      if (request.run_checkpoint().empty()) {
        return absl::InvalidArgumentError(
            "run_checkpoint: the run's checkpoint to read beside is required");
      }
      RETURN_IF_ERROR(ReadPolicyCheckpoint(request.run_checkpoint(),
                                           options_.policy, policy_.policy,
                                           *policy_.updater));
      updates_ = request.updates();
      ++reads_;  // the gang takes this state before its next update
      RETURN_IF_ERROR(Encode(response.mutable_parameters()));
      return response;
    }
    case CheckpointPolicyRequest::PRUNE:
      RETURN_IF_ERROR(Prefixed(
          PruneCheckpoints(
              root.string(),
              std::set<int64_t>(request.keep().begin(), request.keep().end())),
          absl::StrCat("policy ", options_.policy)));
      return response;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("action: ", static_cast<int>(request.action()),
                       "; one of WRITE, READ, PRUNE"));
  }
}

}  // namespace rl
