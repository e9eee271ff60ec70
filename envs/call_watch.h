// Deadlines on calls into environment code that is not ours (a plugin's
// create, reset and step; the Gymnasium bridge's Python): the trust model
// of docs/security.md says every such call is bounded.
//
//   CallWatch::Slot* slot = CallWatch::Process().Register(origin);
//   {
//     CallWatch::Scope call(slot, "step", absl::Seconds(60));
//     plugin->step(...);             // watched while inside the scope
//   }
//   CallWatch::Process().Unregister(slot);
//
// In an actor worker (EnableEnd), a call that overruns its deadline, or a
// fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) raised on the
// calling thread while a call is inside a scope, ends the process: the
// process's end handler (the worker reports the run's failure to its
// coordinator, naming the call) runs on the watch's own thread, then the
// process exits with kEnvHungExitCode or 128 + the signal, and its
// supervisor (the embedded coordinator, Kubernetes, Slurm) starts a fresh
// one. The hung or crashed call's thread never runs again, so a stuck env
// cannot hold the worker for later runs. rl_local and a standalone actor
// also EnableEnd (no handler: the reason on stderr, then the exit); a
// process that does not (a test) logs an overrun and waits, and a crash
// there is an ordinary crash.
//
// Entering and leaving a scope is two relaxed atomic stores: one per
// batched call, not per environment.
#ifndef RL_ENVS_CALL_WATCH_H_
#define RL_ENVS_CALL_WATCH_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/thread.h"

namespace rl {

// The exit code of a process whose environment call overran its deadline.
inline constexpr int kEnvHungExitCode = 75;

// The default deadline of one call into an environment (EnvSpec's
// call_timeout_s of 0).
inline constexpr double kDefaultEnvCallTimeoutSeconds = 120;

class CallWatch {
 public:
  // One watched caller (one environment batch): its call in flight, if any.
  struct Slot {
    std::string origin;  // "plugin /x/libchase.so (env chase)", for reasons
    std::atomic<int64_t> deadline_ns{0};  // 0: no call in flight
    std::atomic<const char*> call{nullptr};
    std::atomic<int64_t> timeout_ms{0};
    std::atomic<int> thread{0};  // the calling thread's id (gettid)
  };

  // Marks a call of `slot` in flight for its lifetime. `slot` may be null
  // (nothing is watched).
  class Scope {
   public:
    Scope(Slot* slot, const char* call, absl::Duration timeout);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Slot* const slot_;
  };

  // What a process does before it exits over a hung or crashed call, given
  // the reason (e.g. "environment call step of plugin ... did not return
  // within 60 s"); it runs on the watch's thread and should return within
  // a few seconds (the process exits 10 s after at the latest).
  using EndHandler = std::function<void(const std::string& reason)>;

  // The process's watch (its thread starts at the first Register).
  static CallWatch& Process();

  // A watch with its own thread, for tests: `exit` false leaves the
  // process running after the handler (the hung call is abandoned).
  explicit CallWatch(bool exit_process);
  ~CallWatch();

  Slot* Register(std::string origin);
  void Unregister(Slot* slot);

  // Replaces the end handler (default: none; an empty one clears it).
  void SetEndHandler(EndHandler handler);

  // The process watch ends its process over a hung or crashed call only
  // once enabled (actor workers, whose supervisor starts a fresh one);
  // until then an overrun is logged and the call waited for (rl_local).
  void EnableEnd() { end_enabled_.store(true); }

  // Calls that overran so far (each counted once).
  int64_t overruns() const { return overruns_.load(); }

  // Installs the fatal-signal handlers that turn a crash inside a watched
  // call into the same end (handler, then exit 128 + signal) naming the
  // signal and the call. Idempotent; the process watch only.
  void CatchCrashes();

 private:
  void Loop();
  void End(const std::string& reason, int exit_code);
  static void OnFatalSignal(int signal);

  const bool exit_process_;
  std::atomic<bool> end_enabled_{false};
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Slot>> slots_ ABSL_GUARDED_BY(mu_);
  EndHandler handler_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<int64_t> overruns_{0};
  std::unique_ptr<NamedThread> thread_;
  int crash_pipe_[2] = {-1, -1};
};

// "1.5 s", "300 s": a timeout in the words reasons use.
std::string DescribeTimeout(absl::Duration timeout);

}  // namespace rl

#endif  // RL_ENVS_CALL_WATCH_H_
