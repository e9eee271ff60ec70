#include "policy/policy_codec.h"

#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "common/tensor_codec.h"
#include "policy/torch_status.h"

namespace rl {
namespace {

// Parameters and buffers by name.
std::map<std::string, torch::Tensor> NamedState(ActorCritic& policy) {
  std::map<std::string, torch::Tensor> state;
  for (const auto& item : policy->named_parameters()) {
    state[item.key()] = item.value();
  }
  for (const auto& item : policy->named_buffers()) {
    state[item.key()] = item.value();
  }
  return state;
}

}  // namespace

absl::Status EncodePolicyTensors(
    ActorCritic& policy, google::protobuf::RepeatedPtrField<NamedTensor>* out) {
  out->Clear();
  for (const auto& [name, tensor] : NamedState(policy)) {
    NamedTensor* named = out->Add();
    named->set_name(name);
    // From any device: the bytes are the host's (one copy per tensor off a
    // GPU, none on the CPU).
    RETURN_IF_ERROR(
        EncodeTensor(tensor.detach().to(torch::kCPU), named->mutable_tensor()));
  }
  return absl::OkStatus();
}

absl::Status DecodePolicyTensors(
    const google::protobuf::RepeatedPtrField<NamedTensor>& tensors,
    const std::string& field_name, ActorCritic& policy) {
  std::map<std::string, torch::Tensor> state = NamedState(policy);
  std::map<std::string, torch::Tensor> decoded;
  for (int i = 0; i < tensors.size(); ++i) {
    const NamedTensor& named = tensors.Get(i);
    const std::string field =
        absl::StrCat(field_name, "[", i, "] (", named.name(), ")");
    auto it = state.find(named.name());
    if (it == state.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": the policy has no such tensor"));
    }
    ASSIGN_OR_RETURN(torch::Tensor tensor,
                     DecodeTensorView(named.tensor(), field));
    RETURN_IF_ERROR(CheckTensor(tensor, field, it->second.scalar_type(),
                                it->second.sizes().vec()));
    decoded[named.name()] = tensor;
  }
  for (const auto& [name, unused] : state) {
    if (decoded.count(name) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(field_name, ": missing tensor ", name));
    }
  }
  return CatchTorchErrors("copying the decoded policy", [&] {
    torch::NoGradGuard no_grad;
    for (auto& [name, target] : state) target.copy_(decoded[name]);
  });
}

absl::Status EncodePolicy(ActorCritic& policy, PolicyUpdate* update) {
  return EncodePolicyTensors(policy, update->mutable_parameters());
}

absl::Status DecodePolicy(const PolicyUpdate& update, ActorCritic& policy) {
  return DecodePolicyTensors(update.parameters(), "parameters", policy);
}

}  // namespace rl
