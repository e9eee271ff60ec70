// Run files: YAML or JSON text -> RunSpec (through the proto's JSON mapping)
// -> defaults -> validation -> the environment resolved from the registry
// (envs/env_registry.h). Every error names the field path, e.g.
// "ppo.num_minibatches: must divide envs_per_actor*segment_length (got 3)".
#ifndef RL_RUNSPEC_RUN_SPEC_H_
#define RL_RUNSPEC_RUN_SPEC_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/common.pb.h"

namespace rl {

enum class RunFileFormat { kYaml, kJson };

// Limits on run files. A real one is a few hundred bytes and three levels
// deep; these turn a mistaken or hostile one (a binary, an endless file, deep
// nesting, a "billion laughs" of YAML aliases) into a quick INVALID_ARGUMENT
// with little memory. rlctl and the Python client send run files to the
// coordinator, which parses them here.
inline constexpr size_t kMaxRunFileBytes = 1 << 20;
// Levels of mappings and sequences; the top-level mapping is level 1.
inline constexpr int kMaxRunFileDepth = 64;
// Values (scalars, mappings, sequences) and JSON bytes after YAML aliases
// are expanded.
inline constexpr int64_t kMaxRunFileValues = 100000;
inline constexpr size_t kMaxRunFileExpandedBytes = 8 << 20;
// RunSpec.name, in Unicode characters.
inline constexpr int kMaxRunNameChars = 128;

// Parses `text` into a RunSpec. Unknown fields and type mismatches are
// INVALID_ARGUMENT naming the field. YAML is converted to JSON first, so both
// accept the proto3 JSON names (snake_case or lowerCamelCase). Text over the
// limits above, not UTF-8, or with control characters other than tab, CR and
// LF is INVALID_ARGUMENT naming the limit or the byte's line and column.
absl::StatusOr<RunSpec> ParseRunSpec(absl::string_view text,
                                     RunFileFormat format);

// A run file's text (YAML or JSON, within the limits above) as JSON text;
// the first step of ParseRunSpec, shared by files of the same syntax (sweep
// files). INVALID_ARGUMENT as ParseRunSpec's.
absl::StatusOr<std::string> RunFileToJson(absl::string_view text,
                                          RunFileFormat format);

// Fills every field the run file left out with its documented default.
void ApplyRunSpecDefaults(RunSpec* spec);

// Checks ranges, divisibility and the env id. INVALID_ARGUMENT listing every
// problem found ("field.path: problem (got value)"), separated by "; ".
absl::Status ValidateRunSpec(const RunSpec& spec);

// Defaults, validation, then the environment's derived fields (spaces,
// time limit) from the registry. The coordinator does this at submit and
// rl_local at load: learners and actors receive resolved specs.
absl::Status ResolveRunSpec(RunSpec* spec);

// A spec stored by an older coordinator has the fields that moved out of
// ppo: (the network to policy:, the execution settings to execution:) moved
// there, and gets the env fields the service derives that it lacked (the
// action bounds and the reward range came later), so that workers, which
// check specs and never fill them in, take it. A spec whose env does not
// resolve keeps its env as it is.
void CompleteStoredRunSpec(RunSpec* spec);

// The learner processes a run is placed on: resources.num_learners, times
// the number of policies with resources.learner_per_policy. Ranks
// 0..num_learners-1 are the run's own gang, which the actors stream to and
// which trains the first policy; with a learner per policy, ranks
// k * num_learners + r are member r of policy k's gang (LearnerRoleOf).
int LearnerProcesses(const RunSpec& spec);

// What learner `rank` of a run does: the policy its gang trains (0: the
// run's own gang) and its rank in that gang. Member r of a policy's gang
// takes that policy's rows from rank r of the run's gang. (rlctl restates
// it for its placement lines: python/rlctl_runs.py learner_text; and
// tools/train.sh LearnerProcesses: python/run_file_workers.py.)
struct LearnerRole {
  int policy = 0;
  int member = 0;
};
LearnerRole LearnerRoleOf(const RunSpec& spec, int rank);
// The ranks that rank `rank` of the run's gang sends each policy's rows to,
// policies 1, 2, ... in order: member `rank` of each one's gang (none
// without resources.learner_per_policy).
std::vector<int> PolicyLearnerRanks(const RunSpec& spec, int rank);

// A gang of `num_learners` splits a run's actors: actor `actor_id` streams
// to learner rank actor_id % num_learners. The one place that says so.
int LearnerRankOfActor(int actor_id, int num_learners);
// How many of `num_actors` actors stream to learner `rank` of `num_learners`.
int ActorsOfLearnerRank(int rank, int num_learners, int num_actors);

// How a gang of the run's learners all-reduces: "gloo" or "nccl", from
// execution.collective_backend ("auto": NCCL for CUDA learners, gloo for
// CPU ones).
std::string GangCollectiveBackend(const RunSpec& spec);

// Parse + ResolveRunSpec. The format follows the extension (.json is
// JSON; anything else is YAML). NOT_FOUND if the file cannot be read; at
// most kMaxRunFileBytes + 1 bytes are read. Errors start with `path`.
absl::StatusOr<RunSpec> LoadRunSpecFile(const std::string& path);

// Same, for text already in memory (e.g. a submitted run file).
absl::StatusOr<RunSpec> LoadRunSpec(absl::string_view text,
                                    RunFileFormat format);

}  // namespace rl

#endif  // RL_RUNSPEC_RUN_SPEC_H_
