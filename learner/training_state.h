// The training state (proto/training_state.proto) in a checkpoint: one
// uint8 tensor "training_state" beside the weights and the optimizer, for
// the learner (learner_core) and the one-process trainer (trainer/).
//
// Checkpoints written before the proto (November 2026: the tensors
// "learner.counters" or "trainer.counters", "*.recent_returns",
// "learner.acked_segments", "trainer.seconds", "updater.generator") still
// load: TakeTrainingState reads either form.
#ifndef RL_LEARNER_TRAINING_STATE_H_
#define RL_LEARNER_TRAINING_STATE_H_

#include <torch/types.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "learner/checkpoint.h"
#include "policy/tensor_bytes.h"
#include "proto/training_state.pb.h"

namespace rl {

// The key of the state in a checkpoint's extra tensors.
inline constexpr char kTrainingStateKey[] = "training_state";

// Stores `state` in `extra` under kTrainingStateKey.
void PutTrainingState(const TrainingState& state, TensorMap* extra);

// The state stored in `extra`, in either form; INVALID_ARGUMENT naming
// `source` and the tensor when it is missing or malformed.
absl::StatusOr<TrainingState> TakeTrainingState(const TensorMap& extra,
                                                absl::string_view source);

}  // namespace rl

#endif  // RL_LEARNER_TRAINING_STATE_H_
