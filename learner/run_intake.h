// How one run's segments are taken in by a learner rank: the intake's
// settings from the run (credits, queue length, batch size, policy lag,
// the actors this rank expects), the shapes and value ranges its segments
// must have, and their decoding into the rollout the update uses.
#ifndef RL_LEARNER_RUN_INTAKE_H_
#define RL_LEARNER_RUN_INTAKE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "learner/segment_budget.h"
#include "learner/segment_intake.h"
#include "policy/rollout.h"
#include "policy/segment_codec.h"
#include "proto/common.pb.h"

namespace rl {

// The shapes and value ranges of the segments of the run `spec` (its
// resolved env's). Rewards lie within the env's declared range; scaled ones
// (ppo.normalize_rewards: divided by a running standard deviation of at
// least 1e-4, actor/reward_scaler.h) within 1e4 times it. Episode returns
// are the raw rewards' sums. A league's segments carry the trained seats'
// rows only (envs_per_actor / env.agents_per_env).
SegmentShape RunSegmentShape(const RunSpec& spec);

// The env steps each row of a segment stands for: a league's row is its
// environment copy's trained seat, and counts the copy's agents' steps
// (env.agents_per_env); 1 otherwise.
int64_t RowsPerSentRow(const RunSpec& spec);

// A segment's league games: none where the run has no league; else one
// per episode, in order, each with the episode's return and versions an
// actor can play (-members <= opponent < learner: a negative version is
// fixed member -(version + 1), league.members). INVALID_ARGUMENT naming
// the game otherwise.
absl::Status CheckLeagueMatches(const RolloutSegment& segment, bool league,
                                int members = 0);

// `segment`'s episode returns by policy (its episode_rows checked by
// CheckEpisodeRows): [0] every one's without a policies block, else [i]
// policy i's (the policy of each one's row's agent); [0] counts for the
// run's return.
std::vector<std::vector<float>> SegmentReturnsByPolicy(
    const RunSpec& spec, const RolloutSegment& segment);

// A segment's episode rows: none where the run has one policy; else one
// per episode, each a row of the segment's `rows`. INVALID_ARGUMENT naming
// the row otherwise.
absl::Status CheckEpisodeRows(const RolloutSegment& segment, bool policies,
                              int64_t rows);

// The intake's options for rank `rank` of `world_size` learners of the run
// `spec`: segments are checked against `shape` and decoded into Rollouts
// (RolloutOf). `shape` must outlive the intake.
SegmentIntakeOptions RunIntakeOptions(const RunSpec& spec,
                                      const std::string& run_id, int rank,
                                      int world_size,
                                      std::shared_ptr<SegmentBudget> budget,
                                      const SegmentShape* shape);

// The largest segment, in bytes on the wire, that the run's actors send,
// with room to spare: twice the estimate and a MiB (a larger one was not
// made for this run and is refused before it is parsed).
int64_t MaxSegmentBytes(const RunSpec& spec);

// The rollout of a segment decoded by RunIntakeOptions' decoder.
const Rollout& RolloutOf(const IntakeSegment& segment);

}  // namespace rl

#endif  // RL_LEARNER_RUN_INTAKE_H_
