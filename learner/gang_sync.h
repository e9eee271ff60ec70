// What a data-parallel learner gang agrees on besides the gradients (the
// updater all-reduces those): rank 0's state at start, the weights every few
// updates, and, for the checkpoint rank 0 writes for the gang, every rank's
// actors' acknowledged segments.
#ifndef RL_LEARNER_GANG_SYNC_H_
#define RL_LEARNER_GANG_SYNC_H_

#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "learner/checkpoint.h"
#include "learner/collective.h"
#include "policy/actor_critic.h"
#include "proto/training_state.pb.h"

namespace rl {

// The tensors every rank must hold alike: the weights and the observation
// statistics (buffers).
std::vector<torch::Tensor> WeightsAndStatistics(ActorCritic& policy);

// Every rank takes rank 0's policy, optimizer state and `extra` (rank 0
// sends its own; the others' `extra` is replaced by rank 0's), then the
// gang checks that the weights agree (DATA_LOSS where they do not).
absl::Status ShareRankZeroState(Collective& collective, ActorCritic& policy,
                                torch::optim::Optimizer& optimizer,
                                TensorMap* extra);

// Every rank's `mine`, on every rank, in rank order (one broadcast per
// rank; a few bytes per actor).
absl::StatusOr<std::vector<AckWatermark>> GatherWatermarks(
    Collective& collective, const std::vector<AckWatermark>& mine);

// The watermarks rank 0's checkpoint holds, by actor: what this rank's own
// actors say (`streamed_here`), else what the gang gathered at the last
// gather, else what this rank knows from its own resume (`known`).
std::vector<AckWatermark> MergeWatermarks(
    const std::vector<AckWatermark>& known,
    const std::vector<AckWatermark>& gathered,
    const std::vector<AckWatermark>& streamed_here);

}  // namespace rl

#endif  // RL_LEARNER_GANG_SYNC_H_
