// Where a bench finds the files it names (run files, the project's binaries
// it starts), whether it was started by `bazel run` (working directory: its
// runfiles tree) or as bazel-bin/bench/NAME from any directory.
#ifndef RL_BENCH_BENCH_FILES_H_
#define RL_BENCH_BENCH_FILES_H_

#include <string>

#include "absl/strings/string_view.h"

namespace rl {

// `path` as an absolute path to an existing file. A relative path is looked
// up, in order: where the user ran `bazel run` (BUILD_WORKING_DIRECTORY: a
// path typed on the command line means what it says there), the working
// directory, this binary's runfiles tree (RUNFILES_DIR, then
// /proc/self/exe's NAME.runfiles: the bench's data dependencies, e.g.
// //examples:run_files), and the workspace (BUILD_WORKSPACE_DIRECTORY).
// Nothing found: `path` as given, so the caller's error names it.
std::string BenchFilePath(absl::string_view path);

// The python3 of the benches' Python children and of the Gymnasium
// bridge's embedded interpreter: $RL_PYTHON, else the workspace's
// .venv/bin/python3 (then exported as $RL_PYTHON).
std::string BenchPython();

// Runs `python -c "script"` (its stderr dropped; `script` holds no double
// quotes) and returns the number it prints; 0 when it cannot run or prints
// none (an optional column of a bench, e.g. EnvPool's).
double PythonNumber(const std::string& python, const std::string& script);

}  // namespace rl

#endif  // RL_BENCH_BENCH_FILES_H_
