// Hands every new policy version to the learner's subscribers (the policy
// streams of its actors): one encoded message shared by all, and the latest
// kept for those who subscribe later.
#ifndef RL_LEARNER_POLICY_PUBLISHER_H_
#define RL_LEARNER_POLICY_PUBLISHER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "proto/learner.pb.h"

namespace rl {

using PolicyCallback = std::function<void(std::shared_ptr<const PolicyUpdate>)>;

class PolicyPublisher {
 public:
  // `on_update` is called with every later version (from the publishing
  // thread, under the publisher's lock: it must not subscribe or
  // unsubscribe); `*latest` is the latest now (null before the first).
  int64_t Subscribe(PolicyCallback on_update,
                    std::shared_ptr<const PolicyUpdate>* latest);
  void Unsubscribe(int64_t subscriber_id);
  std::shared_ptr<const PolicyUpdate> Latest() const;
  void Publish(std::shared_ptr<const PolicyUpdate> update);

 private:
  mutable absl::Mutex mu_;
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int64_t, PolicyCallback> subscribers_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const PolicyUpdate> latest_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rl

#endif  // RL_LEARNER_POLICY_PUBLISHER_H_
