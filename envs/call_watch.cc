#include "envs/call_watch.h"

#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/thread.h"

namespace rl {
namespace {

int64_t NowNs() { return absl::GetCurrentTimeNanos(); }

// This thread's id (gettid), cached: a crash is the call's only when it is
// raised on the calling thread.
int ThisThread() {
  thread_local const int id = static_cast<int>(syscall(SYS_gettid));
  return id;
}

// The slots a fatal signal handler may read (no lock there): the process
// watch's, by index.
constexpr int kMaxSignalSlots = 256;
std::atomic<CallWatch::Slot*> g_signal_slots[kMaxSignalSlots];
std::atomic<CallWatch*> g_signal_watch{nullptr};
std::atomic<int> g_crashing{0};
// The crash's reason, written by the handler before it wakes the watch.
char g_crash_reason[1024];
std::atomic<int> g_crash_signal{0};

void AppendText(char* out, size_t size, const char* text) {
  const size_t used = strnlen(out, size);
  for (size_t i = 0; used + i + 1 < size && text[i] != '\0'; ++i) {
    out[used + i] = text[i];
    out[used + i + 1] = '\0';
  }
}

}  // namespace

std::string DescribeTimeout(absl::Duration timeout) {
  const double seconds = absl::ToDoubleSeconds(timeout);
  return seconds == static_cast<int64_t>(seconds)
             ? absl::StrCat(static_cast<int64_t>(seconds), " s")
             : absl::StrFormat("%.3g s", seconds);
}

CallWatch::Scope::Scope(Slot* slot, const char* call, absl::Duration timeout)
    : slot_(slot) {
  if (slot_ == nullptr) return;
  slot_->call.store(call, std::memory_order_relaxed);
  slot_->thread.store(ThisThread(), std::memory_order_relaxed);
  slot_->timeout_ms.store(absl::ToInt64Milliseconds(timeout),
                          std::memory_order_relaxed);
  slot_->deadline_ns.store(NowNs() + absl::ToInt64Nanoseconds(timeout),
                           std::memory_order_release);
}

CallWatch::Scope::~Scope() {
  if (slot_ != nullptr) slot_->deadline_ns.store(0, std::memory_order_release);
}

CallWatch& CallWatch::Process() {
  static CallWatch* const watch = new CallWatch(/*exit_process=*/true);
  return *watch;
}

CallWatch::CallWatch(bool exit_process) : exit_process_(exit_process) {
  // A test's watch ends (calls its handler) without exiting.
  if (!exit_process_) end_enabled_.store(true);
  if (pipe(crash_pipe_) != 0) crash_pipe_[0] = crash_pipe_[1] = -1;
}

CallWatch::~CallWatch() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_ != nullptr) thread_->join();
  for (int fd : crash_pipe_) {
    if (fd >= 0) close(fd);
  }
}

CallWatch::Slot* CallWatch::Register(std::string origin) {
  absl::MutexLock lock(&mu_);
  slots_.push_back(std::make_unique<Slot>());
  Slot* slot = slots_.back().get();
  slot->origin = std::move(origin);
  if (this == &Process()) {
    for (auto& entry : g_signal_slots) {
      Slot* expected = nullptr;
      if (entry.compare_exchange_strong(expected, slot)) break;
    }
  }
  if (thread_ == nullptr) {
    thread_ = std::make_unique<NamedThread>(
        StartThread("env-call-watch", [this] { Loop(); }));
  }
  return slot;
}

void CallWatch::Unregister(Slot* slot) {
  if (slot == nullptr) return;
  absl::MutexLock lock(&mu_);
  for (auto& entry : g_signal_slots) {
    Slot* expected = slot;
    if (entry.compare_exchange_strong(expected, nullptr)) break;
  }
  slots_.erase(std::remove_if(slots_.begin(), slots_.end(),
                              [slot](const std::unique_ptr<Slot>& s) {
                                return s.get() == slot;
                              }),
               slots_.end());
}

void CallWatch::SetEndHandler(EndHandler handler) {
  absl::MutexLock lock(&mu_);
  handler_ = std::move(handler);
}

void CallWatch::End(const std::string& reason, int exit_code) {
  overruns_.fetch_add(1);
  if (!end_enabled_.load()) {
    // Not a worker: say so once per overrun and keep waiting for the call.
    RL_LOG_ERROR("{} (still waiting: this process does not end itself)",
                 reason);
    return;
  }
  RL_LOG_ERROR("{}", reason);
  std::fprintf(stderr, "%s\n", reason.c_str());
  std::fflush(stderr);
  EndHandler handler;
  {
    absl::MutexLock lock(&mu_);
    handler = handler_;
  }
  if (exit_process_) {
    // The handler talks to a coordinator that may not answer: the process
    // ends 10 s from now whatever it does.
    std::thread([exit_code] {
      std::this_thread::sleep_for(std::chrono::seconds(10));
      _exit(exit_code);
    }).detach();
  }
  if (handler) handler(reason);
  if (exit_process_) _exit(exit_code);
}

void CallWatch::Loop() {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
    }
    pollfd fd{crash_pipe_[0], POLLIN, 0};
    if (crash_pipe_[0] >= 0 && poll(&fd, 1, 100) > 0) {
      char byte;
      if (read(crash_pipe_[0], &byte, 1) == 1) {
        const int signal = g_crash_signal.load();
        End(g_crash_reason, 128 + signal);
        continue;
      }
    } else if (crash_pipe_[0] < 0) {
      absl::SleepFor(absl::Milliseconds(100));
    }
    std::string reason;
    {
      absl::MutexLock lock(&mu_);
      const int64_t now = NowNs();
      for (const auto& slot : slots_) {
        int64_t deadline = slot->deadline_ns.load(std::memory_order_acquire);
        if (deadline == 0 || now < deadline) continue;
        // Counted once: the slot waits for its next call.
        if (!slot->deadline_ns.compare_exchange_strong(deadline, 0)) continue;
        const char* call = slot->call.load();
        reason = absl::StrCat(
            "environment call ", call != nullptr ? call : "?", " of ",
            slot->origin, " did not return within ",
            DescribeTimeout(absl::Milliseconds(slot->timeout_ms.load())),
            " (env.call_timeout_s): the worker process ends so that a fresh "
            "one serves later runs");
        break;
      }
    }
    if (!reason.empty()) End(reason, kEnvHungExitCode);
  }
}

void CallWatch::OnFatalSignal(int signal) {
  CallWatch* watch = g_signal_watch.load();
  CallWatch::Slot* in_flight = nullptr;
  const int thread = static_cast<int>(syscall(SYS_gettid));
  for (auto& entry : g_signal_slots) {
    CallWatch::Slot* slot = entry.load();
    if (slot != nullptr && slot->deadline_ns.load() != 0 &&
        slot->thread.load() == thread) {
      in_flight = slot;
      break;
    }
  }
  if (watch == nullptr || in_flight == nullptr || !watch->end_enabled_.load() ||
      g_crashing.fetch_add(1) != 0) {
    // Not inside an environment call (or crashing again while reporting):
    // the usual end, a core dump where enabled.
    ::signal(signal, SIG_DFL);
    raise(signal);
    return;
  }
  g_crash_reason[0] = '\0';
  const char* call = in_flight->call.load();
  AppendText(g_crash_reason, sizeof(g_crash_reason), "environment call ");
  AppendText(g_crash_reason, sizeof(g_crash_reason),
             call != nullptr ? call : "?");
  AppendText(g_crash_reason, sizeof(g_crash_reason), " of ");
  AppendText(g_crash_reason, sizeof(g_crash_reason), in_flight->origin.c_str());
  AppendText(g_crash_reason, sizeof(g_crash_reason), " crashed the process (");
  const char* name = sigabbrev_np(signal);
  AppendText(g_crash_reason, sizeof(g_crash_reason), "SIG");
  AppendText(g_crash_reason, sizeof(g_crash_reason),
             name != nullptr ? name : "?");
  AppendText(g_crash_reason, sizeof(g_crash_reason),
             "): the worker process ends so that a fresh one serves later "
             "runs");
  g_crash_signal.store(signal);
  const char byte = 'c';
  if (write(watch->crash_pipe_[1], &byte, 1) != 1) _exit(128 + signal);
  // The watch reports and ends the process; this thread waits for it, 15 s
  // at most (a crash inside malloc may leave the watch unable to).
  for (int i = 0; i < 150; ++i) {
    timespec tenth{0, 100 * 1000 * 1000};
    nanosleep(&tenth, nullptr);
  }
  _exit(128 + signal);
}

void CallWatch::CatchCrashes() {
  if (this != &Process()) return;
  CallWatch* expected = nullptr;
  if (!g_signal_watch.compare_exchange_strong(expected, this)) return;
  struct sigaction action {};
  action.sa_handler = &CallWatch::OnFatalSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND | SA_NODEFER;
  for (int signal : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) {
    sigaction(signal, &action, nullptr);
  }
}

}  // namespace rl
