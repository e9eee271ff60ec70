#include "envs/shard_pool.h"

#include <pthread.h>

#include <chrono>
#include <string>

#include "absl/strings/str_cat.h"

namespace rl {
namespace {

// How long a worker (or the caller) watches for the next run (or the
// workers' end) before sleeping: about the time of a futex wake-up plus a
// fast batch's step, small enough that an idle pool's spinning is noise.
constexpr int64_t kSpinNs = 50'000;

}  // namespace

template <typename Done>
void ShardPool::SpinUntil(Done done, int64_t budget_ns) {
  const auto start = std::chrono::steady_clock::now();
  for (int k = 1;; ++k) {
    if (done()) return;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if (k % 64 == 0 && std::chrono::steady_clock::now() - start >
                           std::chrono::nanoseconds(budget_ns)) {
      return;
    }
  }
}

ShardPool::ShardPool(int num_shards)
    : num_shards_(num_shards < 1 ? 1 : num_shards) {
  workers_.reserve(num_shards_ - 1);
  for (int shard = 1; shard < num_shards_; ++shard) {
    workers_.emplace_back([this, shard] { WorkerLoop(shard); });
    const std::string name = absl::StrCat("env-shard-", shard);
    pthread_setname_np(workers_.back().native_handle(), name.c_str());
  }
}

ShardPool::~ShardPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : workers_) t.join();
}

void ShardPool::Run(absl::FunctionRef<void(int)> fn) {
  if (workers_.empty()) {
    fn(0);
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    fn_ = &fn;
    pending_ = static_cast<int>(workers_.size());
    running_.store(pending_, std::memory_order_relaxed);
    ++generation_;
    published_.store(generation_, std::memory_order_release);
  }
  fn(0);
  SpinUntil([this] { return running_.load(std::memory_order_acquire) == 0; },
            kSpinNs);
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int* pending) { return *pending == 0; }, &pending_));
  fn_ = nullptr;
}

void ShardPool::WorkerLoop(int shard) {
  struct Wake {
    const ShardPool* pool;
    uint64_t seen;
    bool Ready() const ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return pool->generation_ != seen || pool->stopping_;
    }
  };
  Wake wake{this, 0};
  while (true) {
    const absl::FunctionRef<void(int)>* fn;
    // The next run is usually a few microseconds away: watch for it before
    // sleeping on the mutex.
    SpinUntil(
        [&] { return published_.load(std::memory_order_acquire) != wake.seen; },
        kSpinNs);
    {
      absl::MutexLock lock(&mu_, absl::Condition(&wake, &Wake::Ready));
      if (stopping_) return;
      wake.seen = generation_;
      fn = fn_;
    }
    (*fn)(shard);
    absl::MutexLock lock(&mu_);
    --pending_;
    running_.fetch_sub(1, std::memory_order_release);
  }
}

}  // namespace rl
