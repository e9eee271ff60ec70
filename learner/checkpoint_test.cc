#include "learner/checkpoint.h"

#include <filesystem>

#include "gtest/gtest.h"
#include "testing/temp_dir.h"

namespace rl {
namespace {

namespace fs = std::filesystem;

ActorCriticConfig Config(int hidden) {
  ActorCriticConfig c;
  c.observation_size = 4;
  c.num_actions = 2;
  c.hidden_sizes = {hidden};
  return c;
}

TEST(CheckpointTest, RoundTripsPolicyOptimizerAndExtras) {
  const std::string root = MakeTestDir("roundtrip");
  torch::manual_seed(1);
  ActorCritic policy(Config(8));
  torch::optim::Adam adam(policy->parameters(),
                          torch::optim::AdamOptions(1e-3));
  // One optimizer step so that Adam has state to save.
  policy->Value(torch::randn({3, 4})).sum().backward();
  adam.step();
  TensorMap extra = {{"counters", torch::tensor({7, 9}, torch::kInt64)}};
  auto dir = WriteCheckpoint(root, 3, policy, adam, extra, 2);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(*LatestCheckpoint(root), *dir);

  torch::manual_seed(2);
  ActorCritic other(Config(8));
  torch::optim::Adam other_adam(other->parameters(),
                                torch::optim::AdamOptions(1e-3));
  TensorMap loaded;
  ASSERT_TRUE(ReadCheckpoint(*dir, other, &other_adam, &loaded).ok());
  const auto a = policy->named_parameters(), b = other->named_parameters();
  for (const auto& item : a) {
    EXPECT_TRUE(torch::equal(item.value(), b[item.key()])) << item.key();
  }
  EXPECT_TRUE(torch::equal(loaded["counters"], extra["counters"]));
  // Same Adam state: one more identical step keeps them identical.
  for (auto* p : {&policy, &other}) {
    (*p)->zero_grad();
    (*p)->Value(torch::ones({2, 4})).sum().backward();
  }
  adam.step();
  other_adam.step();
  for (const auto& item : policy->named_parameters()) {
    EXPECT_TRUE(
        torch::equal(item.value(), other->named_parameters()[item.key()]));
  }
}

TEST(CheckpointTest, KeepsNewestAndIgnoresIncomplete) {
  const std::string root = MakeTestDir("keep");
  ActorCritic policy(Config(4));
  torch::optim::Adam adam(policy->parameters());
  for (int i = 1; i <= 4; ++i) {
    ASSERT_TRUE(WriteCheckpoint(root, i, policy, adam, {}, 2).ok());
  }
  int complete = 0;
  for (const auto& entry : fs::directory_iterator(root)) {
    complete += fs::exists(entry.path() / "COMPLETE");
  }
  EXPECT_EQ(complete, 2);
  // A crash mid-write leaves a directory without the marker: not picked.
  fs::create_directories(fs::path(root) / "ckpt-000000000099");
  EXPECT_NE(*LatestCheckpoint(root),
            (fs::path(root) / "ckpt-000000000099").string());
  EXPECT_EQ(ReadCheckpoint((fs::path(root) / "ckpt-000000000099").string(),
                           policy, nullptr, nullptr)
                .code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(LatestCheckpoint(MakeTestDir("empty")).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(CheckpointTest, MismatchedShapesAreRejected) {
  const std::string root = MakeTestDir("mismatch");
  ActorCritic small(Config(4));
  torch::optim::Adam adam(small->parameters());
  auto dir = WriteCheckpoint(root, 1, small, adam, {}, 1);
  ASSERT_TRUE(dir.ok());
  ActorCritic big(Config(16));
  const absl::Status status = ReadCheckpoint(*dir, big, nullptr, nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(status.message()).find("does not fit"),
            std::string::npos);
}

}  // namespace
}  // namespace rl
