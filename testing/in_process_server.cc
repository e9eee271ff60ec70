#include "testing/in_process_server.h"

#include "grpcpp/server_builder.h"
#include "grpcpp/support/channel_arguments.h"

namespace rl {

absl::StatusOr<InProcessServer> StartInProcessServer(
    const std::vector<grpc::Service*>& services,
    const InProcessServerOptions& options) {
  grpc::ServerBuilder builder;
  for (grpc::Service* service : services) builder.RegisterService(service);
  builder.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  builder.SetMaxSendMessageSize(options.max_send_message_bytes);
  InProcessServer result;
  result.server = builder.BuildAndStart();
  if (result.server == nullptr) {
    return absl::InternalError("in-process gRPC server did not start");
  }
  // The client side is unlimited, so the limits a test sees are the
  // server's.
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  result.channel = result.server->InProcessChannel(args);
  return result;
}

}  // namespace rl
