// The command-line flags of common/security.h, shared by every main:
//   --tls_cert --tls_key --tls_ca --tls_server_name --tokens --token_file
//   --insecure
#ifndef RL_COMMON_SECURITY_FLAGS_H_
#define RL_COMMON_SECURITY_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/security.h"

namespace rl {

// The options the flags give.
SecurityOptions SecurityOptionsFromFlags();

// Loads them and makes them the process default (Security::SetProcessDefault)
// for every server and channel this process makes. INVALID_ARGUMENT naming
// the flag whose file cannot be read.
absl::Status InstallSecurityFromFlags();

// `options` as flags for a child process (empty values left out).
std::vector<std::string> SecurityFlags(const SecurityOptions& options);

}  // namespace rl

#endif  // RL_COMMON_SECURITY_FLAGS_H_
