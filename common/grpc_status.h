// The one conversion between absl::Status and grpc::Status. Codes map 1:1
// (both follow google.rpc.Code); the message is kept verbatim.
#ifndef RL_COMMON_GRPC_STATUS_H_
#define RL_COMMON_GRPC_STATUS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/support/server_callback.h"
#include "grpcpp/support/status.h"

namespace rl {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

// Finishes a callback-API unary call with `result`'s status, moving its value
// into `response` when OK.
template <typename Context, typename T>
grpc::ServerUnaryReactor* ReplyUnary(Context* context, absl::StatusOr<T> result,
                                     T* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (result.ok()) *response = *std::move(result);
  reactor->Finish(ToGrpcStatus(result.status()));
  return reactor;
}

}  // namespace rl

#endif  // RL_COMMON_GRPC_STATUS_H_
