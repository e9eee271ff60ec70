// Checks a wire Tensor's layout without LibTorch: known dtype, shape entries
// >= 0 whose product does not overflow, a byte length that matches, and
// DTYPE_BOOL bytes that are 0 or 1.
// Used by the codec and by services that validate before decoding.
#ifndef RL_COMMON_TENSOR_LAYOUT_H_
#define RL_COMMON_TENSOR_LAYOUT_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/common.pb.h"

namespace rl {

// Bytes per element of `dtype`; 0 for DTYPE_UNSPECIFIED or an unknown value.
int64_t DTypeSize(DType dtype);

// Number of elements of `tensor`, or INVALID_ARGUMENT naming `field` and the
// problem (unknown dtype, negative or overflowing shape, wrong byte length,
// a bool that is neither 0 nor 1).
absl::StatusOr<int64_t> ValidateTensorLayout(
    const Tensor& tensor, absl::string_view field = "tensor");

}  // namespace rl

#endif  // RL_COMMON_TENSOR_LAYOUT_H_
