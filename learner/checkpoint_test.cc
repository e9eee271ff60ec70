#include "learner/checkpoint.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <torch/optim/adam.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "envs/env_registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/file_size_limit.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace rl {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

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
  // A run's weights are its owner's: readable by the service's user only.
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(*dir)) {
    struct stat info {};
    ASSERT_EQ(::stat(entry.path().c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 0777, 0600u) << entry.path();
    ++files;
  }
  EXPECT_GE(files, 1);

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

// A run's checkpoint loads into a fresh network of the run; a run whose
// network differs is refused naming the shapes.
TEST(CheckpointTest, ARunsPolicyLoadsFromItsCheckpoint) {
  const std::string root = MakeTestDir("run_policy");
  RunSpec spec;
  spec.mutable_env()->set_id("CartPole-v1");
  ASSERT_OK(ResolveEnvSpec(spec.mutable_env()));
  spec.mutable_policy()->add_hidden_sizes(8);
  ActorCritic policy(Config(8));
  torch::optim::Adam adam(policy->parameters(),
                          torch::optim::AdamOptions(1e-3));
  ASSERT_OK_AND_ASSIGN(const std::string dir,
                       WriteCheckpoint(root, 1, policy, adam, {}, 1));
  ASSERT_OK_AND_ASSIGN(ActorCritic read, ReadRunPolicy(spec, dir));
  EXPECT_TRUE(torch::equal(read->parameters()[0], policy->parameters()[0]));
  RunSpec wider = spec;
  wider.mutable_policy()->set_hidden_sizes(0, 16);
  EXPECT_THAT(ReadRunPolicy(wider, dir).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
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

// One name format and one parse serve every writer and pruner of
// checkpoints (the run's, another policy's, a policy learner's).
TEST(CheckpointTest, NamesParseBackAndPruneKeepsTheGivenCounters) {
  EXPECT_EQ(CheckpointName(42), "ckpt-000000000042");
  EXPECT_EQ(CheckpointCounter(CheckpointName(42)), 42);
  EXPECT_EQ(CheckpointCounter("/runs/r/checkpoints/ckpt-000000000007/"), 7);
  EXPECT_EQ(CheckpointCounter("/runs/r/checkpoints/ckpt-7"), 7);
  EXPECT_EQ(CheckpointCounter("/runs/r/checkpoints"), std::nullopt);
  EXPECT_EQ(CheckpointCounter("ckpt-"), std::nullopt);
  EXPECT_EQ(CheckpointCounter("ckpt-12x"), std::nullopt);
  EXPECT_EQ(CheckpointCounter("ckpt--3"), std::nullopt);
  EXPECT_EQ(CheckpointCounter(".tmp-ckpt-000000000001-77"), std::nullopt);

  const std::string root = MakeTestDir("prune");
  ActorCritic policy(Config(4));
  torch::optim::Adam adam(policy->parameters());
  for (int i = 1; i <= 4; ++i) {
    ASSERT_TRUE(WriteCheckpoint(root, i, policy, adam, {}, 10).ok());
  }
  fs::create_directories(fs::path(root) / "not-a-checkpoint");
  ASSERT_OK_AND_ASSIGN(const std::set<int64_t> written,
                       CheckpointCounters(root));
  EXPECT_EQ(written, (std::set<int64_t>{1, 2, 3, 4}));
  ASSERT_OK(PruneCheckpoints(root, {2, 4, 9}));
  ASSERT_OK_AND_ASSIGN(const std::set<int64_t> kept, CheckpointCounters(root));
  EXPECT_EQ(kept, (std::set<int64_t>{2, 4}));
  EXPECT_TRUE(fs::exists(fs::path(root) / "not-a-checkpoint"));
  EXPECT_EQ(*LatestCheckpoint(root),
            (fs::path(root) / CheckpointName(4)).string());

  const std::string missing = (fs::path(root) / "missing").string();
  EXPECT_THAT(
      CheckpointCounters(missing).status(),
      StatusIs(absl::StatusCode::kInternal, HasSubstr("listing " + missing)));
  EXPECT_THAT(
      PruneCheckpoints(missing, {}),
      StatusIs(absl::StatusCode::kInternal, HasSubstr("pruning " + missing)));
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

std::vector<std::string> TempDirsIn(const std::string& root) {
  std::vector<std::string> found;
  for (const auto& entry : fs::directory_iterator(root)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(".tmp", 0) == 0) found.push_back(name);
  }
  return found;
}

// The disk fills while a checkpoint is written: a RESOURCE_EXHAUSTED Status
// naming the file (not an abort), no temporary directory left, the previous
// checkpoint still the latest; once space returns, writing works again.
TEST(CheckpointTest, AFullDiskIsAStatusAndKeepsThePreviousCheckpoint) {
  const std::string root = MakeTestDir("full");
  ActorCritic policy(Config(8));
  torch::optim::Adam adam(policy->parameters());
  ASSERT_OK_AND_ASSIGN(const std::string first,
                       WriteCheckpoint(root, 1, policy, adam, {}, 3));
  absl::StatusOr<std::string> full;
  {
    FileSizeLimit limit(64);
    full = WriteCheckpoint(root, 2, policy, adam, {}, 3);
  }
  EXPECT_THAT(full.status(), StatusIs(absl::StatusCode::kResourceExhausted,
                                      HasSubstr("cannot write ")));
  EXPECT_THAT(std::string(full.status().message()), HasSubstr("policy.pt"));
  EXPECT_THAT(TempDirsIn(root), ::testing::IsEmpty());
  EXPECT_FALSE(fs::exists(fs::path(root) / "ckpt-000000000002"));
  EXPECT_EQ(LatestCheckpoint(root).value_or(""), first);
  EXPECT_OK(ReadCheckpoint(first, policy, &adam, nullptr));

  ASSERT_OK_AND_ASSIGN(const std::string third,
                       WriteCheckpoint(root, 3, policy, adam, {}, 3));
  EXPECT_EQ(LatestCheckpoint(root).value_or(""), third);
  EXPECT_THAT(TempDirsIn(root), ::testing::IsEmpty());
}

// The same number written again (periodic, then final at one update): the
// new copy takes the old one's place whole, and nothing else is left.
TEST(CheckpointTest, TheSameNumberWrittenAgainReplacesItWhole) {
  const std::string root = MakeTestDir("again");
  ActorCritic policy(Config(4));
  torch::optim::Adam adam(policy->parameters());
  ASSERT_OK_AND_ASSIGN(const std::string first,
                       WriteCheckpoint(root, 5, policy, adam,
                                       {{"mark", torch::tensor({1})}}, 1));
  ASSERT_OK_AND_ASSIGN(const std::string again,
                       WriteCheckpoint(root, 5, policy, adam,
                                       {{"mark", torch::tensor({2})}}, 1));
  EXPECT_EQ(again, first);
  TensorMap extra;
  ASSERT_OK(ReadCheckpoint(again, policy, &adam, &extra));
  EXPECT_EQ(extra.at("mark").item<int64_t>(), 2);
  int entries = 0;
  for (const auto& entry : fs::directory_iterator(root)) {
    (void)entry;
    ++entries;
  }
  EXPECT_EQ(entries, 1);  // ckpt-000000000005 alone: no copy left aside
  EXPECT_THAT(TempDirsIn(root), ::testing::IsEmpty());
}

// A learner killed mid-write leaves its temporary directory; the next
// write on the host removes it once untouched for 10 minutes (its process
// is gone, or has its pid), and leaves a live process's, another host's
// and a recent one alone.
TEST(CheckpointTest, ADeadWritersTemporaryDirectoryIsRemoved) {
  const std::string root = MakeTestDir("dead_writer");
  char host[256] = "";
  ASSERT_EQ(::gethostname(host, sizeof(host) - 1), 0);
  // A process that has ended, and been reaped: its pid is free.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  // Untouched for an hour, unless `recent` (a writer's stays 10 minutes
  // whatever its pid says).
  const auto leftover = [&](const std::string& who, int pid,
                            bool recent = false) {
    const fs::path dir =
        fs::path(root) /
        absl::StrCat(".tmp-", CheckpointName(1), "-", who, "-", pid);
    fs::create_directories(dir);
    std::ofstream(dir / "policy.pt") << "half a file";
    if (!recent) {
      fs::last_write_time(
          dir, fs::file_time_type::clock::now() - std::chrono::hours(1));
    }
    return dir;
  };
  const fs::path dead = leftover(host, child);
  // This pid's, left by a predecessor (a restarted container's process).
  const fs::path predecessor = leftover(host, static_cast<int>(::getpid()));
  const fs::path live = leftover(host, static_cast<int>(::getppid()));
  const fs::path elsewhere = leftover("another-host", child);
  const fs::path recent = leftover(host, child + 1000000, /*recent=*/true);
  // Names without the host, from before they held it: any host's, so they
  // go by age alone (a day untouched).
  const auto old_format = [&](int counter, std::chrono::hours age) {
    const fs::path dir =
        fs::path(root) / absl::StrCat(".tmp-", CheckpointName(counter), "-",
                                      static_cast<int>(::getppid()));
    fs::create_directories(dir);
    fs::last_write_time(dir, fs::file_time_type::clock::now() - age);
    return dir;
  };
  const fs::path old_dead = old_format(3, std::chrono::hours(25));
  const fs::path old_young = old_format(4, std::chrono::hours(1));

  torch::manual_seed(1);
  ActorCritic policy(Config(8));
  torch::optim::Adam adam(policy->parameters(),
                          torch::optim::AdamOptions(1e-3));
  ASSERT_OK(WriteCheckpoint(root, 2, policy, adam, {}, 2).status());
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_FALSE(fs::exists(predecessor));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(elsewhere));
  EXPECT_TRUE(fs::exists(recent));
  EXPECT_FALSE(fs::exists(old_dead));
  EXPECT_TRUE(fs::exists(old_young));
  EXPECT_EQ(*LatestCheckpoint(root),
            (fs::path(root) / CheckpointName(2)).string());
}

// A checkpoint whose file a crash cut short is DATA_LOSS naming the file
// (not a run that does not fit it), and the newest that reads is found
// under the damaged one.
TEST(CheckpointTest, ADamagedCheckpointIsPassedOverForTheOneBefore) {
  const std::string root = MakeTestDir("damaged");
  ActorCritic policy(Config(4));
  torch::optim::Adam adam(policy->parameters());
  for (int i = 1; i <= 3; ++i) {
    ASSERT_OK(WriteCheckpoint(root, i, policy, adam,
                              {{"mark", torch::tensor({i})}}, 3)
                  .status());
  }
  const fs::path third = fs::path(root) / "ckpt-000000000003";
  fs::resize_file(third / "optimizer.pt", 100);
  EXPECT_THAT(ReadCheckpoint(third.string(), policy, &adam, nullptr),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("is damaged: optimizer.pt does not read")));
  TensorMap extra;
  std::vector<std::string> tried;
  ASSERT_OK_AND_ASSIGN(const std::string read,
                       ReadNewestReadable(root, [&](const std::string& dir) {
                         tried.push_back(fs::path(dir).filename().string());
                         return ReadCheckpoint(dir, policy, &adam, &extra);
                       }));
  EXPECT_EQ(fs::path(read).filename(), "ckpt-000000000002");
  EXPECT_EQ(extra.at("mark").item<int64_t>(), 2);
  EXPECT_THAT(tried,
              ::testing::ElementsAre("ckpt-000000000003", "ckpt-000000000002"));
  // The damaged one is set aside: no longer a checkpoint to find or prune.
  EXPECT_TRUE(fs::exists(fs::path(root) / "damaged-ckpt-000000000003"));
  EXPECT_EQ(fs::path(LatestCheckpoint(root).value_or("")).filename(),
            "ckpt-000000000002");
  ASSERT_OK_AND_ASSIGN(const std::set<int64_t> counters,
                       CheckpointCounters(root));
  EXPECT_EQ(counters, (std::set<int64_t>{1, 2}));
  // Any other error stops at once; none at all is NOT_FOUND; every one
  // damaged is the newest's DATA_LOSS.
  EXPECT_THAT(ReadNewestReadable(root,
                                 [](const std::string&) {
                                   return absl::InvalidArgumentError("shape");
                                 })
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(
      ReadNewestReadable(MakeTestDir("none"),
                         [](const std::string&) { return absl::OkStatus(); })
          .status(),
      StatusIs(absl::StatusCode::kNotFound));
  for (const char* name : {"ckpt-000000000001", "ckpt-000000000002"}) {
    fs::remove(fs::path(root) / name / "policy.pt");
  }
  fs::rename(fs::path(root) / "damaged-ckpt-000000000003", third);
  EXPECT_THAT(ReadNewestReadable(root,
                                 [&](const std::string& dir) {
                                   return ReadCheckpoint(dir, policy, &adam,
                                                         nullptr);
                                 })
                  .status(),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("ckpt-000000000003 is damaged")));
  // Every one damaged: none set aside.
  ASSERT_OK_AND_ASSIGN(const std::set<int64_t> left, CheckpointCounters(root));
  EXPECT_EQ(left, (std::set<int64_t>{1, 2, 3}));
  // One that failed to read but whose files read now (a passing fault, a
  // policy's checkpoint beside it damaged): left in place.
  ASSERT_OK(WriteCheckpoint(root, 4, policy, adam, {}, 9).status());
  ASSERT_OK(WriteCheckpoint(root, 5, policy, adam, {}, 9).status());
  int reads = 0;
  ASSERT_OK_AND_ASSIGN(const std::string second,
                       ReadNewestReadable(root, [&](const std::string&) {
                         return ++reads == 1 ? absl::DataLossError("passing")
                                             : absl::OkStatus();
                       }));
  EXPECT_EQ(fs::path(second).filename(), "ckpt-000000000004");
  EXPECT_TRUE(fs::exists(fs::path(root) / "ckpt-000000000005"));
}

// A root that cannot be a directory (a regular file is in the way): a clear
// Status naming the path, nothing written.
TEST(CheckpointTest, AnUnusableRootIsAStatusNamingThePath) {
  const std::string dir = MakeTestDir("blocked");
  const fs::path file = fs::path(dir) / "not-a-dir";
  std::ofstream(file) << "x";
  ActorCritic policy(Config(4));
  torch::optim::Adam adam(policy->parameters());
  const std::string root = (file / "checkpoints").string();
  const auto written = WriteCheckpoint(root, 1, policy, adam, {}, 1);
  EXPECT_THAT(written.status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("cannot create checkpoint directory " + root +
                                 ": Not a directory")));
  EXPECT_EQ(LatestCheckpoint(root).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace rl
