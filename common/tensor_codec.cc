#include "common/tensor_codec.h"

#include <torch/types.h>

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "common/tensor_layout.h"

namespace rl {
namespace {

absl::StatusOr<DType> ToWireDType(c10::ScalarType type) {
  switch (type) {
    case torch::kFloat32:
      return DTYPE_FLOAT32;
    case torch::kFloat64:
      return DTYPE_FLOAT64;
    case torch::kFloat16:
      return DTYPE_FLOAT16;
    case torch::kBFloat16:
      return DTYPE_BFLOAT16;
    case torch::kInt8:
      return DTYPE_INT8;
    case torch::kUInt8:
      return DTYPE_UINT8;
    case torch::kInt16:
      return DTYPE_INT16;
    case torch::kInt32:
      return DTYPE_INT32;
    case torch::kInt64:
      return DTYPE_INT64;
    case torch::kBool:
      return DTYPE_BOOL;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor dtype ", c10::toString(type), " has no wire representation"));
  }
}

c10::ScalarType ToTorchDType(DType dtype) {
  switch (dtype) {
    case DTYPE_FLOAT64:
      return torch::kFloat64;
    case DTYPE_FLOAT16:
      return torch::kFloat16;
    case DTYPE_BFLOAT16:
      return torch::kBFloat16;
    case DTYPE_INT8:
      return torch::kInt8;
    case DTYPE_UINT8:
      return torch::kUInt8;
    case DTYPE_INT16:
      return torch::kInt16;
    case DTYPE_INT32:
      return torch::kInt32;
    case DTYPE_INT64:
      return torch::kInt64;
    case DTYPE_BOOL:
      return torch::kBool;
    default:  // Validated before: only FLOAT32 is left.
      return torch::kFloat32;
  }
}

std::vector<int64_t> ShapeOf(const Tensor& proto) {
  return std::vector<int64_t>(proto.shape().begin(), proto.shape().end());
}

}  // namespace

absl::Status EncodeTensor(const at::Tensor& tensor, Tensor* out) {
  ASSIGN_OR_RETURN(const DType dtype, ToWireDType(tensor.scalar_type()));
  try {
    out->Clear();
    out->set_dtype(dtype);
    for (int64_t dim : tensor.sizes()) out->add_shape(dim);
    std::string* data = out->mutable_data();
    data->resize(tensor.numel() * tensor.element_size());
    if (tensor.numel() == 0) return absl::OkStatus();
    // One copy: the strided (or device) source is copied straight into the
    // message's buffer viewed as a contiguous CPU tensor.
    torch::from_blob(data->data(), tensor.sizes(),
                     torch::TensorOptions().dtype(tensor.scalar_type()))
        .copy_(tensor);
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("encoding tensor: ", e.what_without_backtrace()));
  }
  return absl::OkStatus();
}

absl::StatusOr<at::Tensor> DecodeTensor(const Tensor& proto,
                                        absl::string_view field) {
  RETURN_IF_ERROR(ValidateTensorLayout(proto, field).status());
  try {
    at::Tensor result =
        torch::empty(ShapeOf(proto), ToTorchDType(proto.dtype()));
    if (!proto.data().empty()) {
      std::memcpy(result.data_ptr(), proto.data().data(), proto.data().size());
    }
    return result;
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", e.what_without_backtrace()));
  }
}

absl::StatusOr<at::Tensor> DecodeTensorView(const Tensor& proto,
                                            absl::string_view field) {
  RETURN_IF_ERROR(ValidateTensorLayout(proto, field).status());
  try {
    return torch::from_blob(const_cast<char*>(proto.data().data()),
                            ShapeOf(proto), ToTorchDType(proto.dtype()));
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", e.what_without_backtrace()));
  }
}

}  // namespace rl
