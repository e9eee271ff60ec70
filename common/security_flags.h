// The security flags of every server and worker main:
//   --tls_cert --tls_key --tls_ca --tls_server_name --tokens --token_file
//   --insecure
// DEFINES them: include it from a main's .cc only (one per binary), so
// that libraries, tests and benches carry no flags of their own. The main
// turns them into a Security (SecurityFromFlags) and hands it to its
// process's options (every *ProcessOptions has `security`); it may make it
// the process default as well, for the odd channel made without options.
#ifndef RL_COMMON_SECURITY_FLAGS_H_
#define RL_COMMON_SECURITY_FLAGS_H_

#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "common/security.h"

ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate of this process: served with TLS, and presented "
          "to servers that ask for client certificates (mutual TLS).");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA certificate: clients verify servers against it (and speak "
          "TLS); servers verify client certificates and require one of "
          "workers.");
ABSL_FLAG(std::string, tls_server_name, "",
          "Name to check in servers' certificates instead of the host "
          "dialled.");
ABSL_FLAG(std::string, tokens, "",
          "Servers: token table, lines \"<token> <role> <name>\" (roles: "
          "user, worker, admin); every call then needs a bearer token.");
ABSL_FLAG(std::string, token_file, "",
          "Clients: file holding the bearer token sent on every call.");
ABSL_FLAG(bool, insecure, false,
          "Plaintext without tokens, even off loopback: trusted networks "
          "only. Without it a server refuses to listen beyond loopback "
          "without TLS.");

namespace rl {

// The options the flags give.
inline SecurityOptions SecurityOptionsFromFlags() {
  SecurityOptions options;
  options.tls_cert_file = absl::GetFlag(FLAGS_tls_cert);
  options.tls_key_file = absl::GetFlag(FLAGS_tls_key);
  options.tls_ca_file = absl::GetFlag(FLAGS_tls_ca);
  options.tls_server_name = absl::GetFlag(FLAGS_tls_server_name);
  options.tokens_file = absl::GetFlag(FLAGS_tokens);
  options.token_file = absl::GetFlag(FLAGS_token_file);
  options.insecure = absl::GetFlag(FLAGS_insecure);
  return options;
}

// The flags' files loaded, made the process default too. INVALID_ARGUMENT
// naming the flag whose file cannot be read.
inline absl::StatusOr<std::shared_ptr<const Security>> SecurityFromFlags() {
  absl::StatusOr<std::shared_ptr<const Security>> security =
      Security::Load(SecurityOptionsFromFlags());
  if (security.ok()) Security::SetProcessDefault(*security);
  return security;
}

}  // namespace rl

#endif  // RL_COMMON_SECURITY_FLAGS_H_
