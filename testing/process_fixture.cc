#include "testing/process_fixture.h"

#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "testing/temp_dir.h"
#include "testing/wait_for.h"

namespace rl {

namespace fs = std::filesystem;

std::string RunfilesPath(absl::string_view binary) {
  if (absl::StartsWith(binary, "/")) return std::string(binary);
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  if (srcdir == nullptr || workspace == nullptr) return std::string(binary);
  return absl::StrCat(srcdir, "/", workspace, "/", binary);
}

std::vector<pid_t> FindProcesses(const std::vector<std::string>& args) {
  std::vector<pid_t> pids;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    int pid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid)) continue;
    std::ifstream in(entry.path() / "cmdline");
    const std::string cmdline((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
    const std::vector<std::string> argv =
        absl::StrSplit(cmdline, '\0', absl::SkipEmpty());
    bool all = true;
    for (const std::string& arg : args) {
      all &= std::find(argv.begin(), argv.end(), arg) != argv.end();
    }
    if (all && !argv.empty()) pids.push_back(pid);
  }
  return pids;
}

void ProcessTest::SetUp() { dir_ = MakeTestDir("processes"); }

void ProcessTest::TearDown() {
  for (auto& process : processes_) {
    if (process->running()) Stop(*process);
  }
  if (!HasFailure()) return;
  for (auto& process : processes_) {
    std::cerr << "==== " << process->log_path() << " ====\n"
              << process->Log() << "\n";
  }
}

std::string ProcessTest::Path(absl::string_view name) const {
  return (fs::path(dir_) / std::string(name)).string();
}

Subprocess* ProcessTest::Start(absl::string_view binary,
                               std::vector<std::string> args,
                               std::string log_name) {
  if (log_name.empty()) {
    log_name = absl::StrCat(fs::path(std::string(binary)).filename().string(),
                            ".", processes_.size() + 1, ".log");
  }
  std::vector<std::string> argv = {RunfilesPath(binary)};
  argv.insert(argv.end(), std::make_move_iterator(args.begin()),
              std::make_move_iterator(args.end()));
  // Dies with the test (even a test that crashed): no orphan keeps a port
  // or a core busy for the tests after it.
  processes_.push_back(std::make_unique<Subprocess>(
      std::move(argv), Path(log_name), /*die_with_parent=*/true));
  return processes_.back().get();
}

int ProcessTest::WaitForPort(Subprocess& process, const std::string& port_file,
                             absl::Duration timeout) {
  std::string text;
  auto written = [&] {
    std::ifstream in(port_file);
    text.assign(std::istreambuf_iterator<char>(in),
                std::istreambuf_iterator<char>());
    return !text.empty() && text.back() == '\n';
  };
  // A port file is written whole (then renamed) by common/port_file; the
  // newline check also covers a writer that is not atomic.
  const bool found = WaitFor([&] { return written() || !process.running(); },
                             timeout, absl::Milliseconds(20)) &&
                     written();
  int port = 0;
  if (!found || !absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &port) ||
      port <= 0) {
    ADD_FAILURE() << "no port in " << port_file << " after " << timeout
                  << (process.running() ? "" : " (the process exited)")
                  << "; log " << process.log_path() << ":\n"
                  << process.Log();
    return 0;
  }
  return port;
}

std::optional<int> ProcessTest::Stop(Subprocess& process, int signal,
                                     absl::Duration grace) {
  process.Signal(signal);
  std::optional<int> code = process.Wait(grace);
  if (!code.has_value()) {
    ADD_FAILURE() << process.log_path() << ": still running " << grace
                  << " after signal " << signal << "; SIGKILL";
    process.Signal(SIGKILL);
    code = process.Wait(absl::Seconds(30));
  }
  return code;
}

}  // namespace rl
