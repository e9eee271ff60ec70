#include "envs/shard_pool.h"

#include <pthread.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace rl {

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
    ++generation_;
  }
  fn(0);
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
    {
      absl::MutexLock lock(&mu_, absl::Condition(&wake, &Wake::Ready));
      if (stopping_) return;
      wake.seen = generation_;
      fn = fn_;
    }
    (*fn)(shard);
    absl::MutexLock lock(&mu_);
    --pending_;
  }
}

}  // namespace rl
