#include "bench/bench_files.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <vector>

namespace rl {
namespace {

namespace fs = std::filesystem;

// The workspace's name in WORKSPACE: the runfiles tree's top folder.
constexpr char kWorkspace[] = "rl_service";

// Where a relative path may be, in the order BenchFilePath tries them.
std::vector<fs::path> Bases() {
  std::vector<fs::path> bases;
  if (const char* dir = std::getenv("BUILD_WORKING_DIRECTORY")) {
    bases.emplace_back(dir);
  }
  std::error_code ec;
  const fs::path cwd = fs::current_path(ec);
  if (!ec) bases.push_back(cwd);
  if (const char* dir = std::getenv("RUNFILES_DIR")) {
    bases.push_back(fs::path(dir) / kWorkspace);
  }
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) bases.push_back(fs::path(self.string() + ".runfiles") / kWorkspace);
  if (const char* dir = std::getenv("BUILD_WORKSPACE_DIRECTORY")) {
    bases.emplace_back(dir);
  }
  return bases;
}

}  // namespace

std::string BenchFilePath(absl::string_view path) {
  const fs::path given{std::string(path)};
  if (given.empty() || given.is_absolute()) return given.string();
  std::error_code ec;
  for (const fs::path& base : Bases()) {
    const fs::path candidate = base / given;
    if (fs::is_regular_file(candidate, ec)) return candidate.string();
  }
  return given.string();
}

std::string BenchPython() {
  if (const char* p = std::getenv("RL_PYTHON"); p != nullptr && *p) return p;
  const std::string venv = BenchFilePath(".venv/bin/python3");
  setenv("RL_PYTHON", venv.c_str(), 1);
  return venv;
}

double PythonNumber(const std::string& python, const std::string& script) {
  const std::string command = python + " -c \"" + script + "\" 2>/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return 0;
  double value = 0;
  if (std::fscanf(pipe, "%lf", &value) != 1) value = 0;
  pclose(pipe);
  return value;
}

}  // namespace rl
