#include "learner/run_intake.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "runspec/named_policies.h"
#include "runspec/policy_rules.h"
#include "runspec/run_footprint.h"
#include "runspec/run_spec.h"

namespace rl {
namespace {

struct DecodedRollout : SegmentPayload {
  Rollout rollout;
};

}  // namespace

int64_t RowsPerSentRow(const RunSpec& spec) {
  return spec.has_league() ? std::max(1, spec.env().agents_per_env()) : 1;
}

absl::Status CheckLeagueMatches(const RolloutSegment& segment, bool league,
                                int members) {
  if (!league) {
    if (segment.league_matches_size() == 0) return absl::OkStatus();
    return absl::InvalidArgumentError(
        "segment.league_matches: the run has no league block");
  }
  // The actor reports a trained seat's game as its episode and its match
  // together, in the same order.
  if (segment.league_matches_size() != segment.episode_returns_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("segment.league_matches: ", segment.league_matches_size(),
                     " games for ", segment.episode_returns_size(),
                     " episodes (a league's episodes are its games)"));
  }
  for (int i = 0; i < segment.league_matches_size(); ++i) {
    const LeagueMatchResult& m = segment.league_matches(i);
    if (m.env_steps() < 0 || m.learner_version() < 1 ||
        m.opponent_version() < -members ||
        m.opponent_version() >= m.learner_version() ||
        m.learner_return() != segment.episode_returns(i)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "segment.league_matches[", i, "]: env_steps ", m.env_steps(),
          ", learner_version ", m.learner_version(), ", opponent_version ",
          m.opponent_version(), ", learner_return ", m.learner_return(),
          " (needs env_steps >= 0, opponent_version in [", -members,
          ", learner_version): negative for the league's members, "
          "learner_return the episode's, ",
          segment.episode_returns(i), ")"));
    }
  }
  return absl::OkStatus();
}

std::vector<std::vector<float>> SegmentReturnsByPolicy(
    const RunSpec& spec, const RolloutSegment& segment) {
  const auto& returns = segment.episode_returns();
  if (spec.policies_size() == 0) return {{returns.begin(), returns.end()}};
  std::vector<PolicyEpisodes> episodes = EpisodesByPolicy(
      spec, {segment.episode_rows().begin(), segment.episode_rows().end()},
      {returns.begin(), returns.end()},
      {segment.episode_lengths().begin(), segment.episode_lengths().end()});
  std::vector<std::vector<float>> out;
  for (PolicyEpisodes& p : episodes) out.push_back(std::move(p.returns));
  return out;
}

absl::Status CheckEpisodeRows(const RolloutSegment& segment, bool policies,
                              int64_t rows) {
  if (!policies) {
    if (segment.episode_rows_size() == 0) return absl::OkStatus();
    return absl::InvalidArgumentError(
        "segment.episode_rows: the run has no policies block");
  }
  if (segment.episode_rows_size() != segment.episode_returns_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("segment.episode_rows: ", segment.episode_rows_size(),
                     " rows for ", segment.episode_returns_size(),
                     " episodes (each episode's row names its policy)"));
  }
  for (int i = 0; i < segment.episode_rows_size(); ++i) {
    const int64_t row = segment.episode_rows(i);
    if (row < 0 || row >= rows) {
      return absl::InvalidArgumentError(
          absl::StrCat("segment.episode_rows[", i, "]: ", row,
                       " is not a row of the segment (0 to ", rows - 1, ")"));
    }
  }
  return absl::OkStatus();
}

SegmentShape RunSegmentShape(const RunSpec& spec) {
  const EnvSpec& env = spec.env();
  SegmentShape shape;
  shape.env = env;
  shape.num_steps = spec.segment_length();
  shape.num_envs = spec.envs_per_actor() / RowsPerSentRow(spec);
  const bool scaled = spec.ppo().normalize_rewards();
  const float reach =
      std::max(std::fabs(env.reward_low()), std::fabs(env.reward_high()));
  shape.min_reward = scaled ? -reach * 1e4f : env.reward_low();
  shape.max_reward = scaled ? reach * 1e4f : env.reward_high();
  shape.min_step_return = env.reward_low();
  shape.max_step_return = env.reward_high();
  shape.state_size = RecurrentStateSize(spec.policy());
  return shape;
}

SegmentIntakeOptions RunIntakeOptions(const RunSpec& spec,
                                      const std::string& run_id, int rank,
                                      int world_size,
                                      std::shared_ptr<SegmentBudget> budget,
                                      const SegmentShape* shape) {
  const int num_actors = spec.resources().num_actors();
  SegmentIntakeOptions o;
  o.run_id = run_id;
  o.credits = std::max(2, num_actors + 1);
  o.queue_capacity =
      static_cast<size_t>(o.credits * std::max(1, num_actors) * 2);
  o.actors_here = ActorsOfLearnerRank(rank, world_size, num_actors);
  o.num_actors = num_actors;
  o.num_learners = world_size;
  o.async = spec.sync_mode() == ASYNC;
  o.max_policy_lag = spec.max_policy_lag();
  o.batch_steps = static_cast<int64_t>(spec.segment_length()) *
                  spec.envs_per_actor() * o.actors_here;
  o.budget = std::move(budget);
  const int64_t rows_per_row = RowsPerSentRow(spec);
  const bool league = spec.has_league();
  const int members = spec.league().members_size();
  const bool policies = spec.policies_size() > 0;
  o.decode =
      [shape, rows_per_row, league, members, policies](
          const RolloutSegment& segment) -> absl::StatusOr<DecodedSegment> {
    RETURN_IF_ERROR(CheckLeagueMatches(segment, league, members));
    RETURN_IF_ERROR(CheckEpisodeRows(segment, policies, shape->num_envs));
    ASSIGN_OR_RETURN(Rollout rollout, DecodeSegment(segment, *shape));
    DecodedSegment decoded;
    decoded.env_steps = rollout.num_steps() * rollout.num_envs() * rows_per_row;
    auto payload = std::make_unique<DecodedRollout>();
    payload->rollout = std::move(rollout);
    decoded.payload = std::move(payload);
    return decoded;
  };
  return o;
}

int64_t MaxSegmentBytes(const RunSpec& spec) {
  return static_cast<int64_t>(
      std::min(2 * EstimateRunFootprint(spec).segment_bytes + (1 << 20), 9e18));
}

const Rollout& RolloutOf(const IntakeSegment& segment) {
  return static_cast<const DecodedRollout&>(*segment.payload).rollout;
}

}  // namespace rl
