// Hands every new policy version to the learner's subscribers (the policy
// streams of its actors): one encoded message shared by all, and the latest
// kept for those who subscribe later. In a league run it also keeps the
// league's frozen versions (the version current when each snapshot was
// due), which an actor that starts again is sent with the latest
// (PolicyUpdate.league_pool) to begin its league's pool with.
#ifndef RL_LEARNER_POLICY_PUBLISHER_H_
#define RL_LEARNER_POLICY_PUBLISHER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "proto/learner.pb.h"

namespace rl {

using PolicyCallback = std::function<void(std::shared_ptr<const PolicyUpdate>)>;

// What the update that carries a league's kept versions may reach: half
// the 256 MiB a learner sends and an actor receives.
inline constexpr int64_t kMaxLeaguePoolUpdateBytes = int64_t{128} << 20;

class PolicyPublisher {
 public:
  // Keep a league's versions from now on: version k is the first version
  // published at or past k x `snapshot_interval` updates (version v is the
  // policy after v - 1 updates), as the actors' leagues number them; the
  // newest `pool_size` are kept.
  void KeepLeagueVersions(int64_t snapshot_interval, int64_t pool_size,
                          int64_t max_update_bytes = kMaxLeaguePoolUpdateBytes);

  // `on_update` is called with every later version (from the publishing
  // thread, under the publisher's lock: it must not subscribe or
  // unsubscribe); `*latest` is the latest now (null before the first).
  int64_t Subscribe(PolicyCallback on_update,
                    std::shared_ptr<const PolicyUpdate>* latest);
  void Unsubscribe(int64_t subscriber_id);
  std::shared_ptr<const PolicyUpdate> Latest() const;
  // The latest with, in league_pool, the league's kept versions older than
  // the one it stands for (oldest first; the newest of them that keep it
  // within max_update_bytes). Built once per version and shared by every
  // subscriber that asks; the latest itself where nothing is kept; null
  // before the first version.
  std::shared_ptr<const PolicyUpdate> LatestWithLeaguePool()
      ABSL_LOCKS_EXCLUDED(mu_);
  void Publish(std::shared_ptr<const PolicyUpdate> update);

  // The league's kept versions, oldest first: the newest of them that
  // stay within max_update_bytes together (what LatestWithLeaguePool
  // could ever send), for a checkpoint. Empty without a league.
  std::vector<LeagueVersionParameters> KeptLeagueVersions() const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Puts back the versions a checkpoint kept (oldest first), in place of
  // those kept now; call it after KeepLeagueVersions and before the first
  // Publish. The newest pool_size stay.
  void RestoreLeagueVersions(std::vector<LeagueVersionParameters> versions)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int64_t, PolicyCallback> subscribers_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const PolicyUpdate> latest_ ABSL_GUARDED_BY(mu_);
  int64_t snapshot_interval_ ABSL_GUARDED_BY(mu_) = 0;  // 0: no league
  int64_t pool_size_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t max_update_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // The league's versions, oldest first: (version, the update it was).
  std::deque<std::pair<int64_t, std::shared_ptr<const PolicyUpdate>>> league_
      ABSL_GUARDED_BY(mu_);
  // LatestWithLeaguePool's, and the latest it was made from.
  std::shared_ptr<const PolicyUpdate> with_pool_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const PolicyUpdate> with_pool_of_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rl

#endif  // RL_LEARNER_POLICY_PUBLISHER_H_
