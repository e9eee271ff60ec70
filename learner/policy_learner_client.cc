#include "learner/policy_learner_client.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/grpc_util.h"
#include "common/secrets.h"
#include "common/status.h"
#include "policy/segment_codec.h"

namespace rl {

PolicyUpdateFigures PolicyUpdateFiguresOf(const UpdateStats& stats) {
  PolicyUpdateFigures f;
  f.set_policy_loss(stats.policy_loss);
  f.set_value_loss(stats.value_loss);
  f.set_entropy(stats.entropy);
  f.set_approx_kl(stats.approx_kl);
  f.set_clip_fraction(stats.clip_fraction);
  f.set_explained_variance(stats.explained_variance);
  f.set_grad_norm(stats.grad_norm);
  f.set_learning_rate(stats.learning_rate);
  f.set_epochs(stats.epochs);
  f.set_gae_seconds(stats.gae_seconds);
  f.set_nonfinite_minibatches(stats.nonfinite_minibatches);
  f.set_consecutive_nonfinite_updates(stats.consecutive_nonfinite_updates);
  return f;
}

UpdateStats UpdateStatsOf(const PolicyUpdateFigures& f) {
  UpdateStats stats;
  stats.policy_loss = f.policy_loss();
  stats.value_loss = f.value_loss();
  stats.entropy = f.entropy();
  stats.approx_kl = f.approx_kl();
  stats.clip_fraction = f.clip_fraction();
  stats.explained_variance = f.explained_variance();
  stats.grad_norm = f.grad_norm();
  stats.learning_rate = f.learning_rate();
  stats.epochs = f.epochs();
  stats.gae_seconds = f.gae_seconds();
  stats.nonfinite_minibatches = f.nonfinite_minibatches();
  stats.consecutive_nonfinite_updates = f.consecutive_nonfinite_updates();
  return stats;
}

PolicyLearnerClient::PolicyLearnerClient(PolicyLearnerClientOptions options)
    : options_(std::move(options)) {
  ChannelOptions channel;
  channel.security = options_.security;
  channel.max_send_message_bytes = options_.max_send_message_bytes;
  channel.max_receive_message_bytes = 256 << 20;  // the policy's weights
  stub_ =
      PolicyLearnerService::NewStub(CreateChannel(options_.address, channel));
}

std::unique_ptr<grpc::ClientContext> PolicyLearnerClient::Context() const {
  std::unique_ptr<grpc::ClientContext> context =
      ContextWithDeadline(options_.deadline);
  if (!options_.run_key.empty()) {
    context->AddMetadata(kRunKeyMetadata, options_.run_key);
  }
  return context;
}

void PolicyLearnerClient::StopWaiting() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
  if (current_ != nullptr) current_->TryCancel();
}

absl::Status PolicyLearnerClient::Call(
    const std::function<grpc::Status(grpc::ClientContext*)>& call,
    const std::string& where) {
  const absl::Time give_up = absl::Now() + options_.ready_timeout;
  absl::Duration backoff = absl::Milliseconds(50);
  absl::Status status;
  bool stopping = false;  // when the last attempt ended
  while (true) {
    std::unique_ptr<grpc::ClientContext> context = Context();
    {
      absl::MutexLock lock(&mu_);
      current_ = context.get();
    }
    status = FromGrpcStatus(call(context.get()));
    {
      absl::MutexLock lock(&mu_);
      current_ = nullptr;
      stopping = Stopping();
    }
    if (status.code() != absl::StatusCode::kUnavailable || stopping ||
        absl::Now() + backoff > give_up) {
      break;
    }
    {
      // A stop during the wait ends it: no attempt starts after a stop.
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stopping_), backoff);
      stopping = Stopping();
    }
    if (stopping) break;
    backoff = std::min(backoff * 2, absl::Seconds(2));
  }
  if (stopping && (status.code() == absl::StatusCode::kCancelled ||
                   status.code() == absl::StatusCode::kUnavailable)) {
    return absl::AbortedError(absl::StrCat(where, ": ", status.message(),
                                           " (the run's learner is stopping)"));
  }
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kCancelled:
      return absl::AbortedError(
          absl::StrCat(where, ": ", status.message(),
                       " (the policy's learner is gone: the run's learners "
                       "are placed again)"));
    default:  // ABORTED (the policy's learner is not where the run is) too
      return Prefixed(status, where);
  }
}

absl::StatusOr<UpdatePolicyResponse> PolicyLearnerClient::Update(
    const Rollout& rows, const EnvSpec& env, int64_t update,
    int64_t env_steps_before) {
  const std::string where =
      absl::StrCat("policy ", options_.policy, "'s learner at ",
                   options_.address, ": update ", update);
  UpdatePolicyRequest request;
  request.set_run_id(options_.run_id);
  request.set_policy(options_.policy);
  request.set_update(update);
  request.set_env_steps_before(env_steps_before);
  request.set_gang_id(options_.gang_id);
  RolloutSegment* segment = request.mutable_rows();
  segment->set_run_id(options_.run_id);
  *segment->mutable_env() = env;
  RETURN_IF_ERROR(Prefixed(EncodeSegment(rows, segment), where));
  UpdatePolicyResponse response;
  RETURN_IF_ERROR(Call(
      [&](grpc::ClientContext* context) {
        return stub_->UpdatePolicy(context, request, &response);
      },
      where));
  return response;
}

absl::StatusOr<CheckpointPolicyResponse> PolicyLearnerClient::Checkpoint(
    CheckpointPolicyRequest::Action action, int64_t updates,
    const std::vector<int64_t>& keep, const std::string& run_checkpoint) {
  CheckpointPolicyRequest request;
  request.set_run_id(options_.run_id);
  request.set_policy(options_.policy);
  request.set_action(action);
  request.set_updates(updates);
  request.mutable_keep()->Add(keep.begin(), keep.end());
  request.set_run_checkpoint(run_checkpoint);
  request.set_gang_id(options_.gang_id);
  CheckpointPolicyResponse response;
  RETURN_IF_ERROR(Call(
      [&](grpc::ClientContext* context) {
        return stub_->CheckpointPolicy(context, request, &response);
      },
      absl::StrCat("policy ", options_.policy, "'s learner at ",
                   options_.address, ": checkpoint ", updates, " (",
                   CheckpointPolicyRequest::Action_Name(action), ")")));
  return response;
}

}  // namespace rl
