#include "common/security.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "common/log_limiter.h"
#include "common/logging.h"
#include "common/status.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/security/auth_metadata_processor.h"
#include "proto/roles.pb.h"

namespace rl {
namespace {

constexpr uint32_t kAllRoles = kRoleUser | kRoleWorker | kRoleAdmin;

absl::StatusOr<std::string> ReadFile(const std::string& path,
                                     absl::string_view flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, ": cannot read ", path, " (", std::strerror(errno), ")"));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// "host" of "host:port", "[v6]:port" or a bare host.
std::string HostOf(absl::string_view address) {
  absl::ConsumePrefix(&address, "ipv4:");
  absl::ConsumePrefix(&address, "ipv6:");
  absl::ConsumePrefix(&address, "dns:///");
  if (absl::StartsWith(address, "[")) {
    const size_t end = address.find(']');
    return std::string(
        address.substr(1, end == address.npos ? address.npos : end - 1));
  }
  const size_t colon = address.rfind(':');
  if (colon != address.npos && address.find(':') == colon) {
    return std::string(address.substr(0, colon));
  }
  return std::string(address);
}

class TokenProcessor final : public grpc::AuthMetadataProcessor {
 public:
  explicit TokenProcessor(const Security* security) : security_(security) {}

  bool IsBlocking() const override { return false; }

  grpc::Status Process(const InputMetadata& metadata,
                       grpc::AuthContext* context,
                       OutputMetadata* /*consumed_metadata*/,
                       OutputMetadata* /*response_metadata*/) override {
    std::string method;
    std::string token;
    for (const auto& [key, value] : metadata) {
      const absl::string_view k(key.data(), key.size());
      const absl::string_view v(value.data(), value.size());
      if (k == ":path") {
        method = std::string(v);
      } else if (k == "authorization") {
        absl::string_view bearer = v;
        if (absl::ConsumePrefix(&bearer, "Bearer ")) {
          token = std::string(bearer);
        }
        // Not consumed: the handler reads the caller from it
        // (CallerIdentity), per call.
      }
    }
    const uint32_t allowed = AllowedRoles(method);
    if (allowed & kAnonymous) return grpc::Status::OK;
    absl::StatusOr<Identity> identity = security_->Authorize(method, token);
    // With a CA, workers (and, without tokens, everyone) must also
    // present a client certificate that it signed. The context is the
    // connection's (gRPC hands every call of a connection the same one):
    // it is only read here, never written, so calls cannot race on it and
    // nothing of one call is seen by another (CallerIdentity reads the
    // caller from its own call's token).
    const bool verified_peer =
        !context->FindPropertyValues("x509_pem_cert").empty();
    if (identity.ok() && !security_->options().tls_ca_file.empty() &&
        !verified_peer &&
        (identity->role == kRoleWorker || !security_->tokens_required())) {
      identity = absl::UnauthenticatedError(
          absl::StrCat(identity->name,
                       " presented no client certificate (mutual TLS is "
                       "required of workers)"));
    }
    if (!identity.ok()) {
      // The caller is not known here: lines are limited per reason (which
      // names the token's holder where there is one).
      static LogLimiter* const limiter = new LogLimiter();
      const std::string reason(identity.status().message());
      std::string left_out;
      if (limiter->Allow(reason, &left_out)) {
        RL_LOG_WARNING("refused {}: {}{}", method, reason, left_out);
      }
      return grpc::Status(
          identity.status().code() == absl::StatusCode::kUnauthenticated
              ? grpc::StatusCode::UNAUTHENTICATED
              : grpc::StatusCode::PERMISSION_DENIED,
          std::string(identity.status().message()));
    }
    return grpc::Status::OK;
  }

 private:
  const Security* const security_;  // Outlives the server (process-wide).
};

struct ProcessSecurity {
  absl::Mutex mu;
  std::shared_ptr<const Security> security ABSL_GUARDED_BY(mu);
};

ProcessSecurity& Process() {
  static ProcessSecurity* const process = new ProcessSecurity();  // never freed
  return *process;
}

}  // namespace

absl::StatusOr<Role> ParseRole(absl::string_view name) {
  if (name == "user") return kRoleUser;
  if (name == "worker") return kRoleWorker;
  if (name == "admin") return kRoleAdmin;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown role \"", name, "\" (user, worker, admin)"));
}

const char* RoleName(Role role) {
  switch (role) {
    case kRoleUser:
      return "user";
    case kRoleWorker:
      return "worker";
    case kRoleAdmin:
      return "admin";
  }
  return "unknown";
}

uint32_t AllowedRoles(absl::string_view method) {
  if (absl::StartsWith(method, "/grpc.health.v1.Health/")) {
    return kAllRoles | kAnonymous;
  }
  // Reflection tells what the services are: any authenticated caller.
  if (absl::StartsWith(method, "/grpc.reflection.")) return kAllRoles;
  // The web page's JSON API and Prometheus scrapes (HTTP).
  if (method == "GET /api") return kRoleUser | kRoleAdmin;
  if (method == "GET /metrics") return kAllRoles;
  // An RPC: its (rl.roles) option (proto/roles.proto), from the
  // descriptors linked into this binary. "/rl.RunService/GetRun" is
  // rl.RunService.GetRun there.
  absl::string_view name = method;
  if (!absl::ConsumePrefix(&name, "/")) return kRoleAdmin;
  const google::protobuf::MethodDescriptor* descriptor =
      google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(
          absl::StrReplaceAll(name, {{"/", "."}}));
  if (descriptor == nullptr || !descriptor->options().HasExtension(rl::roles)) {
    return kRoleAdmin;
  }
  const MethodRoles& roles = descriptor->options().GetExtension(rl::roles);
  return (roles.user() ? kRoleUser : 0) | (roles.worker() ? kRoleWorker : 0) |
         (roles.admin() ? kRoleAdmin : 0);
}

absl::StatusOr<std::shared_ptr<const Security>> Security::Load(
    const SecurityOptions& options) {
  auto security = std::make_shared<Security>();
  security->options_ = options;
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_cert and --tls_key go together (one was given without the "
        "other)");
  }
  if (!options.tls_cert_file.empty()) {
    ASSIGN_OR_RETURN(security->cert_,
                     ReadFile(options.tls_cert_file, "tls_cert"));
    ASSIGN_OR_RETURN(security->key_, ReadFile(options.tls_key_file, "tls_key"));
  }
  if (!options.tls_ca_file.empty()) {
    ASSIGN_OR_RETURN(security->ca_, ReadFile(options.tls_ca_file, "tls_ca"));
  }
  if (!options.token_file.empty()) {
    ASSIGN_OR_RETURN(std::string text,
                     ReadFile(options.token_file, "token_file"));
    security->token_ = std::string(absl::StripAsciiWhitespace(text));
    if (security->token_.empty() ||
        security->token_.find_first_of(" \t\r\n") != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("--token_file: ", options.token_file,
                       " must hold one token (no spaces)"));
    }
  }
  if (!options.tokens_file.empty()) {
    ASSIGN_OR_RETURN(const std::string text,
                     ReadFile(options.tokens_file, "tokens"));
    int line_number = 0;
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      ++line_number;
      line = absl::StripAsciiWhitespace(line.substr(0, line.find('#')));
      if (line.empty()) continue;
      std::vector<absl::string_view> fields =
          absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
      const std::string where =
          absl::StrCat("--tokens: ", options.tokens_file, ":", line_number);
      if (fields.size() != 3) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": expected \"<token> <role> <name>\""));
      }
      absl::StatusOr<Role> role = ParseRole(fields[1]);
      if (!role.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": ", role.status().message()));
      }
      if (fields[0].size() < 16) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": token of ", fields[0].size(),
                         " characters is too short to be secret (16 or more)"));
      }
      security->tokens_[std::string(fields[0])] =
          Identity{std::string(fields[2]), *role};
    }
    if (security->tokens_.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--tokens: ", options.tokens_file, " holds no token"));
    }
  }
  return std::shared_ptr<const Security>(std::move(security));
}

std::shared_ptr<const Security> Security::ProcessDefault() {
  ProcessSecurity& process = Process();
  absl::MutexLock lock(&process.mu);
  if (process.security == nullptr) {
    process.security = *Security::Load(SecurityOptions{});
  }
  return process.security;
}

void Security::SetProcessDefault(std::shared_ptr<const Security> security) {
  ProcessSecurity& process = Process();
  absl::MutexLock lock(&process.mu);
  process.security = std::move(security);
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>>
Security::ServerCredentials(const std::string& address) const {
  std::shared_ptr<grpc::ServerCredentials> credentials;
  if (options_.insecure) {
    // gRPC cannot run an auth processor on plaintext: no tokens either.
    return grpc::InsecureServerCredentials();
  }
  if (tls()) {
    grpc::SslServerCredentialsOptions ssl(
        ca_.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                    : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
    ssl.pem_root_certs = ca_;
    ssl.pem_key_cert_pairs.push_back({key_, cert_});
    credentials = grpc::SslServerCredentials(ssl);
  } else if (IsLoopbackAddress(address)) {
    credentials = grpc::experimental::LocalServerCredentials(LOCAL_TCP);
  } else {
    // A bad flag (exit 2), like any other.
    return absl::InvalidArgumentError(absl::StrCat(
        "refusing to listen on ", address,
        " without TLS: give --tls_cert and --tls_key (and --tls_ca to "
        "verify workers), listen on loopback, or pass --insecure on a "
        "trusted network"));
  }
  if (tokens_required() || !ca_.empty()) {
    credentials->SetAuthMetadataProcessor(
        std::make_shared<TokenProcessor>(this));
  }
  return credentials;
}

std::shared_ptr<grpc::ChannelCredentials> Security::ChannelCredentials(
    const std::string& target) const {
  std::shared_ptr<grpc::ChannelCredentials> channel;
  if (options_.insecure) return grpc::InsecureChannelCredentials();
  if (!ca_.empty()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = ca_;
    ssl.pem_private_key = key_;
    ssl.pem_cert_chain = cert_;
    channel = grpc::SslCredentials(ssl);
  } else if (IsLoopbackAddress(target)) {
    channel = grpc::experimental::LocalCredentials(LOCAL_TCP);
  } else {
    return grpc::InsecureChannelCredentials();
  }
  if (token_.empty()) return channel;
  return grpc::CompositeChannelCredentials(
      channel, grpc::AccessTokenCredentials(token_));
}

absl::StatusOr<Identity> Security::Authenticate(absl::string_view token) const {
  if (!tokens_required()) return Identity{"anonymous", kRoleAdmin};
  if (token.empty()) {
    return absl::UnauthenticatedError("no bearer token");
  }
  const auto it = tokens_.find(token);
  if (it == tokens_.end()) {
    return absl::UnauthenticatedError("unknown bearer token");
  }
  return it->second;
}

absl::StatusOr<Identity> Security::Authorize(absl::string_view method,
                                             absl::string_view token) const {
  const uint32_t allowed = AllowedRoles(method);
  if (allowed & kAnonymous) return Identity{"anonymous", kRoleUser};
  ASSIGN_OR_RETURN(Identity identity, Authenticate(token));
  if ((allowed & identity.role) == 0) {
    return absl::PermissionDeniedError(absl::StrCat(identity.name, " (role ",
                                                    RoleName(identity.role),
                                                    ") may not call ", method));
  }
  return identity;
}

bool IsLoopbackAddress(absl::string_view address) {
  const std::string host = absl::AsciiStrToLower(HostOf(address));
  if (host == "localhost") return true;
  // Parsed as an address, not matched as text: "127.attacker.example" and
  // "127.0.0.1.nip.io" are names that any DNS server may point anywhere.
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6{};
  return inet_pton(AF_INET6, host.c_str(), &v6) == 1 &&
         IN6_IS_ADDR_LOOPBACK(&v6);
}

Identity CallerIdentity(const grpc::ServerContextBase& context,
                        const Security& security) {
  if (!security.tokens_required()) return Identity{"anonymous", kRoleAdmin};
  const auto& metadata = context.client_metadata();
  for (auto [it, end] = metadata.equal_range("authorization"); it != end;
       ++it) {
    absl::string_view bearer(it->second.data(), it->second.size());
    if (!absl::ConsumePrefix(&bearer, "Bearer ")) continue;
    absl::StatusOr<Identity> identity = security.Authenticate(bearer);
    if (identity.ok()) return *std::move(identity);
  }
  // Only a call the auth processor did not see (an in-process channel)
  // gets here: the least role.
  return Identity{"unauthenticated", kRoleUser};
}

std::string CallerClient(const grpc::ServerContextBase& context,
                         const Security& security) {
  // "ipv4:10.0.0.7:43210" -> "ipv4:10.0.0.7"; "ipv6:[::1]:43210" ->
  // "ipv6:[::1]"; anything else (unix:, in-process) as it is.
  std::string peer = context.peer();
  const size_t colon = peer.rfind(':');
  if ((absl::StartsWith(peer, "ipv4:") || absl::StartsWith(peer, "ipv6:")) &&
      colon != std::string::npos && colon > 5) {
    peer.resize(colon);
  }
  return absl::StrCat(CallerIdentity(context, security).name, "@", peer);
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
