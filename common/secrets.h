// Secrets without gRPC: random tokens, files only their owner reads, and the
// keys the coordinator derives for workers and runs.
#ifndef RL_COMMON_SECRETS_H_
#define RL_COMMON_SECRETS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rl {

// Call metadata under which a run's workers present their key
// (Assignment.run_key) to its learners: a learner's is the run's key, an
// actor's is ActorKey(run key, its actor id), which it presents with that id
// (kActorIdMetadata), so it can stream as no other actor.
inline constexpr char kRunKeyMetadata[] = "x-rl-run-key";
inline constexpr char kActorIdMetadata[] = "x-rl-actor-id";

// A random token: 32 bytes from the OS, as 64 hex digits.
std::string NewToken();

// Writes `text` to `path` with mode 0600 (created or replaced).
absl::Status WriteSecretFile(const std::string& path, absl::string_view text);

// HMAC-SHA256 of `message` under `key`, as hex: the per-worker and per-run
// keys the coordinator hands out are derived this way, so they survive its
// restarts without being stored.
std::string DeriveKey(absl::string_view key, absl::string_view message);

// The key of actor `actor_id` of the run whose key is `run_key`.
std::string ActorKey(absl::string_view run_key, int actor_id);

// Equal strings, in time independent of where they differ.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

// The one token in `path` (e.g. a worker credential), surrounding
// whitespace dropped: INVALID_ARGUMENT naming `flag` when it cannot be read
// or holds none.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path,
                                           absl::string_view flag);

// The secret in `path` (one token), made and written with mode 0600 when
// the file is missing or holds none.
absl::StatusOr<std::string> EnsureSecretFile(const std::string& path);

}  // namespace rl

#endif  // RL_COMMON_SECRETS_H_
