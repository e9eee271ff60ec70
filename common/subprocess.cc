#include "common/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/time/clock.h"

extern "C" char** environ;  // unistd.h declares it only with _GNU_SOURCE

namespace rl {

Subprocess::Subprocess(std::vector<std::string> argv, std::string log_path,
                       bool die_with_parent, std::vector<std::string> env)
    : log_path_(std::move(log_path)) {
  const pid_t parent = getpid();
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  // The child's environment, made here: after fork only exec is safe.
  std::vector<std::string> inherited;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const std::string& set : env) {
      if (set.substr(0, set.find('=')) == name) replaced = true;
    }
    if (!replaced) inherited.push_back(entry);
  }
  inherited.insert(inherited.end(), env.begin(), env.end());
  std::vector<char*> envp;
  for (std::string& e : inherited) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_ = fork();
  if (pid_ < 0) {
    std::perror("fork");
    std::abort();
  }
  if (pid_ == 0) {
    // The parent may block its stop signals (common/signal_waiter.h); a mask
    // survives exec, so the child starts with none blocked.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if (die_with_parent) {
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != parent) _exit(1);  // The parent died before prctl.
    }
    const int fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      close(fd);
    }
    execve(args[0], args.data(), envp.data());
    // Only async-signal-safe calls after fork: no stdio.
    const char failed[] = "execve failed\n";
    (void)!write(STDERR_FILENO, failed, sizeof(failed) - 1);
    _exit(127);
  }
}

Subprocess::~Subprocess() {
  if (running()) {
    Signal(SIGKILL);
    Wait(absl::Seconds(10));
  }
}

void Subprocess::Signal(int signal) {
  if (pid_ > 0 && !exit_code_) kill(pid_, signal);
}

std::optional<int> Subprocess::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!exit_code_) {
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exit_code_ =
          WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    if (absl::Now() >= deadline) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return exit_code_;
}

bool Subprocess::running() { return !Wait(absl::ZeroDuration()).has_value(); }

std::string Subprocess::Log() const {
  std::ifstream in(log_path_);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::optional<std::string> WaitForFile(const std::string& path,
                                       absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    std::ifstream in(path);
    if (in) {
      std::stringstream text;
      text << in.rdbuf();
      if (!text.str().empty()) return text.str();
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return std::nullopt;
}

}  // namespace rl
