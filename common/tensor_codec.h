// Wire Tensor <-> torch::Tensor. Encoding copies once (straight from the
// source, strided or on a device, into the message's bytes); decoding copies
// once into a new tensor, or not at all for a borrowed view.
//
// LibTorch is forward-declared here so this header stays cheap to include;
// callers that use the results include <torch/torch.h> themselves.
#ifndef RL_COMMON_TENSOR_CODEC_H_
#define RL_COMMON_TENSOR_CODEC_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/common.pb.h"

namespace at {
class Tensor;
}  // namespace at

namespace rl {

// Writes `tensor` (any layout, any device) into `out` as contiguous
// little-endian bytes. INVALID_ARGUMENT for a dtype the wire has no name for.
absl::Status EncodeTensor(const at::Tensor& tensor, Tensor* out);

// A new CPU tensor owning a copy of the data. INVALID_ARGUMENT naming `field`
// for a bad dtype, shape or byte length.
absl::StatusOr<at::Tensor> DecodeTensor(const Tensor& proto,
                                        absl::string_view field = "tensor");

// A CPU tensor that aliases `proto`'s bytes (no copy): valid only while
// `proto` lives and is not modified. Read-only use.
absl::StatusOr<at::Tensor> DecodeTensorView(const Tensor& proto,
                                            absl::string_view field = "tensor");

}  // namespace rl

#endif  // RL_COMMON_TENSOR_CODEC_H_
