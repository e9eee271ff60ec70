#include "learner/policy_publisher.h"

#include <utility>

namespace rl {

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

void PolicyPublisher::Publish(std::shared_ptr<const PolicyUpdate> update) {
  absl::MutexLock lock(&mu_);
  latest_ = std::move(update);
  for (const auto& [id, callback] : subscribers_) callback(latest_);
}

}  // namespace rl
