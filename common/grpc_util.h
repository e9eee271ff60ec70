// gRPC in one place: servers with health checking (grpc.health.v1) and
// reflection, port 0 reporting the bound port, and the channel arguments
// (keepalive, message-size limits) both sides use.
#ifndef RL_COMMON_GRPC_UTIL_H_
#define RL_COMMON_GRPC_UTIL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/security.h"
#include "grpcpp/grpcpp.h"

namespace rl {

// Default largest message, both directions. Methods that carry tensors
// (rollout segments, policies) raise it for their own channels and servers.
inline constexpr int kDefaultMaxMessageBytes = 4 << 20;

struct ServerOptions {
  // "host:port"; port 0 picks a free port (see RunningServer::port).
  std::string address = "127.0.0.1:0";
  int max_receive_message_bytes = kDefaultMaxMessageBytes;
  int max_send_message_bytes = kDefaultMaxMessageBytes;
  // Server-initiated keepalive pings on idle connections.
  absl::Duration keepalive_time = absl::Seconds(20);
  absl::Duration keepalive_timeout = absl::Seconds(10);
  // TLS, tokens and roles (common/security.h); null: the process default.
  std::shared_ptr<const Security> security;
};

struct RunningServer {
  // Declared first so that it outlives the server that checks calls by it.
  std::shared_ptr<const Security> security;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  // Marks every service SERVING (or NOT_SERVING) in grpc.health.v1.
  void SetServing(bool serving);
};

// Builds and starts a server exposing `services` (sync or callback API) plus
// grpc.health.v1 and server reflection, its doors locked as
// `options.security` says. UNAVAILABLE if the address cannot be bound;
// INVALID_ARGUMENT for plaintext off loopback without --insecure.
absl::StatusOr<RunningServer> StartServer(
    const std::vector<grpc::Service*>& services, const ServerOptions& options);

struct ChannelOptions {
  int max_receive_message_bytes = kDefaultMaxMessageBytes;
  int max_send_message_bytes = kDefaultMaxMessageBytes;
  // Client keepalive: ping an idle connection so a dead peer is noticed.
  absl::Duration keepalive_time = absl::Seconds(30);
  absl::Duration keepalive_timeout = absl::Seconds(10);
  // Cap on reconnect backoff, so a restarted server is found quickly.
  absl::Duration max_reconnect_backoff = absl::Seconds(2);
  // TLS and the bearer token sent (common/security.h); null: the process
  // default.
  std::shared_ptr<const Security> security;
};

grpc::ChannelArguments MakeChannelArguments(const ChannelOptions& options);

// A channel to `target` ("host:port") with `options`, its credentials from
// `options.security`.
std::shared_ptr<grpc::Channel> CreateChannel(
    const std::string& target, const ChannelOptions& options = {});
// The same with the default options and `security` (null: the process
// default).
std::shared_ptr<grpc::Channel> CreateChannel(
    const std::string& target, std::shared_ptr<const Security> security);

// A client context whose deadline is now + `timeout`.
std::unique_ptr<grpc::ClientContext> ContextWithDeadline(
    absl::Duration timeout);

}  // namespace rl

#endif  // RL_COMMON_GRPC_UTIL_H_
