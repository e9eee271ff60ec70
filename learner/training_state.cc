#include "learner/training_state.h"

#include <torch/torch.h>

#include <cstring>
#include <tuple>
#include <vector>

#include "absl/base/casts.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "policy/torch_status.h"

namespace rl {
namespace {

// A tensor of `extra` checked for dtype and shape, or INVALID_ARGUMENT.
absl::StatusOr<torch::Tensor> Find(const TensorMap& extra,
                                   absl::string_view source, const char* key,
                                   c10::ScalarType dtype,
                                   const std::vector<int64_t>& shape) {
  auto it = extra.find(key);
  if (it == extra.end()) {
    return absl::InvalidArgumentError(absl::StrCat(source, " has no ", key));
  }
  RETURN_IF_ERROR(
      CheckTensor(it->second, absl::StrCat(source, ": ", key), dtype, shape));
  return it->second.contiguous();
}

// The tensors the learner and the trainer wrote before TrainingState.
absl::StatusOr<TrainingState> TakeLegacyState(const TensorMap& extra,
                                              absl::string_view source) {
  TrainingState state;
  const bool learner = extra.count("learner.counters") != 0;
  const char* prefix = learner ? "learner." : "trainer.";
  ASSIGN_OR_RETURN(
      const torch::Tensor counters,
      Find(extra, source, learner ? "learner.counters" : "trainer.counters",
           torch::kInt64, {learner ? 6 : 5}));
  const int64_t* c = counters.data_ptr<int64_t>();
  if (learner) {
    // env steps, version, updates, episodes, target reached, reached at.
    state.set_env_steps(c[0]);
    state.set_policy_version(c[1]);
    state.set_updates(c[2]);
    state.set_episodes(c[3]);
    state.set_target_reached(c[4] != 0);
    state.set_target_reached_at_steps(c[5]);
  } else {
    // env steps, updates, episodes, target reached, reached at.
    state.set_env_steps(c[0]);
    state.set_updates(c[1]);
    state.set_episodes(c[2]);
    state.set_target_reached(c[3] != 0);
    state.set_target_reached_at_steps(c[4]);
    ASSIGN_OR_RETURN(
        const torch::Tensor seconds,
        Find(extra, source, "trainer.seconds", torch::kFloat64, {1}));
    state.set_seconds(seconds.data_ptr<double>()[0]);
  }
  ASSIGN_OR_RETURN(
      const torch::Tensor returns,
      Find(extra, source, absl::StrCat(prefix, "recent_returns").c_str(),
           torch::kFloat32, {-1}));
  const float* r = returns.data_ptr<float>();
  state.mutable_recent_returns()->Add(r, r + returns.numel());
  ASSIGN_OR_RETURN(
      const torch::Tensor generator,
      Find(extra, source, "updater.generator", torch::kUInt8, {-1}));
  state.set_updater_generator(TensorBytes(generator));
  // Absent from learner checkpoints written before it existed.
  if (extra.count("learner.acked_segments") != 0) {
    ASSIGN_OR_RETURN(
        const torch::Tensor acked,
        Find(extra, source, "learner.acked_segments", torch::kInt64, {-1, 3}));
    const int64_t* row = acked.data_ptr<int64_t>();
    for (int64_t i = 0; i < acked.size(0); ++i, row += 3) {
      AckWatermark* w = state.add_acked_segments();
      w->set_actor_id(static_cast<int32_t>(row[0]));
      w->set_incarnation(absl::bit_cast<uint64_t>(row[1]));
      w->set_sequence_number(row[2]);
    }
  }
  return state;
}

}  // namespace

void PutTrainingState(const TrainingState& state, TensorMap* extra) {
  (*extra)[kTrainingStateKey] = BytesTensor(state.SerializeAsString());
}

absl::StatusOr<TrainingState> TakeTrainingState(const TensorMap& extra,
                                                absl::string_view source) {
  if (extra.count(kTrainingStateKey) == 0) {
    if (extra.count("learner.counters") == 0 &&
        extra.count("trainer.counters") == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, " has no ", kTrainingStateKey));
    }
    return TakeLegacyState(extra, source);
  }
  ASSIGN_OR_RETURN(const torch::Tensor bytes,
                   Find(extra, source, kTrainingStateKey, torch::kUInt8, {-1}));
  TrainingState state;
  if (!state.ParseFromString(TensorBytes(bytes))) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": ", kTrainingStateKey, " is not a TrainingState"));
  }
  return state;
}

}  // namespace rl
