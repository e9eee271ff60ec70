// Status helpers: the one RETURN_IF_ERROR / ASSIGN_OR_RETURN pair.
#ifndef RL_COMMON_STATUS_H_
#define RL_COMMON_STATUS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

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

#endif  // RL_COMMON_STATUS_H_
