#include "learner/policy_learner_service.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/secrets.h"

namespace rl {

void PolicyLearnerServiceImpl::SetLearner(
    std::shared_ptr<PolicyLearner> learner, std::string run_key) {
  absl::MutexLock lock(&mu_);
  learner_ = std::move(learner);
  run_key_ = std::move(run_key);
}

grpc::Status PolicyLearnerServiceImpl::Admit(
    const grpc::ServerContext& context,
    std::shared_ptr<PolicyLearner>* learner) {
  std::string run_key;
  {
    absl::MutexLock lock(&mu_);
    *learner = learner_;
    run_key = run_key_;
  }
  if (*learner == nullptr) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "this learner trains no policy yet");
  }
  if (run_key.empty()) return grpc::Status::OK;
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find(kRunKeyMetadata);
  const absl::string_view presented =
      it == metadata.end()
          ? absl::string_view()
          : absl::string_view(it->second.data(), it->second.size());
  if (ConstantTimeEquals(presented, run_key)) return grpc::Status::OK;
  learner->reset();
  return grpc::Status(
      grpc::StatusCode::PERMISSION_DENIED,
      absl::StrCat(presented.empty() ? "no" : "a wrong", " ", kRunKeyMetadata,
                   ": a policy learner takes calls only from its run's own "
                   "learner"));
}

grpc::Status PolicyLearnerServiceImpl::UpdatePolicy(
    grpc::ServerContext* context, const UpdatePolicyRequest* request,
    UpdatePolicyResponse* response) {
  std::shared_ptr<PolicyLearner> learner;
  if (grpc::Status admitted = Admit(*context, &learner); !admitted.ok()) {
    return admitted;
  }
  absl::StatusOr<UpdatePolicyResponse> result = learner->Update(*request);
  if (result.ok()) *response = *std::move(result);
  return ToGrpcStatus(result.status());
}

grpc::Status PolicyLearnerServiceImpl::CheckpointPolicy(
    grpc::ServerContext* context, const CheckpointPolicyRequest* request,
    CheckpointPolicyResponse* response) {
  std::shared_ptr<PolicyLearner> learner;
  if (grpc::Status admitted = Admit(*context, &learner); !admitted.ok()) {
    return admitted;
  }
  absl::StatusOr<CheckpointPolicyResponse> result =
      learner->Checkpoint(*request);
  if (result.ok()) *response = *std::move(result);
  return ToGrpcStatus(result.status());
}

}  // namespace rl
