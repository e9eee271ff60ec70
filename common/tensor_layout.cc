#include "common/tensor_layout.h"

#include <limits>

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
  int64_t numel = 1;
  for (int i = 0; i < tensor.shape_size(); ++i) {
    const int64_t dim = tensor.shape(i);
    if (dim < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".shape[", i, "]: must be >= 0 (got ", dim, ")"));
    }
    if (dim != 0 && numel > kMax / element_size / dim) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".shape: [", absl::StrJoin(tensor.shape(), ", "),
                       "] overflows 64-bit element count"));
    }
    numel *= dim;
  }
  const int64_t expected = numel * element_size;
  if (static_cast<int64_t>(tensor.data().size()) != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".data: has ", tensor.data().size(), " bytes, expected ",
        expected, " for shape [", absl::StrJoin(tensor.shape(), ", "), "] of ",
        DType_Name(tensor.dtype())));
  }
  return numel;
}

}  // namespace rl
