#include "common/league_ratings.h"

#include <algorithm>
#include <cmath>

namespace rl {
namespace {

// OpenSkill's defaults (openskill.models.BradleyTerryFull, 6.2.0).
constexpr double kBeta = 25.0 / 6.0;
constexpr double kTau = 25.0 / 300.0;
constexpr double kKappa = 0.0001;

// One side's update against the other, from both sides' ratings before
// the match (sigmas already widened by tau), for `score` 1 (won), 0.5
// (drew) or 0 (lost): Weng and Lin's algorithm 1 for two teams of one.
PlayerRating Updated(const PlayerRating& self, const PlayerRating& other,
                     double score) {
  const double self_var = self.sigma * self.sigma;
  const double other_var = other.sigma * other.sigma;
  const double c = std::sqrt(self_var + other_var + 2 * kBeta * kBeta);
  const double p = 1 / (1 + std::exp((other.mu - self.mu) / c));
  const double var_over_c = self_var / c;
  const double omega = var_over_c * (score - p);
  const double gamma = std::sqrt(self_var) / c;
  const double delta = gamma * var_over_c / c * p * (1 - p);
  PlayerRating out = self;
  out.mu += omega;
  out.sigma *= std::sqrt(std::max(1 - delta, kKappa));
  return out;
}

}  // namespace

void LeagueRatings::Rate(const LeagueMatch& match) {
  PlayerRating& learner = players_[match.learner_version];
  PlayerRating& opponent = players_[match.opponent_version];
  if (match.learner_version == match.opponent_version) return;
  PlayerRating a = learner, b = opponent;
  a.sigma = std::sqrt(a.sigma * a.sigma + kTau * kTau);
  b.sigma = std::sqrt(b.sigma * b.sigma + kTau * kTau);
  const double score = match.learner_return > 0   ? 1.0
                       : match.learner_return < 0 ? 0.0
                                                  : 0.5;
  learner = Updated(a, b, score);
  opponent = Updated(b, a, 1 - score);
  learner.games += 1;
  opponent.games += 1;
}

PlayerRating LeagueRatings::Of(int64_t version) const {
  const auto it = players_.find(version);
  return it == players_.end() ? PlayerRating() : it->second;
}

}  // namespace rl
