// Policy weights on the wire: every parameter and buffer of an ActorCritic
// (observation statistics included) as named tensors of a PolicyUpdate, and
// back into another ActorCritic of the same configuration.
#ifndef RL_POLICY_POLICY_CODEC_H_
#define RL_POLICY_POLICY_CODEC_H_

#include <string>

#include "absl/status/status.h"
#include "policy/actor_critic.h"
#include "proto/learner.pb.h"

namespace rl {

// Fills `update->parameters` (other fields untouched). One copy per tensor.
absl::Status EncodePolicy(ActorCritic& policy, PolicyUpdate* update);

// Copies the update's tensors into `policy`. INVALID_ARGUMENT naming the
// tensor for a missing, unknown, mis-shaped or mis-typed one; `policy` is
// left unchanged on error.
absl::Status DecodePolicy(const PolicyUpdate& update, ActorCritic& policy);

// The same for a list of named tensors (a PolicyUpdate's `parameters`, or
// one of its `policies`); errors name the tensor as "<field>[i] (name)".
absl::Status EncodePolicyTensors(
    ActorCritic& policy, google::protobuf::RepeatedPtrField<NamedTensor>* out);
absl::Status DecodePolicyTensors(
    const google::protobuf::RepeatedPtrField<NamedTensor>& tensors,
    const std::string& field, ActorCritic& policy);

}  // namespace rl

#endif  // RL_POLICY_POLICY_CODEC_H_
