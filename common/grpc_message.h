// Protobuf messages <-> grpc::ByteBuffer, for methods a server registers raw
// and a client calls through a generic stub (common/raw_client_stream.h).
//
// Why by hand: gRPC's own serialiser copies every byte of a message into
// freshly allocated slices, so each write of a 42 MiB rollout segment copied
// (and page-faulted) 42 MiB once more before the socket saw it.
// SerializeAliased emits the same bytes, so the wire format does not change
// and peers using generated stubs interoperate, but each large bytes or
// string field is a slice pointing into the message, which the slice keeps
// alive until gRPC has written it:
//
//   shared message -> [header slice][field bytes, aliased][header slice]...
//   -> gRPC -> socket
#ifndef RL_COMMON_GRPC_MESSAGE_H_
#define RL_COMMON_GRPC_MESSAGE_H_

#include <cstddef>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "grpcpp/support/byte_buffer.h"

namespace rl {

// Fields shorter than this are copied into the header slices: a slice of
// their own would cost more than the copy.
inline constexpr size_t kAliasMinBytes = 4096;

// `message` serialised exactly as SerializeToString would. Its bytes and
// string fields of kAliasMinBytes or more are not copied: their slices
// reference `message` and hold a reference to it, so it lives as long as
// any copy of the result or any write gRPC has not finished. `message` must
// not be modified meanwhile (it is const to every holder).
grpc::ByteBuffer SerializeAliased(
    std::shared_ptr<const google::protobuf::MessageLite> message);

// A copy, for small messages (acks, requests).
grpc::ByteBuffer SerializeCopy(const google::protobuf::MessageLite& message);

// Parses `buffer` into `message` (cleared first). INVALID_ARGUMENT for bytes
// that are not such a message, naming the field where it can be told, as
// "<what>.observations.data: declares 16777216 bytes at byte 120, 1000
// remain". `buffer` is not changed.
absl::Status ParseByteBuffer(grpc::ByteBuffer* buffer,
                             google::protobuf::Message* message,
                             absl::string_view what);

}  // namespace rl

#endif  // RL_COMMON_GRPC_MESSAGE_H_
