// Long-lived threads, named and joined: StartThread(name, fn) runs `fn` on
// a thread called `name` (shown by top -H, gdb, perf and
// /proc/<pid>/task/*/comm; cut to 15 bytes), and the NamedThread it
// returns joins it when destroyed (a std::thread would end the process).
//
//   sender_ = StartThread("actor-sender", [this] { SenderLoop(); });
//   ...
//   sender_.join();  // or let the destructor do it
#ifndef RL_COMMON_THREAD_H_
#define RL_COMMON_THREAD_H_

#include <functional>
#include <string>
#include <thread>

namespace rl {

class NamedThread {
 public:
  NamedThread() = default;
  NamedThread(NamedThread&& other) noexcept = default;
  // Joins the thread this held before taking `other`'s.
  NamedThread& operator=(NamedThread&& other) noexcept;
  NamedThread(const NamedThread&) = delete;
  NamedThread& operator=(const NamedThread&) = delete;
  ~NamedThread();  // join()

  bool joinable() const { return thread_.joinable(); }
  // Waits for the thread to end; does nothing if there is none (or it was
  // joined already).
  void join();
  const std::string& name() const { return name_; }

 private:
  friend NamedThread StartThread(std::string name, std::function<void()> fn);
  std::string name_;
  std::thread thread_;
};

NamedThread StartThread(std::string name, std::function<void()> fn);

}  // namespace rl

#endif  // RL_COMMON_THREAD_H_
