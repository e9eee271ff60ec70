#include "common/secrets.h"

#include <fcntl.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace rl {

std::string NewToken() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    RL_LOG_ERROR("RAND_bytes failed; cannot make a token");
    std::abort();
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
}

absl::Status WriteSecretFile(const std::string& path, absl::string_view text) {
  const std::string temp = path + ".tmp";
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot write ", temp, ": ", std::strerror(errno)));
  }
  ::fchmod(fd, 0600);  // An existing file keeps its mode through O_CREAT.
  const ssize_t written = ::write(fd, text.data(), text.size());
  const bool ok = written == static_cast<ssize_t>(text.size()) &&
                  ::fsync(fd) == 0 && ::close(fd) == 0;
  if (!ok || ::rename(temp.c_str(), path.c_str()) != 0) {
    ::unlink(temp.c_str());
    return absl::UnavailableError(
        absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

std::string DeriveKey(absl::string_view key, absl::string_view message) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(),
       digest, &length);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), length));
}

std::string ActorKey(absl::string_view run_key, int actor_id) {
  return DeriveKey(run_key, absl::StrCat("actor/", actor_id));
}

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= a[i] ^ b[i];
  return diff == 0;
}

absl::StatusOr<std::string> ReadSecretFile(const std::string& path,
                                           absl::string_view flag) {
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": cannot read ", path));
  }
  std::string secret, extra;
  if (!(in >> secret) || (in >> extra)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, ": ", path, " must hold one token (no spaces)"));
  }
  return secret;
}

absl::StatusOr<std::string> EnsureSecretFile(const std::string& path) {
  std::ifstream in(path);
  std::string secret;
  if (in >> secret && secret.size() >= 16) return secret;
  secret = NewToken();
  if (absl::Status written = WriteSecretFile(path, secret + "\n");
      !written.ok()) {
    return written;
  }
  return secret;
}

}  // namespace rl
