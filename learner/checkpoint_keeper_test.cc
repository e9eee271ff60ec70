#include "learner/checkpoint_keeper.h"

#include <torch/optim/adam.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/file_size_limit.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace rl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

struct Model {
  Model() : policy(Config()), adam(policy->parameters()) {}
  static ActorCriticConfig Config() {
    ActorCriticConfig c;
    c.observation_size = 2;
    c.num_actions = 2;
    c.hidden_sizes = {4};
    return c;
  }
  ActorCritic policy;
  torch::optim::Adam adam;
};

// A file where the checkpoints directory would go: every write fails.
void Block(const std::string& run_dir) {
  std::ofstream(std::filesystem::path(run_dir) / "checkpoints") << "x";
}

TEST(CheckpointKeeperTest, WritesKeepsTheNewestAndCounts) {
  const std::string dir = MakeTestDir();
  CheckpointKeeper keeper({dir, /*keep=*/2, /*max_failures=*/3, nullptr});
  Model m;
  EXPECT_THAT(keeper.Latest(), StatusIs(absl::StatusCode::kNotFound));
  for (int64_t u = 1; u <= 3; ++u) {
    ASSERT_OK(keeper.WritePeriodic(u, 10 * u, m.policy, m.adam, {}));
  }
  ASSERT_OK_AND_ASSIGN(const std::string latest, keeper.Latest());
  EXPECT_THAT(latest, HasSubstr("ckpt-000000000003"));
  int kept = 0;
  for (const auto& e : std::filesystem::directory_iterator(keeper.root())) {
    kept += e.path().filename().string().rfind("ckpt-", 0) == 0;
  }
  EXPECT_EQ(kept, 2);
  EXPECT_EQ(keeper.counts().written, 3);
  EXPECT_EQ(keeper.counts().updates, 3);
  EXPECT_EQ(keeper.counts().failures, 0);
}

TEST(CheckpointKeeperTest, PeriodicFailuresAreToleratedUpToTheLimit) {
  const std::string dir = MakeTestDir();
  Block(dir);
  CheckpointKeeper keeper({dir, 2, /*max_failures=*/2, nullptr});
  Model m;
  EXPECT_OK(keeper.WritePeriodic(1, 10, m.policy, m.adam, {}));
  EXPECT_EQ(keeper.counts().consecutive_failures, 1);
  EXPECT_THAT(keeper.WritePeriodic(2, 20, m.policy, m.adam, {}),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("2 checkpoints in a row failed"),
                             HasSubstr("max_checkpoint_failures, is 2"),
                             HasSubstr("there is no complete checkpoint"))));
  EXPECT_EQ(keeper.counts().failures, 2);
  // The disk is back: a write succeeds and the run in a row restarts.
  std::filesystem::remove(std::filesystem::path(dir) / "checkpoints");
  EXPECT_OK(keeper.WritePeriodic(3, 30, m.policy, m.adam, {}));
  EXPECT_EQ(keeper.counts().consecutive_failures, 0);
  EXPECT_EQ(keeper.counts().failures, 2);
}

TEST(CheckpointKeeperTest, AFailedFinalCheckpointSaysWhereARestartResumes) {
  const std::string dir = MakeTestDir();
  CheckpointKeeper keeper({dir, 2, 5, nullptr});
  Model m;
  ASSERT_OK(keeper.Write(1, 10, m.policy, m.adam, {}));
  // The disk is full (simulated: until the limit is lifted, this process's
  // files cannot grow past 64 bytes; SIGXFSZ is ignored, the write fails).
  absl::Status final_status;
  {
    const FileSizeLimit full_disk(64);
    final_status = keeper.WriteFinal(2, 20, m.policy, m.adam, {});
  }
  EXPECT_THAT(final_status,
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("the final checkpoint failed"),
                             HasSubstr("the latest complete checkpoint is "
                                       "still"),
                             HasSubstr("ckpt-000000000001"))));
  EXPECT_EQ(keeper.counts().failures, 1);
  EXPECT_EQ(keeper.counts().updates, 1);
}

}  // namespace
}  // namespace rl
