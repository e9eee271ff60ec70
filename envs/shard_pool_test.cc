#include "envs/shard_pool.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace rl {
namespace {

TEST(ShardPoolTest, RunsEveryShardOncePerRun) {
  ShardPool pool(3);
  ASSERT_EQ(pool.num_shards(), 3);
  std::vector<std::atomic<int>> calls(3);
  for (int run = 0; run < 100; ++run) {
    pool.Run([&](int shard) { calls[shard].fetch_add(1); });
    // Run returns only after every shard of this run has finished.
    for (int s = 0; s < 3; ++s) ASSERT_EQ(calls[s].load(), run + 1);
  }
}

TEST(ShardPoolTest, OneShardRunsOnTheCaller) {
  ShardPool pool(1);
  std::thread::id ran_on;
  pool.Run([&](int shard) {
    EXPECT_EQ(shard, 0);
    ran_on = std::this_thread::get_id();
  });
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST(ShardPoolTest, ShardsRunOnDistinctThreads) {
  ShardPool pool(3);
  std::vector<std::thread::id> ids(3);
  pool.Run([&](int shard) { ids[shard] = std::this_thread::get_id(); });
  EXPECT_EQ(ids[0], std::this_thread::get_id());
  EXPECT_NE(ids[1], ids[0]);
  EXPECT_NE(ids[2], ids[0]);
  EXPECT_NE(ids[1], ids[2]);
}

}  // namespace
}  // namespace rl
