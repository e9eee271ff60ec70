#include "common/tensor_layout.h"

#include <cstddef>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace rl {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the wire format is little-endian; a big-endian host would "
              "need byte swapping in the codec");

int64_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DTYPE_FLOAT64:
    case DTYPE_INT64:
      return 8;
    case DTYPE_FLOAT32:
    case DTYPE_INT32:
      return 4;
    case DTYPE_FLOAT16:
    case DTYPE_BFLOAT16:
    case DTYPE_INT16:
      return 2;
    case DTYPE_INT8:
    case DTYPE_UINT8:
    case DTYPE_BOOL:
      return 1;
    default:
      return 0;
  }
}

absl::StatusOr<int64_t> ValidateTensorLayout(const Tensor& tensor,
                                             absl::string_view field) {
  const int64_t element_size = DTypeSize(tensor.dtype());
  if (element_size == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".dtype: unknown or unspecified dtype (got ",
                     static_cast<int>(tensor.dtype()), ")"));
  }
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  // The product of the non-zero dims (in bytes) must fit too, even when a
  // zero dim makes the tensor empty: LibTorch computes the strides from it
  // and throws on overflow (found by //fuzz:tensor_codec_fuzzer).
  int64_t extent = 1;
  bool empty = false;
  for (int i = 0; i < tensor.shape_size(); ++i) {
    const int64_t dim = tensor.shape(i);
    if (dim < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".shape[", i, "]: must be >= 0 (got ", dim, ")"));
    }
    if (dim == 0) {
      empty = true;
      continue;
    }
    if (extent > kMax / element_size / dim) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".shape: [", absl::StrJoin(tensor.shape(), ", "),
                       "] overflows 64-bit element count"));
    }
    extent *= dim;
  }
  const int64_t numel = empty ? 0 : extent;
  const int64_t expected = numel * element_size;
  if (static_cast<int64_t>(tensor.data().size()) != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".data: has ", tensor.data().size(), " bytes, expected ",
        expected, " for shape [", absl::StrJoin(tensor.shape(), ", "), "] of ",
        DType_Name(tensor.dtype())));
  }
  if (tensor.dtype() == DTYPE_BOOL) {
    // Any other byte is not a C++ bool: LibTorch's kernels would read it
    // as undefined behaviour (found by //fuzz:tensor_codec_fuzzer).
    const std::string& data = tensor.data();
    for (size_t i = 0; i < data.size(); ++i) {
      const auto byte = static_cast<unsigned char>(data[i]);
      if (byte > 1) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, ".data: DTYPE_BOOL element ", i, " is ",
                         static_cast<int>(byte), " (must be 0 or 1)"));
      }
    }
  }
  return numel;
}

}  // namespace rl
