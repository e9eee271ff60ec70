#include "common/stream_quota.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace rl {

struct StreamPlace::State {
  mutable absl::Mutex mu;
  int open ABSL_GUARDED_BY(mu) = 0;
  // Clients with at least one open stream (entries go at zero: the map
  // stays as small as the clients connected now).
  std::map<std::string, int, std::less<>> per_client ABSL_GUARDED_BY(mu);
  int64_t refused_total ABSL_GUARDED_BY(mu) = 0;
  int64_t refused_per_client ABSL_GUARDED_BY(mu) = 0;
};

StreamPlace::~StreamPlace() {
  absl::MutexLock lock(&state_->mu);
  --state_->open;
  auto it = state_->per_client.find(client_);
  if (it != state_->per_client.end() && --it->second <= 0) {
    state_->per_client.erase(it);
  }
}

StreamQuota::StreamQuota(StreamQuotaOptions options)
    : options_(std::move(options)),
      state_(std::make_shared<StreamPlace::State>()) {}

absl::StatusOr<std::unique_ptr<StreamPlace>> StreamQuota::Take(
    absl::string_view client) {
  absl::MutexLock lock(&state_->mu);
  if (state_->open >= options_.max_total) {
    ++state_->refused_total;
    return absl::ResourceExhaustedError(
        absl::StrCat(options_.server, " has ", state_->open,
                     " open streams, at most ", options_.max_total, " (",
                     options_.total_flag, "); retry once one has ended"));
  }
  auto it = state_->per_client.find(client);
  const int mine = it == state_->per_client.end() ? 0 : it->second;
  if (mine >= options_.max_per_client) {
    ++state_->refused_per_client;
    return absl::ResourceExhaustedError(absl::StrCat(
        "client ", client, " has ", mine, " open streams to ", options_.server,
        ", at most ", options_.max_per_client, " per client (",
        options_.per_client_flag, "); retry once one has ended"));
  }
  ++state_->open;
  if (it == state_->per_client.end()) {
    state_->per_client.emplace(std::string(client), 1);
  } else {
    ++it->second;
  }
  return std::unique_ptr<StreamPlace>(
      new StreamPlace(state_, std::string(client)));
}

int StreamQuota::open() const {
  absl::MutexLock lock(&state_->mu);
  return state_->open;
}

int StreamQuota::open(absl::string_view client) const {
  absl::MutexLock lock(&state_->mu);
  auto it = state_->per_client.find(client);
  return it == state_->per_client.end() ? 0 : it->second;
}

int64_t StreamQuota::refused_total() const {
  absl::MutexLock lock(&state_->mu);
  return state_->refused_total;
}

int64_t StreamQuota::refused_per_client() const {
  absl::MutexLock lock(&state_->mu);
  return state_->refused_per_client;
}

}  // namespace rl
