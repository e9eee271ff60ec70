#include "learner/learner_progress.h"

#include <utility>

namespace rl {

bool LearnerProgress::Finished() const {
  return env_steps_ >= spec_.total_env_steps() ||
         (stop_env_steps_ > 0 && env_steps_ >= stop_env_steps_) ||
         target_reached_;
}

bool LearnerProgress::Reaches(const ReturnWindow& returns) const {
  return spec_.has_target_return() && returns.Reaches(spec_.target_return());
}

void LearnerProgress::CountUpdate(int64_t env_steps, int64_t episodes,
                                  ReturnWindow returns, bool target_reached) {
  env_steps_ += env_steps;
  ++updates_;
  ++policy_version_;
  episodes_ += episodes;
  returns_ = std::move(returns);
  if (target_reached && !target_reached_) {
    target_reached_ = true;
    target_reached_at_ = env_steps_;
  }
  progress_.set_env_steps(env_steps_);
  progress_.set_policy_version(policy_version_);
  progress_.set_episodes(episodes_);
  progress_.set_mean_return(returns_.Mean());
  const double elapsed = absl::ToDoubleSeconds(absl::Now() - started_);
  progress_.set_steps_per_second(
      elapsed > 0 ? (env_steps_ - steps_at_start_) / elapsed : 0);
  progress_.set_target_reached_at_steps(target_reached_ ? target_reached_at_
                                                        : 0);
  progress_.clear_policies();
  for (size_t i = 0; i < policy_returns_.size(); ++i) {
    PolicyReturn* p = progress_.add_policies();
    p->set_name(spec_.policies(static_cast<int>(i)).name());
    p->set_mean_return(policy_returns_[i].Mean());
    p->set_episodes(policy_episodes_[i]);
  }
  counted_ = true;
}

void LearnerProgress::CountPolicyEpisodes(
    const std::vector<std::vector<float>>& returns) {
  for (size_t i = 0; i < returns.size() && i < policy_returns_.size(); ++i) {
    for (const float r : returns[i]) policy_returns_[i].Add(r);
    policy_episodes_[i] += static_cast<int64_t>(returns[i].size());
  }
}

void LearnerProgress::FillStatus(LearnerStatus* status) const {
  status->set_env_steps(env_steps_);
  status->set_updates(updates_);
  status->set_policy_version(policy_version_);
  // As of this process's last update (none yet: no progress to report).
  if (counted_) *status->mutable_progress() = progress_;
}

void LearnerProgress::Save(TrainingState* state) const {
  state->set_env_steps(env_steps_);
  state->set_policy_version(policy_version_);
  state->set_updates(updates_);
  state->set_episodes(episodes_);
  state->set_target_reached(target_reached_);
  state->set_target_reached_at_steps(target_reached_at_);
  state->mutable_recent_returns()->Add(returns_.begin(), returns_.end());
  for (size_t i = 0; i < policy_returns_.size(); ++i) {
    PolicyReturns* p = state->add_policy_returns();
    p->set_name(spec_.policies(static_cast<int>(i)).name());
    p->mutable_recent_returns()->Add(policy_returns_[i].begin(),
                                     policy_returns_[i].end());
    p->set_episodes(policy_episodes_[i]);
  }
}

void LearnerProgress::Restore(const TrainingState& state) {
  env_steps_ = state.env_steps();
  policy_version_ = state.policy_version();
  updates_ = state.updates();
  episodes_ = state.episodes();
  target_reached_ = state.target_reached();
  target_reached_at_ = state.target_reached_at_steps();
  returns_.Assign(state.recent_returns().begin(), state.recent_returns().end());
  // Each policy's by name (a state without them, or another run's
  // policies, leaves theirs empty).
  for (const PolicyReturns& p : state.policy_returns()) {
    for (int i = 0; i < spec_.policies_size(); ++i) {
      if (spec_.policies(i).name() != p.name()) continue;
      policy_returns_[i].Assign(p.recent_returns().begin(),
                                p.recent_returns().end());
      policy_episodes_[i] = p.episodes();
    }
  }
  steps_at_start_ = env_steps_;
  started_ = absl::Now();
}

}  // namespace rl
