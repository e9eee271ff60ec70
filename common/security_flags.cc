#include "common/security_flags.h"

#include "absl/flags/flag.h"
#include "common/status.h"

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

SecurityOptions SecurityOptionsFromFlags() {
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

absl::Status InstallSecurityFromFlags() {
  ASSIGN_OR_RETURN(std::shared_ptr<const Security> security,
                   Security::Load(SecurityOptionsFromFlags()));
  Security::SetProcessDefault(std::move(security));
  return absl::OkStatus();
}

std::vector<std::string> SecurityFlags(const SecurityOptions& options) {
  std::vector<std::string> flags;
  auto add = [&](const char* name, const std::string& value) {
    if (!value.empty()) flags.push_back(std::string("--") + name + "=" + value);
  };
  add("tls_cert", options.tls_cert_file);
  add("tls_key", options.tls_key_file);
  add("tls_ca", options.tls_ca_file);
  add("tls_server_name", options.tls_server_name);
  add("tokens", options.tokens_file);
  add("token_file", options.token_file);
  if (options.insecure) flags.push_back("--insecure");
  return flags;
}

}  // namespace rl
