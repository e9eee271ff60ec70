#include "common/grpc_util.h"

#include "absl/strings/str_cat.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/support/server_interceptor.h"

namespace rl {
namespace {

constexpr int kMaxFrameBytes = (1 << 24) - 1;  // HTTP/2's largest frame.
constexpr int kStreamWindowBytes = 64 << 20;

int Millis(absl::Duration d) {
  return static_cast<int>(absl::ToInt64Milliseconds(d));
}

// gRPC answers a unary or server-streaming request whose bytes do not parse
// as the method's request message with UNIMPLEMENTED and no message (callback
// API) or INTERNAL and none (sync API). This names what happened instead:
// INVALID_ARGUMENT, the method, and that its request did not parse.
class UnparseableRequestInterceptor final
    : public grpc::experimental::Interceptor {
 public:
  explicit UnparseableRequestInterceptor(
      grpc::experimental::ServerRpcInfo* info)
      : method_(info->method()) {}

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    using grpc::experimental::InterceptionHookPoints;
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::POST_RECV_MESSAGE) &&
        methods->GetRecvMessage() == nullptr) {
      unparseable_ = true;
    }
    if (unparseable_ &&
        methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::PRE_SEND_STATUS) &&
        !methods->GetSendStatus().ok()) {
      methods->ModifySendStatus(grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat("the request to ", method_,
                       " is not a valid protobuf message of its request type "
                       "(its bytes do not parse)")));
    }
    methods->Proceed();
  }

 private:
  const std::string method_;
  bool unparseable_ = false;
};

class UnparseableRequestInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    // Only these have their one request parsed before the handler runs; a
    // stream's reads end with no message at its close too.
    using Type = grpc::experimental::ServerRpcInfo::Type;
    if (info->type() != Type::UNARY && info->type() != Type::SERVER_STREAMING) {
      return nullptr;
    }
    return new UnparseableRequestInterceptor(info);
  }
};

}  // namespace

void RunningServer::SetServing(bool serving) {
  if (server && server->GetHealthCheckService() != nullptr) {
    server->GetHealthCheckService()->SetServingStatus(serving);
  }
}

absl::StatusOr<RunningServer> StartServer(
    const std::vector<grpc::Service*>& services, const ServerOptions& options) {
  // Both are process-wide switches read when a server is built.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();

  RunningServer result;
  result.security = options.security != nullptr ? options.security
                                                : Security::ProcessDefault();
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      result.security->ServerCredentials(options.address);
  if (!credentials.ok()) return credentials.status();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.address, *credentials, &result.port);
  // gRPC sets SO_REUSEPORT by default, which lets a second server bind a
  // port already in use and silently share its traffic.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  builder.SetMaxSendMessageSize(options.max_send_message_bytes);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                             Millis(options.keepalive_time));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                             Millis(options.keepalive_timeout));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Accept client keepalive pings as often as clients are configured to send.
  builder.AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  // Bulk tensors: large HTTP/2 frames and a large initial flow-control
  // window, so a multi-megabyte segment is not chopped into 16 KiB frames
  // and throttled by window updates (measured by bench/transport_bench).
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, kMaxFrameBytes);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES,
                             kStreamWindowBytes);
  // With BDP probing on, gRPC sizes the window from its estimate of the
  // link's bandwidth-delay product instead, which on loopback is far below
  // one segment: 2.6 MiB segments crossed at ~50% of a raw socket, ~75%
  // with the fixed window (bench/transport_bench).
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  for (grpc::Service* service : services) builder.RegisterService(service);
  std::vector<
      std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
      interceptors;
  interceptors.push_back(
      std::make_unique<UnparseableRequestInterceptorFactory>());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  result.server = builder.BuildAndStart();
  if (result.server == nullptr || result.port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.address,
                     " (address in use or not valid)"));
  }
  result.SetServing(true);
  return result;
}

grpc::ChannelArguments MakeChannelArguments(const ChannelOptions& options) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  args.SetMaxSendMessageSize(options.max_send_message_bytes);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, Millis(options.keepalive_time));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, Millis(options.keepalive_timeout));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  args.SetInt(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, kMaxFrameBytes);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, kStreamWindowBytes);
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);  // see StartServer
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
              Millis(options.max_reconnect_backoff));
  // Each process opens its own connection rather than sharing a subchannel
  // with other channels to the same target: streams stay independent.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return args;
}

std::shared_ptr<grpc::Channel> CreateChannel(
    const std::string& target, std::shared_ptr<const Security> security) {
  ChannelOptions options;
  options.security = std::move(security);
  return CreateChannel(target, options);
}

std::shared_ptr<grpc::Channel> CreateChannel(const std::string& target,
                                             const ChannelOptions& options) {
  const std::shared_ptr<const Security> security =
      options.security != nullptr ? options.security
                                  : Security::ProcessDefault();
  grpc::ChannelArguments args = MakeChannelArguments(options);
  const std::string& server_name = security->options().tls_server_name;
  if (!server_name.empty()) {
    args.SetSslTargetNameOverride(server_name);
  }
  return grpc::CreateCustomChannel(target, security->ChannelCredentials(target),
                                   args);
}

std::unique_ptr<grpc::ClientContext> ContextWithDeadline(
    absl::Duration timeout) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  return context;
}

}  // namespace rl
