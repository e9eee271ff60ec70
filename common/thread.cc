#include "common/thread.h"

#include <pthread.h>

#include <utility>

namespace rl {

NamedThread& NamedThread::operator=(NamedThread&& other) noexcept {
  if (this != &other) {
    join();
    name_ = std::move(other.name_);
    thread_ = std::move(other.thread_);
  }
  return *this;
}

NamedThread::~NamedThread() { join(); }

void NamedThread::join() {
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) {
    thread_.join();
  }
}

NamedThread StartThread(std::string name, std::function<void()> fn) {
  NamedThread thread;
  thread.name_ = std::move(name);
  // Linux names are at most 15 bytes and a terminating NUL.
  thread.thread_ = std::thread(
      [short_name = thread.name_.substr(0, 15), fn = std::move(fn)] {
        pthread_setname_np(pthread_self(), short_name.c_str());
        fn();
      });
  return thread;
}

}  // namespace rl
