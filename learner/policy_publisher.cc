#include "learner/policy_publisher.h"

#include <algorithm>
#include <utility>

namespace rl {
namespace {

// The league version `update` stands for: its updates / snapshot_interval.
int64_t LeagueVersion(const PolicyUpdate& update, int64_t snapshot_interval) {
  return std::max<int64_t>(0, update.version() - 1) / snapshot_interval;
}

}  // namespace

void PolicyPublisher::KeepLeagueVersions(int64_t snapshot_interval,
                                         int64_t pool_size) {
  absl::MutexLock lock(&mu_);
  snapshot_interval_ = std::max<int64_t>(0, snapshot_interval);
  pool_size_ = std::max<int64_t>(1, pool_size);
}

int64_t PolicyPublisher::Subscribe(
    PolicyCallback on_update, std::shared_ptr<const PolicyUpdate>* latest) {
  absl::MutexLock lock(&mu_);
  const int64_t id = ++next_id_;
  subscribers_[id] = std::move(on_update);
  *latest = latest_;
  if (latest_ == nullptr || snapshot_interval_ == 0) return id;
  // The actor freezes the version the latest stands for itself.
  const int64_t own = LeagueVersion(*latest_, snapshot_interval_);
  std::shared_ptr<PolicyUpdate> first;
  for (const auto& [version, update] : league_) {
    if (version >= own) break;
    if (first == nullptr) first = std::make_shared<PolicyUpdate>(*latest_);
    LeagueVersionParameters* kept = first->add_league_pool();
    kept->set_version(version);
    *kept->mutable_parameters() = update->parameters();
  }
  if (first != nullptr) *latest = std::move(first);
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

void PolicyPublisher::Publish(std::shared_ptr<const PolicyUpdate> update) {
  absl::MutexLock lock(&mu_);
  latest_ = std::move(update);
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

}  // namespace rl
