// What every main does with its command line and its outcome, so that all
// binaries agree on exit codes: 0 success, 2 bad input (flags, run files),
// 1 anything else.
#ifndef RL_COMMON_COMMAND_LINE_H_
#define RL_COMMON_COMMAND_LINE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace rl {

// absl::ParseCommandLine with the project's exit code: an unknown flag, a
// flag without its value, a value that does not parse, or more than
// `max_positional` positional arguments prints "error: ..." and exits 2
// (absl alone would exit 1). --help (or -h) prints `usage` and the
// program's own flags (not absl's or gRPC's) to stdout and exits 0.
// Returns the positional arguments.
std::vector<std::string> ParseCommandLineOrExit(int argc, char** argv,
                                                absl::string_view usage,
                                                int max_positional = 0);

// Prints "error: <message>" to stderr unless `status` is OK, and returns
// the exit code for it: 0 OK, 2 INVALID_ARGUMENT, 1 otherwise.
int ExitCode(const absl::Status& status);

}  // namespace rl

#endif  // RL_COMMON_COMMAND_LINE_H_
