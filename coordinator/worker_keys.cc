#include "coordinator/worker_keys.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/secrets.h"
#include "common/status.h"

namespace rl {

absl::StatusOr<std::string> LoadKeySecret(const std::string& key_secret,
                                          const std::string& store_path) {
  if (!key_secret.empty()) return key_secret;
  if (store_path.empty() || store_path == ":memory:") return NewToken();
  return EnsureSecretFile(store_path + ".secret");
}

std::string WorkerCredentialFromSecret(const std::string& secret,
                                       const std::string& worker_name) {
  return DeriveKey(secret, "credential/" + worker_name);
}

absl::Status WorkerKeys::Load() {
  ASSIGN_OR_RETURN(nonces_, store_->WorkerNonces());
  return absl::OkStatus();
}

std::string WorkerKeys::KeyFor(const std::string& worker_name,
                               const std::string& nonce) const {
  return DeriveKey(secret_, absl::StrCat("worker/", worker_name, "/", nonce));
}

bool WorkerKeys::IsCredential(const std::string& worker_name,
                              const std::string& credential) const {
  return !credential.empty() &&
         ConstantTimeEquals(credential, Credential(worker_name));
}

bool WorkerKeys::IsKey(const std::string& worker_name,
                       const std::string& key) const {
  const auto nonce = nonces_.find(worker_name);
  return !key.empty() && nonce != nonces_.end() &&
         ConstantTimeEquals(key, KeyFor(worker_name, nonce->second));
}

std::string WorkerKeys::Issue(const std::string& worker_name, bool keep) {
  std::string& nonce = nonces_[worker_name];
  if (!keep || nonce.empty()) {
    nonce = NewToken();
    if (absl::Status stored = store_->PutWorkerNonce(worker_name, nonce);
        !stored.ok()) {
      RL_LOG_WARNING(
          "cannot store the key of worker {} (it must register again after "
          "a coordinator restart): {}",
          worker_name, stored.ToString());
    }
  }
  return KeyFor(worker_name, nonce);
}

}  // namespace rl
