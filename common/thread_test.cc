#include "common/thread.h"

#include <pthread.h>

#include <atomic>
#include <string>

#include "gtest/gtest.h"

namespace rl {
namespace {

std::string CurrentName() {
  char name[16] = {};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  return name;
}

TEST(ThreadTest, NamedAndJoinedWhenItGoes) {
  std::string seen;
  std::atomic<bool> ran{false};
  {
    NamedThread t = StartThread("learner-ppo", [&] {
      seen = CurrentName();
      ran = true;
    });
    EXPECT_EQ(t.name(), "learner-ppo");
  }  // joined here: `seen` is written before
  EXPECT_TRUE(ran);
  EXPECT_EQ(seen, "learner-ppo");
  // Names past 15 bytes are cut, not refused.
  NamedThread long_name =
      StartThread("a-very-long-thread-name", [&] { seen = CurrentName(); });
  long_name.join();
  long_name.join();  // again: nothing to do
  EXPECT_EQ(seen, "a-very-long-thr");
  // Assigning joins the thread held before.
  NamedThread t = StartThread("first", [&] { ran = false; });
  t = StartThread("second", [] {});
  EXPECT_FALSE(ran);
  EXPECT_EQ(t.name(), "second");
}

}  // namespace
}  // namespace rl
