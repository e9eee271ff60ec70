// Places for a server's concurrent streams: at most `max_total` at once,
// and at most `max_per_client` for any one client (an identity and the host
// it calls from: common/client_identity.h), so that one client cannot take
// every place. A place is given back when its StreamPlace is destroyed
// (a reactor holds it until it is deleted, after OnDone). Refusals are
// RESOURCE_EXHAUSTED naming the limit and its flag, and are counted.
// No gRPC here: the services turn the status into a gRPC one.
#ifndef RL_COMMON_STREAM_QUOTA_H_
#define RL_COMMON_STREAM_QUOTA_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace rl {

struct StreamQuotaOptions {
  int max_total = 1024;
  int max_per_client = 256;
  // Named in refusals, e.g. "this learner", "--max_streams",
  // "--max_streams_per_client".
  std::string server = "this server";
  std::string total_flag;
  std::string per_client_flag;
};

class StreamQuota;

// One place; gives it back when destroyed. It keeps the quota's state
// alive, so it may outlive the StreamQuota.
class StreamPlace {
 public:
  ~StreamPlace();
  StreamPlace(const StreamPlace&) = delete;
  StreamPlace& operator=(const StreamPlace&) = delete;

 private:
  friend class StreamQuota;
  struct State;
  StreamPlace(std::shared_ptr<State> state, std::string client)
      : state_(std::move(state)), client_(std::move(client)) {}
  std::shared_ptr<State> state_;
  std::string client_;
};

class StreamQuota {
 public:
  explicit StreamQuota(StreamQuotaOptions options);

  // A place for one more stream of `client`, or RESOURCE_EXHAUSTED.
  absl::StatusOr<std::unique_ptr<StreamPlace>> Take(absl::string_view client);

  int open() const;
  int open(absl::string_view client) const;
  // Refused because the server was full / the client had its share.
  int64_t refused_total() const;
  int64_t refused_per_client() const;

 private:
  const StreamQuotaOptions options_;
  std::shared_ptr<StreamPlace::State> state_;
};

}  // namespace rl

#endif  // RL_COMMON_STREAM_QUOTA_H_
