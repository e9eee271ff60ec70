// The one conversion between absl::Status and grpc::Status. Codes map 1:1
// (both follow google.rpc.Code); the message is kept verbatim.
#ifndef RL_COMMON_GRPC_STATUS_H_
#define RL_COMMON_GRPC_STATUS_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace rl {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace rl

#endif  // RL_COMMON_GRPC_STATUS_H_
