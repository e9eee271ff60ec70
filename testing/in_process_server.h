// A gRPC server for service tests, reached in-process: no port, no network
// (as Reverb's reverb_service_impl_test.cc does).
//
//   ASSERT_OK_AND_ASSIGN(InProcessServer server,
//                        StartInProcessServer({&service}));
//   auto stub = TelemetryService::NewStub(server.channel);
#ifndef RL_TESTING_IN_PROCESS_SERVER_H_
#define RL_TESTING_IN_PROCESS_SERVER_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/channel.h"
#include "grpcpp/impl/codegen/service_type.h"
#include "grpcpp/server.h"

namespace rl {

struct InProcessServerOptions {
  // The server's limits (the channel has none, so a test sees these).
  int max_receive_message_bytes = 4 << 20;
  int max_send_message_bytes = 4 << 20;
};

struct InProcessServer {
  std::unique_ptr<grpc::Server> server;
  // A channel to `server` through server->InProcessChannel().
  std::shared_ptr<grpc::Channel> channel;
};

// Builds and starts a server exposing `services` (sync or callback API)
// with no listening port. The services must outlive the server; shut it
// down (or destroy it) before them.
absl::StatusOr<InProcessServer> StartInProcessServer(
    const std::vector<grpc::Service*>& services,
    const InProcessServerOptions& options = {});

}  // namespace rl

#endif  // RL_TESTING_IN_PROCESS_SERVER_H_
