// A fixed set of threads that run one function over N shards and return when
// all are done: the CPU backend's way to split E environments per step.
// Shard 0 runs on the calling thread, shards 1..N-1 on persistent workers
// (created once, joined in the destructor); with N = 1 there are no threads.
// Between runs a worker first spins for a bounded moment (kSpin) watching for
// the next run, then sleeps on the mutex: a batch stepped every few tens of
// microseconds (fast MuJoCo tasks, CartPole) does not pay a futex wake-up per
// step, and an idle pool costs nothing. The caller waits for the workers the
// same way.
#ifndef RL_ENVS_SHARD_POOL_H_
#define RL_ENVS_SHARD_POOL_H_

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"

namespace rl {

class ShardPool {
 public:
  explicit ShardPool(int num_shards);
  ~ShardPool();
  ShardPool(const ShardPool&) = delete;
  ShardPool& operator=(const ShardPool&) = delete;

  int num_shards() const { return num_shards_; }

  // Runs fn(shard) for every shard in [0, num_shards) and returns when all
  // calls have returned. Not reentrant: one Run at a time. The wait has no
  // timeout: it waits only on this pool's own threads running `fn`.
  void Run(absl::FunctionRef<void(int)> fn) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void WorkerLoop(int shard) ABSL_LOCKS_EXCLUDED(mu_);

  // Spins up to `budget_ns` while `done()` is false.
  template <typename Done>
  static void SpinUntil(Done done, int64_t budget_ns);

  const int num_shards_;
  // Mirrors of generation_ and pending_ read while spinning (written under
  // mu_ with them).
  std::atomic<uint64_t> published_{0};
  std::atomic<int> running_{0};
  absl::Mutex mu_;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // bumped by each Run
  int pending_ ABSL_GUARDED_BY(mu_) = 0;          // workers still running
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  const absl::FunctionRef<void(int)>* fn_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::vector<std::thread> workers_;
};

}  // namespace rl

#endif  // RL_ENVS_SHARD_POOL_H_
