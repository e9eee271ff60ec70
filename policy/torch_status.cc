#include "policy/torch_status.h"

#include <ATen/ATen.h>

namespace rl {
namespace torch_status_internal {

absl::Status FromCurrentException(absl::string_view what,
                                  absl::StatusCode code) {
  try {
    throw;
  } catch (const c10::IndexError& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", e.what_without_backtrace()));
  } catch (const c10::ValueError& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", e.what_without_backtrace()));
  } catch (const c10::TypeError& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", e.what_without_backtrace()));
  } catch (const c10::OutOfMemoryError& e) {
    return absl::ResourceExhaustedError(
        absl::StrCat(what, ": ", e.what_without_backtrace()));
  } catch (const c10::Error& e) {
    return absl::Status(code,
                        absl::StrCat(what, ": ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::Status(code, absl::StrCat(what, ": ", e.what()));
  } catch (...) {
    return absl::Status(code, absl::StrCat(what, ": unknown exception"));
  }
}

}  // namespace torch_status_internal

namespace {

std::string DescribeShape(absl::string_view dtype,
                          const std::vector<int64_t>& shape) {
  std::string out = absl::StrCat(dtype, "[");
  for (size_t i = 0; i < shape.size(); ++i) {
    absl::StrAppend(&out, i == 0 ? "" : ", ", shape[i]);
  }
  return absl::StrCat(out, "]");
}

}  // namespace

std::string DescribeTensor(const at::Tensor& tensor) {
  if (!tensor.defined()) return "undefined";
  return DescribeShape(c10::toString(tensor.scalar_type()),
                       tensor.sizes().vec());
}

absl::Status CheckTensor(const at::Tensor& tensor, absl::string_view name,
                         c10::ScalarType dtype,
                         const std::vector<int64_t>& shape) {
  bool fits = tensor.defined() && tensor.scalar_type() == dtype &&
              tensor.dim() == static_cast<int64_t>(shape.size());
  for (size_t i = 0; fits && i < shape.size(); ++i) {
    fits = shape[i] < 0 || tensor.size(i) == shape[i];
  }
  if (fits) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      name, ": expected ", DescribeShape(c10::toString(dtype), shape), ", got ",
      DescribeTensor(tensor)));
}

absl::Status CheckFinite(const at::Tensor& tensor, absl::string_view name) {
  return CatchTorchErrors(
      absl::StrCat("checking ", name), [&]() -> absl::Status {
        if (tensor.numel() == 0 || !tensor.is_floating_point() ||
            at::isfinite(tensor).all().item<bool>()) {
          return absl::OkStatus();
        }
        return absl::InvalidArgumentError(
            absl::StrCat(name, ": values must be finite (found NaN or inf in ",
                         DescribeTensor(tensor), ")"));
      });
}

}  // namespace rl
