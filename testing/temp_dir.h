// Per-test temporary directories under Bazel's TEST_TMPDIR, and reading
// the files tests look at.
#ifndef RL_TESTING_TEMP_DIR_H_
#define RL_TESTING_TEMP_DIR_H_

#include <string>

#include "absl/strings/string_view.h"

namespace rl {

// A new, empty directory for the running test, named after the test case
// and `name` ("<tmp>/<Suite>.<Test>/<name>"); whatever was there is
// removed first. Aborts the test (ADD_FAILURE + returns "") if it cannot be
// made.
std::string MakeTestDir(absl::string_view name = "dir");

// The bytes of `path`; "" if it cannot be read (the caller's assertions on
// the content say what was missing).
std::string ReadTestFile(const std::string& path);

}  // namespace rl

#endif  // RL_TESTING_TEMP_DIR_H_
