// GoogleTest matchers for absl::Status and absl::StatusOr<T>, as in Reverb's
// platform/status_matchers.h:
//
//   EXPECT_THAT(store->Put(x), IsOk());
//   EXPECT_THAT(Load(path), StatusIs(absl::StatusCode::kNotFound,
//                                    HasSubstr("cannot read")));
//   ASSERT_OK_AND_ASSIGN(auto spec, LoadRunSpec(text, kYaml));
#ifndef RL_TESTING_STATUS_MATCHERS_H_
#define RL_TESTING_STATUS_MATCHERS_H_

#include <ostream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rl {
namespace testing_internal {

inline const absl::Status& GetStatus(const absl::Status& status) {
  return status;
}
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

class IsOkMatcher {
 public:
  using is_gtest_matcher = void;
  template <typename T>
  bool MatchAndExplain(const T& value, std::ostream* os) const {
    const absl::Status& status = GetStatus(value);
    if (!status.ok() && os != nullptr) *os << "which is " << status;
    return status.ok();
  }
  void DescribeTo(std::ostream* os) const { *os << "is OK"; }
  void DescribeNegationTo(std::ostream* os) const { *os << "is not OK"; }
};

class StatusIsMatcher {
 public:
  using is_gtest_matcher = void;
  StatusIsMatcher(absl::StatusCode code,
                  ::testing::Matcher<const std::string&> message)
      : code_(code), message_(std::move(message)) {}

  template <typename T>
  bool MatchAndExplain(const T& value, std::ostream* os) const {
    const absl::Status& status = GetStatus(value);
    const std::string message(status.message());
    const bool matches = status.code() == code_ && message_.Matches(message);
    if (!matches && os != nullptr) *os << "which is " << status;
    return matches;
  }
  void DescribeTo(std::ostream* os) const {
    *os << "has code " << absl::StatusCodeToString(code_)
        << " and a message that ";
    message_.DescribeTo(os);
  }
  void DescribeNegationTo(std::ostream* os) const {
    *os << "does not have code " << absl::StatusCodeToString(code_)
        << " or has a message that ";
    message_.DescribeNegationTo(os);
  }

 private:
  absl::StatusCode code_;
  ::testing::Matcher<const std::string&> message_;
};

}  // namespace testing_internal

// Matches an OK absl::Status or an absl::StatusOr holding a value.
inline testing_internal::IsOkMatcher IsOk() { return {}; }

// Matches a status (or StatusOr's status) with `code` and a message that
// `message` matches (a string is an exact match; use HasSubstr for a part).
inline testing_internal::StatusIsMatcher StatusIs(
    absl::StatusCode code,
    ::testing::Matcher<const std::string&> message = ::testing::_) {
  return {code, std::move(message)};
}

}  // namespace rl

#define RL_TESTING_CONCAT_INNER(a, b) a##b
#define RL_TESTING_CONCAT(a, b) RL_TESTING_CONCAT_INNER(a, b)

#define EXPECT_OK(expr) EXPECT_THAT((expr), ::rl::IsOk())
#define ASSERT_OK(expr) ASSERT_THAT((expr), ::rl::IsOk())

// ASSERT_OK_AND_ASSIGN(lhs, expr): asserts `expr` (a StatusOr) is OK and
// moves its value into `lhs` (a declaration or an lvalue).
#define ASSERT_OK_AND_ASSIGN(lhs, expr)                               \
  auto RL_TESTING_CONCAT(status_or_, __LINE__) = (expr);              \
  ASSERT_THAT(RL_TESTING_CONCAT(status_or_, __LINE__), ::rl::IsOk()); \
  lhs = std::move(RL_TESTING_CONCAT(status_or_, __LINE__)).value()

#endif  // RL_TESTING_STATUS_MATCHERS_H_
