// Every problem of a file the user wrote, collected and returned at once:
// "field.path: problem (got value)" messages joined by "; " into one
// INVALID_ARGUMENT. Run files and sweep files report with it.
#ifndef RL_RUNSPEC_FIELD_PROBLEMS_H_
#define RL_RUNSPEC_FIELD_PROBLEMS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

namespace rl {

// One problem: "field.path: problem (got value)".
template <typename T>
std::string FieldProblem(absl::string_view path, absl::string_view problem,
                         const T& got) {
  return absl::StrCat(path, ": ", problem, " (got ", got, ")");
}

class FieldProblems {
 public:
  template <typename T>
  void Add(absl::string_view path, absl::string_view problem, const T& got) {
    list_.push_back(FieldProblem(path, problem, got));
  }
  void Add(std::string message) { list_.push_back(std::move(message)); }
  bool empty() const { return list_.empty(); }
  absl::Status ToStatus() const {
    if (list_.empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrJoin(list_, "; "));
  }

 private:
  std::vector<std::string> list_;
};

}  // namespace rl

#endif  // RL_RUNSPEC_FIELD_PROBLEMS_H_
