// Rollout segments on the wire: Rollout tensors <-> RolloutSegment, and the
// learner-side validation of everything a peer sends (env spec, shapes,
// dtypes, finite values), each error naming the field.
#ifndef RL_POLICY_SEGMENT_CODEC_H_
#define RL_POLICY_SEGMENT_CODEC_H_

#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "policy/rollout.h"
#include "proto/learner.pb.h"

namespace rl {

// The shape every segment of a run must have.
struct SegmentShape {
  EnvSpec env;  // id and sizes (observation, actions)
  int64_t num_steps = 0;
  int64_t num_envs = 0;
  // Bounds of every reward (the env's declared range, widened when rewards
  // are scaled) and of every episode's return per step of its length.
  float min_reward = -std::numeric_limits<float>::infinity();
  float max_reward = std::numeric_limits<float>::infinity();
  float min_step_return = -std::numeric_limits<float>::infinity();
  float max_step_return = std::numeric_limits<float>::infinity();
  // Numbers of a recurrent policy's state per env (segment.initial_state);
  // 0 without a core.
  int64_t state_size = 0;
  // False: rows of a batch the run's learner sends on (one policy's, to
  // its learner of its own: learner/policy_learner.h), which carry no
  // episode statistics; any are refused, and the episode flags are not
  // checked against them.
  bool episodes = true;
};

// The lowest log-probability a segment may carry for one part of an integer
// action (a sampled choice's, with room for the log of the choices).
inline constexpr float kLowestChoiceLogProb = -1000.0f;

// Writes the rollout's tensors into `segment` (identity fields and episode
// statistics are the caller's). One copy per tensor. INVALID_ARGUMENT naming
// the tensor for one that is undefined or has no wire dtype.
absl::Status EncodeSegment(const Rollout& rollout, RolloutSegment* segment);

// Validates `segment` against `shape` and returns its tensors as a Rollout
// that aliases the segment's bytes (keep `segment` alive while it is used).
// INVALID_ARGUMENT naming the field: env mismatch, wrong dtype or shape,
// non-finite float, discrete action out of range, an integer action's
// log-probability above 0 or below kLowestChoiceLogProb per part, flag not
// 0/1, episode statistics of unequal length.
absl::StatusOr<Rollout> DecodeSegment(const RolloutSegment& segment,
                                      const SegmentShape& shape);

// Concatenates rollouts of equal T along the environment axis.
// INVALID_ARGUMENT for none, or for rollouts whose T or other sizes differ.
absl::StatusOr<Rollout> ConcatenateRollouts(
    const std::vector<Rollout>& rollouts);

}  // namespace rl

#endif  // RL_POLICY_SEGMENT_CODEC_H_
