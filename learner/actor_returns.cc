#include "learner/actor_returns.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_format.h"

namespace rl {

void ActorReturns::Add(int actor_id, absl::Span<const float> returns) {
  if (returns.empty()) return;
  Moments& m = pending_[actor_id];
  for (float r : returns) {
    // An episode's return is finite (the intake refuses others); a
    // non-finite one would poison the sums.
    if (!std::isfinite(r)) continue;
    ++m.n;
    m.sum += r;
    m.sum_sq += static_cast<double>(r) * r;
  }
}

void ActorReturns::EndUpdate() {
  window_.push_back(std::move(pending_));
  pending_.clear();
  while (static_cast<int>(window_.size()) >
         std::max(1, options_.window_updates)) {
    window_.pop_front();
  }
}

namespace {

// Of a non-empty vector; the mean of the middle two for an even count.
double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t k = v.size();
  return k % 2 == 1 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
}

}  // namespace

std::vector<ActorReturns::Summary> ActorReturns::Summaries() const {
  std::map<int, Moments> per_actor;
  for (const Update& update : window_) {
    for (const auto& [actor, m] : update) {
      Moments& a = per_actor[actor];
      a.n += m.n;
      a.sum += m.sum;
      a.sum_sq += m.sum_sq;
    }
  }
  std::vector<Summary> out;
  std::vector<double> means;
  std::vector<double> sds;
  for (const auto& [actor, a] : per_actor) {
    if (a.n == 0) continue;
    Summary s;
    s.actor_id = actor;
    s.episodes = a.n;
    s.mean = a.sum / static_cast<double>(a.n);
    out.push_back(s);
    if (a.n < options_.min_episodes) continue;
    means.push_back(s.mean);
    // Clamped: rounding can make it < 0.
    const double squares =
        std::max(0.0, a.sum_sq - static_cast<double>(a.n) * s.mean * s.mean);
    sds.push_back(std::sqrt(squares / static_cast<double>(a.n - 1)));
  }
  if (means.size() < 2) return out;
  const size_t k = means.size();
  // The spread within an actor, the median actor's: a forger's constant
  // returns must not shrink the honest actors' errors.
  const double median = Median(means);
  const double sd = Median(sds);
  const double scale = std::max(std::abs(median), sd);
  for (Summary& s : out) {
    if (s.episodes < options_.min_episodes) continue;
    s.median = median;
    s.actors_compared = static_cast<int>(k);
    const double gap = s.mean - median;
    const double se = sd / std::sqrt(static_cast<double>(s.episodes));
    // No spread within any actor and a gap: as far apart as it gets.
    s.z = se > 0 ? gap / se
          : gap != 0
              ? std::copysign(std::numeric_limits<double>::infinity(), gap)
              : 0.0;
    s.stands_apart = std::abs(s.z) > options_.z_threshold &&
                     std::abs(gap) > options_.min_gap * scale;
  }
  return out;
}

std::vector<ActorReturns::Summary> ActorReturns::NewlyApart() {
  std::vector<Summary> fresh;
  std::set<int> apart;
  for (const Summary& s : Summaries()) {
    if (!s.stands_apart) continue;
    apart.insert(s.actor_id);
    if (reported_.count(s.actor_id) == 0) fresh.push_back(s);
  }
  reported_ = std::move(apart);
  return fresh;
}

std::string ActorReturns::Describe(const Summary& s, int window_updates) {
  return absl::StrFormat(
      "actor %d's %d episodes of the last %d updates average %.1f against "
      "%.1f, the median of %d actors' means (z %.1f)",
      s.actor_id, s.episodes, window_updates, s.mean, s.median,
      s.actors_compared, s.z);
}

}  // namespace rl
