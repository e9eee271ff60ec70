#include "common/process_memory.h"

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

}  // namespace
}  // namespace rl
