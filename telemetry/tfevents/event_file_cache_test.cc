// The event file cache keeps open files bounded whatever the number of runs,
// and every point written through it can be read back from the run's
// directory.
#include "telemetry/tfevents/event_file_cache.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "telemetry/tfevents/event.pb.h"
#include "telemetry/tfevents/tfrecord.h"
#include "testing/file_size_limit.h"

namespace rl {
namespace {

namespace fs = std::filesystem;

// (tag, step, value) of a scalar, in file order.
using Scalar = std::tuple<std::string, int64_t, float>;

std::string TestDir() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const auto* info = testing::UnitTest::GetInstance()->current_test_info();
  const fs::path dir = fs::path(tmp != nullptr ? tmp : "/tmp") /
                       "event_file_cache_test" /
                       absl::StrCat(info->name(), "-", getpid());
  fs::remove_all(dir);
  return dir.string();
}

int OpenFds() {
  int n = 0;
  for (const auto& entry : fs::directory_iterator("/proc/self/fd")) {
    (void)entry;
    ++n;
  }
  return n;
}

std::vector<fs::path> EventFiles(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Every scalar of every event file in `dir` (files in name order, as
// TensorBoard reads them); each file must start with its file version.
std::vector<Scalar> ReadScalars(const fs::path& dir) {
  std::vector<Scalar> scalars;
  for (const fs::path& path : EventFiles(dir)) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    auto records = DecodeTfRecords(bytes.str());
    EXPECT_TRUE(records.ok()) << path << ": " << records.status();
    if (!records.ok() || records->empty()) continue;
    for (size_t i = 0; i < records->size(); ++i) {
      tensorboard::Event event;
      EXPECT_TRUE(event.ParseFromString((*records)[i]));
      if (i == 0) {
        EXPECT_EQ(event.file_version(), "brain.Event:2") << path;
        continue;
      }
      EXPECT_EQ(event.file_version(), "") << path << " record " << i;
      for (const auto& v : event.summary().value()) {
        scalars.emplace_back(v.tag(), event.step(), v.simple_value());
      }
    }
  }
  return scalars;
}

TEST(EventFileCacheTest, FiftyRunsThroughFourOpenFilesLoseNothing) {
  const std::string root = TestDir();
  EventFileCacheOptions options;
  options.root_dir = root;
  options.max_open_files = 4;
  auto cache = EventFileCache::Create(options);
  ASSERT_TRUE(cache.ok()) << cache.status();

  constexpr int kRuns = 50;
  constexpr int kRounds = 5;
  const int baseline = OpenFds();
  int most_open = 0;
  std::map<std::string, std::vector<Scalar>> want;
  // Every round touches every run, so each run is closed and reopened
  // between rounds.
  for (int round = 0; round < kRounds; ++round) {
    for (int run = 0; run < kRuns; ++run) {
      const std::string dir = absl::StrCat("run-", run);
      for (int k = 0; k < 3; ++k) {
        const int64_t step = round * 3 + k;
        const float value = static_cast<float>(run * 1000 + step);
        const std::string tag = k == 2 ? "b" : "a";
        ASSERT_TRUE(
            (*cache)->AddScalar(dir, tag, step, 1.7e9 + step, value).ok());
        want[dir].emplace_back(tag, step, value);
        most_open = std::max(most_open, OpenFds() - baseline);
      }
    }
    ASSERT_TRUE((*cache)->Flush().ok());
  }
  EXPECT_LE(most_open, options.max_open_files);
  EXPECT_EQ((*cache)->open_files(), options.max_open_files);
  EXPECT_GE((*cache)->evictions(), kRuns * kRounds - options.max_open_files);
  cache->reset();
  EXPECT_LE(OpenFds(), baseline);

  for (int run = 0; run < kRuns; ++run) {
    const std::string dir = absl::StrCat("run-", run);
    // Reopened for append: one file per run, not one per reopen.
    EXPECT_EQ(EventFiles(fs::path(root) / dir).size(), 1u) << dir;
    EXPECT_EQ(ReadScalars(fs::path(root) / dir), want[dir]) << dir;
  }
}

TEST(EventFileCacheTest, FileRemovedWhileClosedStartsANewFile) {
  const std::string root = TestDir();
  EventFileCacheOptions options;
  options.root_dir = root;
  options.max_open_files = 1;
  auto cache = EventFileCache::Create(options);
  ASSERT_TRUE(cache.ok()) << cache.status();
  ASSERT_TRUE((*cache)->AddScalar("a", "x", 1, 1.0, 1.0f).ok());
  ASSERT_TRUE((*cache)->AddScalar("b", "x", 1, 1.0, 1.0f).ok());  // closes a
  const std::vector<fs::path> files = EventFiles(fs::path(root) / "a");
  ASSERT_EQ(files.size(), 1u);
  fs::remove(files[0]);
  ASSERT_TRUE((*cache)->AddScalar("a", "x", 2, 2.0, 2.0f).ok());
  cache->reset();
  EXPECT_EQ(ReadScalars(fs::path(root) / "a"),
            (std::vector<Scalar>{{"x", 2, 2.0f}}));
  EXPECT_EQ(ReadScalars(fs::path(root) / "b"),
            (std::vector<Scalar>{{"x", 1, 1.0f}}));
}

// A write error (a full disk, simulated with RLIMIT_FSIZE) stops that
// writer for good; the cache used to hand the failed writer back until the
// server restarted, so the run's TensorBoard file took nothing more. After
// retry_after_error the run's next point starts a new file.
TEST(EventFileCacheTest, AWriterThatFailedIsReplacedByANewFile) {
  const std::string root = TestDir();
  EventFileCacheOptions options;
  options.root_dir = root;
  options.retry_after_error = absl::ZeroDuration();
  auto cache = EventFileCache::Create(options);
  ASSERT_TRUE(cache.ok()) << cache.status();
  ASSERT_TRUE((*cache)->AddScalar("run", "x", 0, 0.0, 1.0f).ok());
  ASSERT_TRUE((*cache)->Flush().ok());

  absl::Status error;
  {
    const FileSizeLimit full_disk(10000);
    const std::string tag(500, 't');
    for (int step = 1; step < 1000 && error.ok(); ++step) {
      error = (*cache)->AddScalar("run", tag, step, step, 1.0f);
      if (error.ok()) error = (*cache)->Flush();
    }
  }
  ASSERT_FALSE(error.ok()) << "no write error under a 10000-byte limit";

  ASSERT_TRUE((*cache)->AddScalar("run", "y", 7, 7.0, 2.0f).ok());
  ASSERT_TRUE((*cache)->Flush().ok());
  EXPECT_EQ((*cache)->replaced_after_error(), 1);
  const std::vector<fs::path> files = EventFiles(fs::path(root) / "run");
  ASSERT_EQ(files.size(), 2u);
  std::ifstream in(files[1], std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  auto records = DecodeTfRecords(bytes.str());
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 2u);  // its file version, then the point
  tensorboard::Event event;
  ASSERT_TRUE(event.ParseFromString((*records)[1]));
  EXPECT_EQ(event.step(), 7);
  ASSERT_EQ(event.summary().value_size(), 1);
  EXPECT_EQ(event.summary().value(0).tag(), "y");
}

TEST(EventFileCacheTest, BadOptionsAreRefused) {
  EventFileCacheOptions options;
  options.root_dir = TestDir();
  options.max_open_files = 0;
  EXPECT_EQ(EventFileCache::Create(options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.max_open_files = 1;
  options.root_dir = "";
  EXPECT_EQ(EventFileCache::Create(options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rl
