// Locked doors, in one place: TLS from PEM files, bearer tokens with roles,
// and the table of which role may call which method. Every server built by
// StartServer and every channel made by CreateChannel goes through here.
//
//   server: TLS (--tls_cert, --tls_key; --tls_ca: client certificates are
//           verified, and calls in the worker role must present one) or, on
//           loopback only, gRPC's local credentials; a listener on any other
//           address without TLS refuses to start unless --insecure.
//           With --tokens, every call but health checks needs
//           "authorization: Bearer <token>", the token's role must be one
//           the method allows (AllowedRoles), else UNAUTHENTICATED or
//           PERMISSION_DENIED, logged without the secret.
//   client: TLS when --tls_ca is given, local credentials to a loopback
//           target, plaintext otherwise (or always with --insecure); the
//           token from --token_file rides on every call (never on
//           plaintext).
#ifndef RL_COMMON_SECURITY_H_
#define RL_COMMON_SECURITY_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/secrets.h"
#include "grpcpp/grpcpp.h"

namespace rl {

// Roles, as bits so that a method can allow several.
enum Role : uint32_t {
  kRoleUser = 1,    // submit, list, cancel, watch runs; query telemetry
  kRoleWorker = 2,  // register, heartbeat, report; stream segments, policies
  kRoleAdmin = 4,   // everything
};

// "user", "worker", "admin"; INVALID_ARGUMENT for anything else.
absl::StatusOr<Role> ParseRole(absl::string_view name);
const char* RoleName(Role role);

// The roles that may call `method` ("/rl.RunService/SubmitRun"): an RPC's
// own (rl.roles) option (proto/roles.proto). Health checks are open to all
// (kAllRoles | kAnonymous); "GET /api" and "GET /metrics" are the HTTP
// endpoints'; an RPC without the option, or not linked into this binary,
// is admin only.
inline constexpr uint32_t kAnonymous = 8;
uint32_t AllowedRoles(absl::string_view method);

struct SecurityOptions {
  // PEM files. A server with cert and key speaks TLS; a client with a
  // cert and key presents them (mutual TLS).
  std::string tls_cert_file;
  std::string tls_key_file;
  // Servers: verify client certificates against this CA. Clients: verify
  // the server against it (and speak TLS).
  std::string tls_ca_file;
  // Clients: check this name in the server's certificate instead of the
  // target's host (e.g. when dialling an IP the certificate does not name).
  std::string tls_server_name;
  // Servers: the token table, one "<token> <role> <name>" per line ('#'
  // starts a comment). Empty: no token is asked for.
  std::string tokens_file;
  // Clients: a file holding the bearer token to send.
  std::string token_file;
  // Plaintext and no tokens, even off loopback (trusted networks only).
  bool insecure = false;
};

struct Identity {
  std::string name;
  Role role = kRoleUser;
};

// Loaded credentials (the files are read once, at Load).
class Security {
 public:
  // INVALID_ARGUMENT naming the flag and file that cannot be read or
  // parsed (a cert without its key, a token line with an unknown role).
  static absl::StatusOr<std::shared_ptr<const Security>> Load(
      const SecurityOptions& options);

  // The process-wide default that StartServer and CreateChannel use when
  // their options name none: set once by a main from its flags. Initially
  // empty options (loopback without tokens; plaintext elsewhere refused).
  static std::shared_ptr<const Security> ProcessDefault();
  static void SetProcessDefault(std::shared_ptr<const Security> security);

  // Credentials for a server listening on `address` ("host:port").
  // INVALID_ARGUMENT (a bad flag) for a non-loopback address without TLS
  // or --insecure.
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
      const std::string& address) const;

  // Credentials for a channel to `target`.
  std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(
      const std::string& target) const;

  // The identity a bearer token stands for: UNAUTHENTICATED when tokens are
  // required and `token` is empty or unknown. Without a token table: an
  // admin named "anonymous".
  absl::StatusOr<Identity> Authenticate(absl::string_view token) const;

  // Authenticate, then check the role against AllowedRoles(method):
  // PERMISSION_DENIED naming the role and method. Used by the gRPC auth
  // processor and the HTTP endpoints alike.
  absl::StatusOr<Identity> Authorize(absl::string_view method,
                                     absl::string_view token) const;

  bool tokens_required() const { return !tokens_.empty(); }
  bool tls() const { return !cert_.empty(); }
  bool insecure() const { return options_.insecure; }
  // The token this process sends as a client ("" for none).
  const std::string& token() const { return token_; }
  const SecurityOptions& options() const { return options_; }

 private:
  SecurityOptions options_;
  std::string cert_, key_, ca_;
  std::string token_;
  std::map<std::string, Identity, std::less<>> tokens_;
};

// True for 127.0.0.0/8, ::1 and "localhost" hosts of "host:port" (or a bare
// host). 0.0.0.0 and [::] are not loopback: they listen everywhere.
bool IsLoopbackAddress(absl::string_view address);

// The caller of this call: the identity of the bearer token it sent
// (already checked by the auth processor); "anonymous" (admin) where no
// tokens are asked for. Read per call from the call's own metadata: gRPC
// gives every call of a connection one shared AuthContext, so nothing
// per call may be kept there (concurrent calls would race on it, and a
// connection would keep its first caller's identity).
Identity CallerIdentity(const grpc::ServerContextBase& context,
                        const Security& security);

// A client for per-client quotas: the caller's identity and the host it
// calls from, e.g. "worker@ipv4:10.0.0.7" (one token may be shared by
// many hosts; one host may hold several tokens).
std::string CallerClient(const grpc::ServerContextBase& context,
                         const Security& security);

// `options` as command-line flags for a child process (--tls_cert=...,
// --insecure; empty values left out): what a parent passes on to the
// workers and services it starts.
std::vector<std::string> SecurityFlags(const SecurityOptions& options);

}  // namespace rl

#endif  // RL_COMMON_SECURITY_H_
