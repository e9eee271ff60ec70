// Hands every new policy version to the learner's subscribers (the policy
// streams of its actors): one encoded message shared by all, and the latest
// kept for those who subscribe later. In a league run it also keeps the
// league's frozen versions (the version current when each snapshot was
// due), and a new subscriber's first update carries them
// (PolicyUpdate.league_pool): an actor that starts again begins with the
// pool the league had.
#ifndef RL_LEARNER_POLICY_PUBLISHER_H_
#define RL_LEARNER_POLICY_PUBLISHER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "proto/learner.pb.h"

namespace rl {

using PolicyCallback = std::function<void(std::shared_ptr<const PolicyUpdate>)>;

class PolicyPublisher {
 public:
  // Keep a league's versions from now on: version k is the first version
  // published at or past k x `snapshot_interval` updates (version v is the
  // policy after v - 1 updates), as the actors' leagues number them; the
  // newest `pool_size` are kept.
  void KeepLeagueVersions(int64_t snapshot_interval, int64_t pool_size);

  // `on_update` is called with every later version (from the publishing
  // thread, under the publisher's lock: it must not subscribe or
  // unsubscribe); `*latest` is the latest now (null before the first),
  // with the league's kept versions older than its own in league_pool.
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
  int64_t snapshot_interval_ ABSL_GUARDED_BY(mu_) = 0;  // 0: no league
  int64_t pool_size_ ABSL_GUARDED_BY(mu_) = 0;
  // The league's versions, oldest first: (version, the update it was).
  std::deque<std::pair<int64_t, std::shared_ptr<const PolicyUpdate>>> league_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace rl

#endif  // RL_LEARNER_POLICY_PUBLISHER_H_
