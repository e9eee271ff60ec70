#include "learner/policy_publisher.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

namespace rl {
namespace {

// The league version `update` stands for: its updates / snapshot_interval.
int64_t LeagueVersion(const PolicyUpdate& update, int64_t snapshot_interval) {
  return std::max<int64_t>(0, update.version() - 1) / snapshot_interval;
}

using KeptVersion = std::pair<int64_t, std::shared_ptr<const PolicyUpdate>>;

// The newest of `kept` (oldest first) below version `below` while `bytes`
// and theirs stay within `max_bytes`, oldest first.
std::vector<const KeptVersion*> NewestThatFit(
    const std::vector<KeptVersion>& kept, int64_t below, int64_t bytes,
    int64_t max_bytes) {
  std::vector<const KeptVersion*> out;
  for (auto it = kept.rbegin(); it != kept.rend(); ++it) {
    if (it->first >= below) continue;
    bytes += static_cast<int64_t>(it->second->ByteSizeLong());
    if (bytes > max_bytes) break;
    out.push_back(&*it);
  }
  std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace

void PolicyPublisher::KeepLeagueVersions(int64_t snapshot_interval,
                                         int64_t pool_size,
                                         int64_t max_update_bytes) {
  absl::MutexLock lock(&mu_);
  snapshot_interval_ = std::max<int64_t>(0, snapshot_interval);
  pool_size_ = std::max<int64_t>(1, pool_size);
  max_update_bytes_ = max_update_bytes;
}

int64_t PolicyPublisher::Subscribe(
    PolicyCallback on_update, std::shared_ptr<const PolicyUpdate>* latest) {
  absl::MutexLock lock(&mu_);
  const int64_t id = ++next_id_;
  subscribers_[id] = std::move(on_update);
  *latest = latest_;
  return id;
}

void PolicyPublisher::Unsubscribe(int64_t subscriber_id) {
  absl::MutexLock lock(&mu_);
  subscribers_.erase(subscriber_id);
}

std::shared_ptr<const PolicyUpdate> PolicyPublisher::Latest() const {
  absl::MutexLock lock(&mu_);
  return latest_;
}

std::shared_ptr<const PolicyUpdate> PolicyPublisher::LatestWithLeaguePool() {
  std::shared_ptr<const PolicyUpdate> latest;
  std::vector<KeptVersion> kept;
  int64_t interval = 0, max_bytes = 0;
  {
    absl::MutexLock lock(&mu_);
    if (latest_ == nullptr || snapshot_interval_ == 0) return latest_;
    if (with_pool_of_ == latest_) return with_pool_;
    latest = latest_;
    kept.assign(league_.begin(), league_.end());
    interval = snapshot_interval_;
    max_bytes = max_update_bytes_;
  }
  // Copied outside the lock (the PPO thread publishes meanwhile): the
  // newest versions older than the latest's own, while they fit.
  const std::vector<const KeptVersion*> sent =
      NewestThatFit(kept, LeagueVersion(*latest, interval),
                    static_cast<int64_t>(latest->ByteSizeLong()), max_bytes);
  std::shared_ptr<const PolicyUpdate> out = latest;
  if (!sent.empty()) {
    auto with_pool = std::make_shared<PolicyUpdate>(*latest);
    for (const KeptVersion* kept_version : sent) {
      LeagueVersionParameters* version = with_pool->add_league_pool();
      version->set_version(kept_version->first);
      *version->mutable_parameters() = kept_version->second->parameters();
    }
    out = std::move(with_pool);
  }
  absl::MutexLock lock(&mu_);
  if (latest_ == latest) {
    with_pool_ = out;
    with_pool_of_ = latest;
  }
  return out;
}

void PolicyPublisher::Publish(std::shared_ptr<const PolicyUpdate> update) {
  absl::MutexLock lock(&mu_);
  latest_ = std::move(update);
  with_pool_ = nullptr;
  with_pool_of_ = nullptr;
  if (snapshot_interval_ > 0) {
    const int64_t due = LeagueVersion(*latest_, snapshot_interval_);
    if (league_.empty() || due > league_.back().first) {
      league_.emplace_back(due, latest_);
      while (static_cast<int64_t>(league_.size()) > pool_size_) {
        league_.pop_front();
      }
    }
  }
  for (const auto& [id, callback] : subscribers_) callback(latest_);
}

std::vector<LeagueVersionParameters> PolicyPublisher::KeptLeagueVersions()
    const {
  std::vector<KeptVersion> kept;
  int64_t max_bytes = 0;
  {
    absl::MutexLock lock(&mu_);
    kept.assign(league_.begin(), league_.end());
    max_bytes = max_update_bytes_;
  }
  // Copied outside the lock: the newest while they fit.
  std::vector<LeagueVersionParameters> out;
  for (const KeptVersion* kept_version :
       NewestThatFit(kept, std::numeric_limits<int64_t>::max(), 0, max_bytes)) {
    LeagueVersionParameters& version = out.emplace_back();
    version.set_version(kept_version->first);
    *version.mutable_parameters() = kept_version->second->parameters();
  }
  return out;
}

void PolicyPublisher::RestoreLeagueVersions(
    std::vector<LeagueVersionParameters> versions) {
  std::deque<std::pair<int64_t, std::shared_ptr<const PolicyUpdate>>> league;
  for (LeagueVersionParameters& version : versions) {
    auto update = std::make_shared<PolicyUpdate>();
    *update->mutable_parameters() = std::move(*version.mutable_parameters());
    league.emplace_back(version.version(), std::move(update));
  }
  absl::MutexLock lock(&mu_);
  while (static_cast<int64_t>(league.size()) > pool_size_) league.pop_front();
  league_ = std::move(league);
  with_pool_ = nullptr;
  with_pool_of_ = nullptr;
}

}  // namespace rl
