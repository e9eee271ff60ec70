// The one boundary between LibTorch's exceptions and the project's
// absl::Status: code that calls LibTorch runs those calls inside
// CatchTorchErrors, so no exception crosses a module boundary, and checks
// the tensors it is given with CheckTensor first, so that a caller's mistake
// is INVALID_ARGUMENT naming the tensor and its shape rather than a LibTorch
// message from deep inside an operator.
//
// Codes: c10::IndexError / ValueError / TypeError (bad arguments) ->
// INVALID_ARGUMENT; c10::OutOfMemoryError -> RESOURCE_EXHAUSTED; any other
// c10::Error or std::exception -> `code` (INTERNAL unless the caller knows
// better, e.g. a checkpoint file that does not load is INVALID_ARGUMENT).
#ifndef RL_POLICY_TORCH_STATUS_H_
#define RL_POLICY_TORCH_STATUS_H_

#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <exception>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace at {
class Tensor;
}  // namespace at

namespace rl {
namespace torch_status_internal {

template <typename T>
struct IsStatusOr : std::false_type {};
template <typename T>
struct IsStatusOr<absl::StatusOr<T>> : std::true_type {};

// void and absl::Status -> absl::Status; StatusOr<T> -> itself; T ->
// StatusOr<T>.
template <typename R>
using Result = std::conditional_t<
    std::is_void_v<R> || std::is_same_v<R, absl::Status>, absl::Status,
    std::conditional_t<IsStatusOr<R>::value, R, absl::StatusOr<R>>>;

absl::Status FromCurrentException(absl::string_view what,
                                  absl::StatusCode code);

}  // namespace torch_status_internal

// Runs `fn` and returns its result as a Status (see the codes above); the
// message is "<what>: <LibTorch's message without its backtrace>".
template <typename F>
auto CatchTorchErrors(absl::string_view what, F&& fn,
                      absl::StatusCode code = absl::StatusCode::kInternal)
    -> torch_status_internal::Result<std::invoke_result_t<F>> {
  using R = std::invoke_result_t<F>;
  try {
    if constexpr (std::is_void_v<R>) {
      std::forward<F>(fn)();
      return absl::OkStatus();
    } else {
      return std::forward<F>(fn)();
    }
  } catch (...) {
    return torch_status_internal::FromCurrentException(what, code);
  }
}

// "Float[4, 64, 2]", or "undefined" for a tensor that holds nothing.
std::string DescribeTensor(const at::Tensor& tensor);

// OK if `tensor` is defined, of `dtype`, and of `shape` (-1 matches any
// size); else INVALID_ARGUMENT "<name>: expected Float[-1, 4], got
// Float[3, 5]". Reads no data.
absl::Status CheckTensor(const at::Tensor& tensor, absl::string_view name,
                         c10::ScalarType dtype,
                         const std::vector<int64_t>& shape);

// OK if every element of the floating-point `tensor` is finite; else
// INVALID_ARGUMENT naming it. Reads the data (one reduction).
absl::Status CheckFinite(const at::Tensor& tensor, absl::string_view name);

}  // namespace rl

#endif  // RL_POLICY_TORCH_STATUS_H_
