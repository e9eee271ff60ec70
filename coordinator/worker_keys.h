// Who holds each worker name. A registration is given a worker key (HMAC of
// the coordinator's secret and a random nonce, the nonce kept in the store
// so keys survive a coordinator restart); the operator may issue a worker
// credential for a name (HMAC of the secret and the name) that proves a
// process is that worker. No gRPC; not thread-safe (the coordinator's core
// calls it under its lock).
#ifndef RL_COORDINATOR_WORKER_KEYS_H_
#define RL_COORDINATOR_WORKER_KEYS_H_

#include <map>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/run_store.h"

namespace rl {

// The secret worker and run keys derive from: `key_secret` when given, else
// the one kept in <store_path>.secret (made, mode 0600, when missing), else
// random for an in-memory store.
absl::StatusOr<std::string> LoadKeySecret(const std::string& key_secret,
                                          const std::string& store_path);

// The credential that proves a process is worker `worker_name`, under
// `secret` (what `coordinator_main --issue_worker_credential` prints).
std::string WorkerCredentialFromSecret(const std::string& secret,
                                       const std::string& worker_name);

class WorkerKeys {
 public:
  // `store` outlives this.
  WorkerKeys(std::string secret, RunStore* store)
      : secret_(std::move(secret)), store_(store) {}

  // Reads the keys issued before a restart.
  absl::Status Load();

  std::string Credential(const std::string& worker_name) const {
    return WorkerCredentialFromSecret(secret_, worker_name);
  }
  // Whether `credential` (non-empty) is `worker_name`'s.
  bool IsCredential(const std::string& worker_name,
                    const std::string& credential) const;
  // Whether `key` (non-empty) is the key `worker_name` holds now.
  bool IsKey(const std::string& worker_name, const std::string& key) const;
  // Whether a key was issued for `worker_name` and not forgotten.
  bool Issued(const std::string& worker_name) const {
    return nonces_.count(worker_name) > 0;
  }
  // The key `worker_name` holds from now on: the current one when `keep`
  // (and there is one), else a new one, stored, that revokes the old.
  std::string Issue(const std::string& worker_name, bool keep);
  // The name is free again (its worker was lost); the store forgets it
  // with the worker (RunStore::RemoveWorker).
  void Forget(const std::string& worker_name) { nonces_.erase(worker_name); }

 private:
  std::string KeyFor(const std::string& worker_name,
                     const std::string& nonce) const;

  const std::string secret_;
  RunStore* const store_;
  std::map<std::string, std::string> nonces_;
};

}  // namespace rl

#endif  // RL_COORDINATOR_WORKER_KEYS_H_
