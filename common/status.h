// Status helpers: the one RETURN_IF_ERROR / ASSIGN_OR_RETURN pair, the
// run-fatal mark, and a context before a message.
#ifndef RL_COMMON_STATUS_H_
#define RL_COMMON_STATUS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#define RL_STATUS_CONCAT_INNER_(a, b) a##b
#define RL_STATUS_CONCAT_(a, b) RL_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define RETURN_IF_ERROR(expr)                \
  do {                                       \
    ::absl::Status rl_status_ = (expr);      \
    if (!rl_status_.ok()) return rl_status_; \
  } while (false)

// `lhs = value of rexpr` (an absl::StatusOr<T>), or returns its status.
// `lhs` may declare a variable: ASSIGN_OR_RETURN(auto x, MakeX());
#define ASSIGN_OR_RETURN(lhs, rexpr)                                        \
  RL_ASSIGN_OR_RETURN_IMPL_(RL_STATUS_CONCAT_(rl_statusor_, __LINE__), lhs, \
                            rexpr)

#define RL_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr)    \
  auto statusor = (rexpr);                                 \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

namespace rl {

// A failure that would recur on any worker (an environment plugin that
// cannot be loaded, declares other spaces than the run, or fails a step):
// the run fails at once rather than being retried against its failure
// budget. Carried as a payload, so it survives RETURN_IF_ERROR.
inline constexpr char kRunFatalPayload[] = "type.rl/run_fatal";

inline absl::Status MarkRunFatal(absl::Status status) {
  if (!status.ok()) status.SetPayload(kRunFatalPayload, absl::Cord("1"));
  return status;
}

inline bool IsRunFatal(const absl::Status& status) {
  return status.GetPayload(kRunFatalPayload).has_value();
}

// `status` with "<context>: " before its message (same code; OK stays OK).
inline absl::Status Prefixed(const absl::Status& status,
                             absl::string_view context) {
  if (status.ok()) return status;
  absl::Status out(status.code(),
                   absl::StrCat(context, ": ", status.message()));
  status.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) {
    out.SetPayload(url, payload);
  });
  return out;
}

}  // namespace rl

#endif  // RL_COMMON_STATUS_H_
