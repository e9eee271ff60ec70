// The rules of a run's policy block: the defaults that follow the env's
// spaces (an image gets a CNN) and the checks of the network it asks for,
// execution.cpu_kernels' fused path included (it runs tanh MLPs only).
#ifndef RL_RUNSPEC_POLICY_RULES_H_
#define RL_RUNSPEC_POLICY_RULES_H_

#include <string>
#include <vector>

#include "proto/common.pb.h"

namespace rl {

// The action heads a run may name in policy.head (those of
// policy/action_head.h's registry), and "" where head `head` takes `env`'s
// actions, else why not ("no such head" for a name not among them).
std::vector<std::string> ActionHeadNames();
std::string ActionHeadMisfit(const std::string& head, const EnvSpec& env);

// True for the encoders that read images ("nature_cnn", "impala_cnn").
bool IsCnnEncoder(const PolicyConfig& policy);

// True where the policy carries a recurrent state ("lstm", "gru").
bool HasRecurrentCore(const PolicyConfig& policy);

// True for a name of 1-32 characters of a-z, 0-9, `_` and `-`: a named
// policy's (policies[i].name), a league member's (league.members[i].name).
bool IsPolicyName(const std::string& name);

// How CoreProblems' rule of whole env sequences (ppo.num_minibatches must
// divide envs_per_actor) begins, and it builds it: a policies block counts
// each policy's own rows instead (named_policies.cc).
inline constexpr char kWholeSequencesProblem[] =
    "ppo.num_minibatches: a recurrent policy (policy.core ";

// Numbers of the recurrent state a policy carries per env: 2 x core_size
// for an LSTM (hidden and cell state), core_size for a GRU, else 0 (as
// policy/actor_critic.h's RecurrentStateSize of its network).
int64_t RecurrentStateSize(const PolicyConfig& policy);

// Fills `policy`'s left-out fields for the env `env`: the encoder (a CNN
// for uint8 images of rank 3, nature_cnn from 36x36, else mlp), the image
// layout (hwc when the last dimension is <= 4), the core ("none") and its
// size (128), the hidden sizes ([64, 64]; none after a CNN, and none where
// `ppo` still names them, so that its error is kept) and the activation.
void ApplyPolicyDefaults(const EnvSpec& env, const PPOConfig& ppo,
                         PolicyConfig* policy);

// Each problem of `spec`'s policy block (and of execution.cpu_kernels against
// it) as "field.path: what is wrong (got value)"; empty when there are none.
std::vector<std::string> PolicyProblems(const RunSpec& spec);

}  // namespace rl

#endif  // RL_RUNSPEC_POLICY_RULES_H_
