#include "coordinator/pending_ends.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace rl {
namespace {

TEST(PendingEndsTest, ShownAtOnceAndWrittenOnce) {
  ASSERT_OK_AND_ASSIGN(auto store,
                       RunStore::Open(MakeTestDir() + "/runs.db", 0));
  bool created = false;
  RunSpec spec;
  spec.set_name("r");
  ASSERT_OK_AND_ASSIGN(const rl::Run queued,
                       store->SubmitRun(spec, "", &created));
  ASSERT_OK_AND_ASSIGN(const rl::Run other,
                       store->SubmitRun(spec, "", &created));

  PendingEnds ends;
  EXPECT_TRUE(ends.empty());
  ends.Keep(queued.run_id(), FAILED, "its workers failed 11 times");
  rl::Run shown = queued;
  shown.set_waiting_reason("needs 1 learner");
  ends.Apply(&shown);
  EXPECT_EQ(shown.state(), FAILED);
  EXPECT_EQ(shown.failure_reason(), "its workers failed 11 times");
  EXPECT_EQ(shown.waiting_reason(), "");
  rl::Run untouched = other;
  ends.Apply(&untouched);
  EXPECT_EQ(untouched.state(), QUEUED);

  std::vector<rl::Run> written;
  ends.Write(store.get(), &written);
  ASSERT_EQ(written.size(), 1u);
  EXPECT_EQ(written[0].state(), FAILED);
  EXPECT_TRUE(ends.empty());
  ASSERT_OK_AND_ASSIGN(const rl::Run stored, store->GetRun(queued.run_id()));
  EXPECT_EQ(stored.state(), FAILED);
  EXPECT_EQ(stored.failure_reason(), "its workers failed 11 times");
  // Nothing left to write: a second Write writes nothing.
  ends.Write(store.get(), &written);
  EXPECT_EQ(written.size(), 1u);
}

}  // namespace
}  // namespace rl
