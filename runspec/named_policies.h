// The rules of a run's `policies` block (several policies, each playing
// some of every copy's agents): each policy's own run as the trainer sees
// it, and the checks of the block.
#ifndef RL_RUNSPEC_NAMED_POLICIES_H_
#define RL_RUNSPEC_NAMED_POLICIES_H_

#include <cstdint>
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

// The first of `run`'s policies that sets the run-file field at `path`
// itself (its own `ppo.*` or `policy.*` value, which goes over the run's),
// as "policies[i] (name)"; empty when none does. A sweep varying that field
// would not change it for that policy.
std::string PolicySettingField(const RunSpec& run, const std::string& path);

// A run file's JSON (RunFileToJson) and its run with the defaults applied:
// a policies[i].ppo or .policy field given at its default (false, 0, "" or
// []) cannot be put over the run's (a policy takes the fields it gives
// other values), so where the run's differs the policy would train with
// the run's value: INVALID_ARGUMENT naming each. Fields that keep their
// presence (ppo.anneal_learning_rate, gae_lambda, ...) are seen at any
// value. JSON that does not parse is left to the RunSpec parse.
absl::Status CheckPolicyDefaultsGiven(const std::string& json,
                                      const RunSpec& run);

// The agent indices -> policy index of `run` ([agents_per_env]); empty
// without a policies block.
std::vector<int> PolicyOfAgent(const RunSpec& run);

// The rows of policy `index`'s agents in a batch of `rows` rows of whole
// copies (row r is agent r mod env.agents_per_env of its copy); empty
// without a policies block.
std::vector<int64_t> RowsOfPolicy(const RunSpec& run, int index, int64_t rows);

// Episodes that ended in a batch, by the policy whose agent played each:
// out[i] holds policy i's returns and lengths, in order; `rows` names each
// episode's row (row mod env.agents_per_env is its agent). Without a
// policies block: one entry holding them all.
struct PolicyEpisodes {
  std::vector<float> returns;
  std::vector<int32_t> lengths;
};
std::vector<PolicyEpisodes> EpisodesByPolicy(
    const RunSpec& run, const std::vector<int64_t>& rows,
    const std::vector<float>& returns, const std::vector<int32_t>& lengths);

// Where policy `name` of a run (not the first: the first's are the run's
// own, <run_dir>/checkpoints) keeps its checkpoints:
// <run_dir>/policies/<name>/checkpoints. Checkpoint ckpt-N of the run and
// ckpt-N of each such policy are written at the same update.
std::string PolicyCheckpointRoot(const std::string& run_dir,
                                 const std::string& name);

// The run as its policy `index` of several plays it (NamedPolicyRun), or
// the run itself without a policies block (index 0).
RunSpec PolicyRun(const RunSpec& run, int index);

// Each problem of `run`'s policies block as "field.path: what is wrong (got
// value)"; `validate` checks each policy's own run (NamedPolicyRun), its
// messages prefixed with "policies[i] (name): ".
std::vector<std::string> NamedPolicyProblems(
    const RunSpec& run,
    const std::function<absl::Status(const RunSpec&)>& validate);

}  // namespace rl

#endif  // RL_RUNSPEC_NAMED_POLICIES_H_
