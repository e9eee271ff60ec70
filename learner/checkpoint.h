// Checkpoints: a directory <root>/ckpt-<counter> holding the policy
// (weights, normaliser statistics), the optimizer state and named extra
// tensors (counters, random-generator states, environment state). Written to
// a temporary directory, completed with a COMPLETE marker, then renamed, so
// a crash never leaves a partial checkpoint under a final name.
#ifndef RL_LEARNER_CHECKPOINT_H_
#define RL_LEARNER_CHECKPOINT_H_

#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "policy/actor_critic.h"
#include "proto/common.pb.h"

namespace rl {

using TensorMap = std::map<std::string, torch::Tensor>;

// "ckpt-" and `counter` in 12 digits: the name of checkpoint `counter`'s
// directory under its root.
std::string CheckpointName(int64_t counter);

// The counter a checkpoint directory's name holds: the last part of `path`
// ("ckpt-N", a trailing slash allowed); nullopt for any other name.
std::optional<int64_t> CheckpointCounter(const std::string& path);

// The counters of the checkpoint directories under `root`, complete or not;
// a root that cannot be listed is INTERNAL, naming it.
absl::StatusOr<std::set<int64_t>> CheckpointCounters(const std::string& root);

// Removes every checkpoint directory under `root` whose counter is not in
// `keep`; a failure is INTERNAL, naming `root`.
absl::Status PruneCheckpoints(const std::string& root,
                              const std::set<int64_t>& keep);

// Writes checkpoint `counter` under `root` and keeps only the newest `keep`.
// Returns the checkpoint's directory. The archives are serialised in memory
// and written with checked, synced writes: a storage failure is a Status
// naming the file (a full disk or a file-size limit RESOURCE_EXHAUSTED,
// others errno's canonical code), never an exception or an abort, and it
// removes the temporary directory, so the previous checkpoint stays the
// latest. A successful write also removes the temporary directories of
// writers on this host that died mid-write (a kill), so they do not fill
// the disk.
absl::StatusOr<std::string> WriteCheckpoint(const std::string& root,
                                            int64_t counter,
                                            ActorCritic& policy,
                                            torch::optim::Optimizer& optimizer,
                                            const TensorMap& extra, int keep);

// The newest complete checkpoint under `root`; NOT_FOUND if there is none.
absl::StatusOr<std::string> LatestCheckpoint(const std::string& root);

// Loads a checkpoint directory into `policy` (shapes must match: else
// INVALID_ARGUMENT), `optimizer` (may be null) and `extra` (may be null).
// A file that does not read as an archive (missing, cut short: a crash, a
// damaged disk) is DATA_LOSS naming it.
absl::Status ReadCheckpoint(const std::string& dir, ActorCritic& policy,
                            torch::optim::Optimizer* optimizer,
                            TensorMap* extra);

// Calls `read` on the complete checkpoints under `root`, newest first,
// until one reads, and returns its directory: one `read` finds damaged
// (DATA_LOSS) is passed over with a warning, the one before it tried, and
// once one reads the damaged are renamed "damaged-ckpt-N" (no longer
// checkpoints to a resume or a pruning). NOT_FOUND when there is none; any
// other error of `read` at once; the newest's DATA_LOSS when every one is
// damaged (all left in place).
absl::StatusOr<std::string> ReadNewestReadable(
    const std::string& root,
    const std::function<absl::Status(const std::string&)>& read);

// A fresh network of the run `spec` (its env's sizes, its ppo settings)
// with the policy of checkpoint `dir` loaded: what an evaluation or a check
// of a kept checkpoint needs.
absl::StatusOr<ActorCritic> ReadRunPolicy(const RunSpec& spec,
                                          const std::string& dir);

// The same state as bytes in memory, for handing it to other learner ranks:
// the policy, the optimizer state and `extra`, in one archive.
absl::StatusOr<std::string> EncodeTrainingState(
    ActorCritic& policy, torch::optim::Optimizer& optimizer,
    const TensorMap& extra);
// INVALID_ARGUMENT for bytes that do not load or do not fit `policy`.
absl::Status DecodeTrainingState(const std::string& bytes, ActorCritic& policy,
                                 torch::optim::Optimizer* optimizer,
                                 TensorMap* extra);

}  // namespace rl

#endif  // RL_LEARNER_CHECKPOINT_H_
