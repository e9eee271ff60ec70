#include "common/process_memory.h"

#include <cstdint>
#include <cstring>
#include <memory>

#include "gtest/gtest.h"

namespace rl {
namespace {

TEST(ProcessMemoryTest, ResidentMemoryGrowsWithTouchedPages) {
  const int64_t before = ProcessRssBytes();
  EXPECT_GT(before, 0);
  constexpr size_t kBytes = 64 << 20;
  std::unique_ptr<char[]> block(new char[kBytes]);
  std::memset(block.get(), 1, kBytes);  // resident only once touched
  const int64_t after = ProcessRssBytes();
  EXPECT_GE(after - before, static_cast<int64_t>(kBytes) / 2)
      << before << " -> " << after;
  EXPECT_EQ(block[kBytes - 1], 1);
}

// A freed 16 MiB block is reused, not mapped afresh (its pages already
// resident): what a learner's segments need.
TEST(ProcessMemoryTest, LargeBlocksStayInTheHeap) {
  ASSERT_TRUE(KeepLargeBlocksInHeap());
  constexpr size_t kBytes = 16 << 20;
  char* block = new char[kBytes];
  std::memset(block, 1, kBytes);
  const uintptr_t first = reinterpret_cast<uintptr_t>(block);
  delete[] block;
  const int64_t before = ProcessRssBytes();
  char* second = new char[kBytes];
  std::memset(second, 2, kBytes);
  const int64_t after = ProcessRssBytes();
  EXPECT_EQ(first, reinterpret_cast<uintptr_t>(second));
  // Mapped afresh, touching it would add 16 MiB.
  EXPECT_LT(after - before, static_cast<int64_t>(kBytes) / 2)
      << before << " -> " << after;
  delete[] second;
}

}  // namespace
}  // namespace rl
