// The rules of a run's `policies` block (several policies, each playing
// some of every copy's agents): each policy's own run as the trainer sees
// it, and the checks of the block.
#ifndef RL_RUNSPEC_NAMED_POLICIES_H_
#define RL_RUNSPEC_NAMED_POLICIES_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/common.pb.h"

namespace rl {

// Policy `index` of `run` as a run of its own: the run's `policy` and `ppo`
// with the named policy's given fields put over them (a given hidden_sizes
// replaces the run's), the policy defaults applied, and no `policies` or
// `league` block.
RunSpec NamedPolicyRun(const RunSpec& run, int index);

// The agent indices -> policy index of `run` ([agents_per_env]); empty
// without a policies block.
std::vector<int> PolicyOfAgent(const RunSpec& run);

// Each problem of `run`'s policies block as "field.path: what is wrong (got
// value)"; `validate` checks each policy's own run (NamedPolicyRun), its
// messages prefixed with "policies[i] (name): ".
std::vector<std::string> NamedPolicyProblems(
    const RunSpec& run,
    const std::function<absl::Status(const RunSpec&)>& validate);

}  // namespace rl

#endif  // RL_RUNSPEC_NAMED_POLICIES_H_
