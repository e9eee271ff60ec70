#include "learner/policy_learner_service.h"

#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/secrets.h"

namespace rl {

void PolicyLearnerServiceImpl::SetLearner(
    std::shared_ptr<PolicyLearner> learner, std::string run_key,
    std::string gang_id) {
  absl::MutexLock lock(&mu_);
  if (learner == nullptr && learner_ != nullptr) {
    stopped_gang_ = gang_;
    stopped_ = absl::StrCat("policy ", learner_->name(), " of its run");
  }
  learner_ = std::move(learner);
  run_key_ = std::move(run_key);
  gang_ = std::move(gang_id);
  // The calls that took the previous learner end before it is gone.
  mu_.Await(absl::Condition(
      +[](int* in_flight) { return *in_flight == 0; }, &in_flight_));
}

grpc::Status PolicyLearnerServiceImpl::Admit(
    const grpc::ServerContext& context, const std::string& gang_id,
    std::shared_ptr<PolicyLearner>* learner) {
  absl::MutexLock lock(&mu_);
  // A call of the placement stopped here ends at once, whether or not this
  // learner has taken up the next.
  if (!stopped_.empty() && gang_id == stopped_gang_ && gang_id != gang_) {
    return grpc::Status(
        grpc::StatusCode::ABORTED,
        absl::StrCat("this learner stopped training ", stopped_,
                     " (the run ended, or its learners are placed again)"));
  }
  if (learner_ == nullptr) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "this learner trains no policy yet");
  }
  if (!run_key_.empty()) {
    const auto& metadata = context.client_metadata();
    const auto it = metadata.find(kRunKeyMetadata);
    const absl::string_view presented =
        it == metadata.end()
            ? absl::string_view()
            : absl::string_view(it->second.data(), it->second.size());
    if (!ConstantTimeEquals(presented, run_key_)) {
      return grpc::Status(
          grpc::StatusCode::PERMISSION_DENIED,
          absl::StrCat(presented.empty() ? "no" : "a wrong", " ",
                       kRunKeyMetadata,
                       ": a policy learner takes calls only from its run's "
                       "own learner"));
    }
  }
  *learner = learner_;
  ++in_flight_;
  return grpc::Status::OK;
}

void PolicyLearnerServiceImpl::Done() {
  absl::MutexLock lock(&mu_);
  --in_flight_;
}

template <typename Request, typename Response>
grpc::Status PolicyLearnerServiceImpl::Serve(
    const grpc::ServerContext& context, const Request& request,
    absl::StatusOr<Response> (PolicyLearner::*call)(const Request&),
    Response* response) {
  std::shared_ptr<PolicyLearner> learner;
  if (grpc::Status admitted = Admit(context, request.gang_id(), &learner);
      !admitted.ok()) {
    return admitted;
  }
  absl::StatusOr<Response> result = [&] {
    // The learner is let go before the call counts as done, so that a stop
    // waiting for the calls in flight also waits for this reference.
    const absl::Cleanup done = [&] {
      learner.reset();
      Done();
    };
    return ((*learner).*call)(request);
  }();
  if (result.ok()) *response = *std::move(result);
  return ToGrpcStatus(result.status());
}

grpc::Status PolicyLearnerServiceImpl::UpdatePolicy(
    grpc::ServerContext* context, const UpdatePolicyRequest* request,
    UpdatePolicyResponse* response) {
  return Serve(*context, *request, &PolicyLearner::Update, response);
}

grpc::Status PolicyLearnerServiceImpl::CheckpointPolicy(
    grpc::ServerContext* context, const CheckpointPolicyRequest* request,
    CheckpointPolicyResponse* response) {
  return Serve(*context, *request, &PolicyLearner::Checkpoint, response);
}

}  // namespace rl
