// The chaos suite's full disk: the run directory (the coordinator's
// --runs_dir: checkpoints, segment ledgers, telemetry.db, TensorBoard files)
// is a small tmpfs that the test fills up mid-run. It checks that
//   - the learner's failed checkpoints are a clear error: its log says
//     "checkpoint failed (N in a row; the run fails at 5), training goes on
//     ..." naming RESOURCE_EXHAUSTED and "No space left on device";
//   - training goes on meanwhile: the run stays RUNNING and the second
//     failed attempt is one checkpoint interval after the first;
//   - the previous checkpoint is intact: while the disk is full it stays
//     the latest complete one, byte for byte, no temporary directory is
//     left behind, and it loads into the run's network;
//   - the run resumes when space returns: the learner logs a checkpoint
//     "written after N failed attempts", the run SUCCEEDS with its whole
//     step budget, and its newest checkpoint (newer than the one kept
//     intact) loads;
//   - nothing crashed on the full disk (no local worker or the telemetry
//     service restarted; the coordinator exits 0), and telemetry.db, on the
//     same full disk, still opens and holds the learner's count of failed
//     checkpoints.
// The learner fails a run after max_checkpoint_failures (5) failures in a
// row and no flag changes that, so the test frees the space at the second
// failure. Updates are made slow enough (4096 steps, 16 epochs of 64
// minibatches: about 0.5 s each here) that the three intervals left before
// a fifth failure give the test seconds to do so on a loaded machine; the
// filler is kept topped up until then, so no attempt finds room.
// A CartPole checkpoint is about 150 KB; the run directory holds about
// 0.3-0.5 MB when it is filled.
// Needs root (mount(2)); CI runs as root.
//
//   bazel test --config=long //tests:disk_full_test --test_output=all
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "learner/checkpoint.h"
#include "telemetry/metric_store.h"
#include "testing/embedded_coordinator.h"
#include "testing/process_fixture.h"
#include "testing/temp_dir.h"
#include "testing/wait_for.h"

namespace rl {
namespace {

namespace fs = std::filesystem;

constexpr char kTmpfsSize[] = "size=16m";
constexpr int64_t kSteps = 196608;         // 48 updates of 4096 steps, ~25 s
constexpr int kMaxCheckpointFailures = 5;  // LearnerCoreOptions' default

std::string DiskFullRun() {
  return absl::StrCat(R"(name: disk-full
env: {id: CartPole-v1}
envs_per_actor: 8
segment_length: 256
total_env_steps: )",
                      kSteps, R"(
seed: 31
ppo: {learning_rate: 1.0e-3, num_epochs: 16, num_minibatches: 64}
resources: {num_actors: 2}
checkpoint_interval: 2
)");
}

// The files of a checkpoint directory by name, with their bytes.
std::map<std::string, std::string> ReadDir(const std::string& dir) {
  std::map<std::string, std::string> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    files[entry.path().filename().string()] =
        ReadTestFile(entry.path().string());
  }
  return files;
}

int64_t Bytes(const std::map<std::string, std::string>& files) {
  int64_t n = 0;
  for (const auto& [name, bytes] : files) n += bytes.size();
  return n;
}

// The update number of the checkpoint a "checkpoint failed" line names
// (".tmp-ckpt-000000000004-..."); -1 if there is none.
int64_t FailedUpdate(absl::string_view line) {
  const size_t at = line.find(".tmp-ckpt-");
  int64_t update = -1;
  if (at == absl::string_view::npos ||
      !absl::SimpleAtoi(line.substr(at + 10, 12), &update)) {
    return -1;
  }
  return update;
}

// What under `root` is neither a complete checkpoint nor the temporary
// directory of an attempt after update `up_to` (one in progress): a failed
// attempt's leftovers, or a checkpoint name without its COMPLETE marker.
std::vector<std::string> Leftovers(const std::string& root,
                                   int64_t up_to = INT64_MAX) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    if (absl::StartsWith(name, "ckpt-")) {
      if (!fs::is_regular_file(entry.path() / "COMPLETE")) {
        names.push_back(name);
      }
    } else if (!absl::StartsWith(name, ".tmp-ckpt-") ||
               FailedUpdate(name) <= up_to) {
      names.push_back(name);
    }
  }
  return names;
}

// The lines of `text` that contain `needle`.
std::vector<std::string> Lines(const std::string& text,
                               absl::string_view needle) {
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StrContains(line, needle)) out.emplace_back(line);
  }
  return out;
}

int64_t FreeBytes(const std::string& dir) {
  struct statvfs s {};
  if (statvfs(dir.c_str(), &s) != 0) return -1;
  return static_cast<int64_t>(s.f_bavail) * s.f_frsize;
}

int64_t SizeBytes(const std::string& dir) {
  struct statvfs s {};
  if (statvfs(dir.c_str(), &s) != 0) return -1;
  return static_cast<int64_t>(s.f_blocks) * s.f_frsize;
}

class DiskFullTest : public EmbeddedCoordinatorTest {
 protected:
  void SetUp() override {
    EmbeddedCoordinatorTest::SetUp();
    ASSERT_EQ(geteuid(), 0)
        << "disk_full_test needs root: it mounts a tmpfs as the run "
           "directory (CI runs as root; run it with sudo or as root)";
    runs_ = Path("runs");
    std::error_code ec;
    fs::create_directories(runs_, ec);
    ASSERT_FALSE(ec) << "cannot make " << runs_ << ": " << ec.message();
    ASSERT_EQ(mount("tmpfs", runs_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV,
                    kTmpfsSize),
              0)
        << "mount -t tmpfs -o " << kTmpfsSize << " tmpfs " << runs_ << ": "
        << std::strerror(errno);
    mounted_ = true;
  }

  void TearDown() override {
    // The processes first (they hold files there), then the mount, even
    // after a failure.
    EmbeddedCoordinatorTest::TearDown();
    if (filler_fd_ >= 0) close(filler_fd_);
    if (HasFailure()) {
      std::fprintf(stderr, "==== %s ====\n%s\n", LearnerLog().c_str(),
                   ReadTestFile(LearnerLog()).c_str());
      std::fprintf(stderr, "==== %s ====\n%s\n", TelemetryLog().c_str(),
                   ReadTestFile(TelemetryLog()).c_str());
    }
    if (mounted_ && umount2(runs_.c_str(), MNT_DETACH) != 0) {
      ADD_FAILURE() << "umount -l " << runs_ << ": " << std::strerror(errno);
    }
  }

  std::string LearnerLog() const { return Path("logs/local-learner-0.log"); }
  std::string TelemetryLog() const { return Path("logs/local-telemetry.log"); }

  // Appends zeros to the filler until a write fails; that write's errno.
  int TopUp() {
    static const std::string zeros(64 << 10, '\0');
    for (;;) {
      const ssize_t n = write(filler_fd_, zeros.data(), zeros.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return n < 0 ? errno : ENOSPC;
      filler_bytes_ += n;
    }
  }

  std::string runs_;
  bool mounted_ = false;
  int filler_fd_ = -1;
  int64_t filler_bytes_ = 0;
};

TEST_F(DiskFullTest, CheckpointsFailClearlyKeepThePreviousAndResume) {
  const absl::Time t0 = absl::Now();
  auto elapsed = [&] { return absl::ToDoubleSeconds(absl::Now() - t0); };
  StartCoordinator("learners=1,actors=2");
  const rl::Run submitted = Submit(DiskFullRun(), "disk-full");
  const std::string id = submitted.run_id();
  ASSERT_FALSE(id.empty());
  const std::string root = runs_ + "/" + id + "/checkpoints";

  // 1. A first checkpoint.
  absl::StatusOr<std::string> first;
  ASSERT_TRUE(WaitFor(
      [&] {
        first = LatestCheckpoint(root);
        return first.ok();
      },
      absl::Seconds(300), absl::Milliseconds(50)))
      << "no checkpoint under " << root << " after 300 s; run "
      << RunState_Name(Get(id).state());
  const std::map<std::string, std::string> first_files = ReadDir(*first);
  const double first_at = elapsed();
  const int64_t checkpoint_bytes = Bytes(first_files);
  const int64_t used_before_fill = SizeBytes(runs_) - FreeBytes(runs_);
  ASSERT_EQ(Get(id).state(), RUNNING);

  // 2. Fill the disk: zeros in 64 KiB writes until ENOSPC. The filler stays
  // open and is topped up at every poll until the space is given back, so
  // space that others free meanwhile (a SQLite journal shrinking) is taken
  // again and every checkpoint attempt meets a full disk.
  const std::string filler = runs_ + "/filler";
  filler_fd_ = open(filler.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(filler_fd_, 0) << "create " << filler << ": "
                           << std::strerror(errno);
  {
    const int error = TopUp();
    ASSERT_EQ(error, ENOSPC)
        << "filling " << filler << ": " << std::strerror(error);
  }
  const double filled_at = elapsed();
  const int64_t free_when_full = FreeBytes(runs_);
  EXPECT_LT(free_when_full, checkpoint_bytes)
      << "the tmpfs still has room for a checkpoint";

  // 3. The first failed checkpoint, a clear error in the learner's log.
  std::vector<std::string> failures;
  ASSERT_TRUE(WaitFor(
                  [&] {
                    TopUp();
                    failures = Lines(ReadTestFile(LearnerLog()),
                                     "checkpoint failed (");
                    return !failures.empty() || Get(id).state() != RUNNING;
                  },
                  absl::Seconds(180), absl::Milliseconds(20)) &&
              !failures.empty())
      << "no failed checkpoint in " << LearnerLog()
      << " within 180 s of filling the disk; run "
      << RunState_Name(Get(id).state());
  const double first_failure_at = elapsed();
  // The learner writes its checkpoints one after another: with one failed,
  // the latest complete checkpoint now is the one the full disk must keep.
  absl::StatusOr<std::string> kept = LatestCheckpoint(root);
  ASSERT_TRUE(kept.ok()) << kept.status();
  const std::map<std::string, std::string> kept_files = ReadDir(*kept);
  EXPECT_GE(*kept, *first);
  if (*kept == *first) {
    EXPECT_TRUE(kept_files == first_files) << *kept << " changed";
  }
  const std::string error = failures.front();
  EXPECT_TRUE(absl::StrContains(
      error, absl::StrCat("checkpoint failed (1 in a row; the run fails at ",
                          kMaxCheckpointFailures,
                          "), training goes on and the next interval tries "
                          "again")))
      << error;
  EXPECT_TRUE(absl::StrContains(error, "RESOURCE_EXHAUSTED")) << error;
  EXPECT_TRUE(absl::StrContains(error, "No space left on device")) << error;
  EXPECT_TRUE(absl::StrContains(error, root)) << error;

  // 4. The second: training went on in between; the kept checkpoint is
  // still the latest, whole and unchanged, with nothing half-written.
  ASSERT_TRUE(WaitFor(
                  [&] {
                    TopUp();
                    failures = Lines(ReadTestFile(LearnerLog()),
                                     "checkpoint failed (");
                    return failures.size() >= 2 || Get(id).state() != RUNNING;
                  },
                  absl::Seconds(180), absl::Milliseconds(20)) &&
              failures.size() >= 2)
      << "no second failed checkpoint within 180 s; run "
      << RunState_Name(Get(id).state());
  const double second_failure_at = elapsed();
  const absl::StatusOr<std::string> latest_when_full = LatestCheckpoint(root);
  const std::map<std::string, std::string> kept_files_later = ReadDir(*kept);
  const std::vector<std::string> leftovers_when_full =
      Leftovers(root, FailedUpdate(failures[1]));
  const rl::Run during = Get(id);
  // 5. Space returns.
  ASSERT_EQ(unlink(filler.c_str()), 0) << std::strerror(errno);
  close(filler_fd_);
  filler_fd_ = -1;
  const double freed_at = elapsed();
  const int64_t failures_when_freed = static_cast<int64_t>(failures.size());

  EXPECT_TRUE(absl::StrContains(failures[1], "(2 in a row;")) << failures[1];
  EXPECT_EQ(during.state(), RUNNING) << during.failure_reason();
  // The failed attempts are at later and later updates: training goes on.
  const int64_t first_failed_update = FailedUpdate(failures[0]);
  const int64_t second_failed_update = FailedUpdate(failures[1]);
  EXPECT_GT(first_failed_update, 0) << failures[0];
  EXPECT_EQ(second_failed_update,
            first_failed_update + during.spec().checkpoint_interval())
      << failures[1];
  ASSERT_TRUE(latest_when_full.ok()) << latest_when_full.status();
  EXPECT_EQ(*latest_when_full, *kept);
  EXPECT_TRUE(kept_files_later == kept_files)
      << *kept << " changed while the disk was full";
  EXPECT_TRUE(kept_files.count("COMPLETE") && kept_files.count("policy.pt") &&
              kept_files.count("optimizer.pt") && kept_files.count("state.pt"))
      << *kept << " is not whole";
  EXPECT_TRUE(leftovers_when_full.empty())
      << "left in " << root << ": " << absl::StrJoin(leftovers_when_full, ", ");
  {
    // Loaded from a copy of its bytes: later checkpoints may prune it.
    const std::string copy = Path("kept-checkpoint");
    fs::create_directories(copy);
    for (const auto& [name, bytes] : kept_files) {
      std::ofstream(copy + "/" + name, std::ios::binary) << bytes;
    }
    const absl::Status read = ReadRunPolicy(during.spec(), copy).status();
    EXPECT_TRUE(read.ok()) << *kept << " does not load: " << read;
  }

  // 6. The learner recovers at its next interval, and the run ends well.
  std::vector<std::string> recovered;
  ASSERT_TRUE(WaitFor(
                  [&] {
                    recovered =
                        Lines(ReadTestFile(LearnerLog()), "failed attempts");
                    return !recovered.empty() || Get(id).state() != RUNNING;
                  },
                  absl::Seconds(180), absl::Milliseconds(50)) &&
              !recovered.empty())
      << "no checkpoint written after the space returned; run "
      << RunState_Name(Get(id).state()) << ": " << Get(id).failure_reason();
  const double recovered_at = elapsed();
  const rl::Run done = WaitForEnd(id, absl::Seconds(600));
  const double ended_at = elapsed();
  failures = Lines(ReadTestFile(LearnerLog()), "checkpoint failed (");
  EXPECT_TRUE(absl::StrContains(
      recovered.front(),
      absl::StrCat("written after ", failures.size(), " failed attempts")))
      << recovered.front();
  EXPECT_LT(failures.size(), kMaxCheckpointFailures);
  ASSERT_EQ(done.state(), SUCCEEDED) << done.failure_reason();
  EXPECT_GE(done.progress().env_steps(), kSteps);
  const absl::StatusOr<std::string> last = LatestCheckpoint(root);
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_GT(*last, *kept);
  const absl::Status last_read = ReadRunPolicy(done.spec(), *last).status();
  EXPECT_TRUE(last_read.ok()) << *last << " does not load: " << last_read;
  EXPECT_TRUE(Leftovers(root).empty())
      << "left in " << root << ": " << absl::StrJoin(Leftovers(root), ", ");
  const std::vector<std::string> checkpoints_at_end = [&] {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(root, ec)) {
      names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }();

  // Nothing crashed on the full disk.
  const std::string coordinator_log = CoordinatorLog();
  const std::vector<std::string> restarts =
      Lines(coordinator_log, " exited with ");
  EXPECT_TRUE(restarts.empty())
      << "processes exited on the full disk: " << absl::StrJoin(restarts, "\n");
  ASSERT_EQ(StopCoordinator(SIGTERM), std::optional<int>(0));

  // telemetry.db, on the same disk, opens and holds the learner's count.
  double telemetry_failures = -1;
  int64_t telemetry_points = 0;
  {
    absl::StatusOr<std::unique_ptr<MetricStore>> metrics =
        MetricStore::Open(runs_ + "/telemetry.db");
    ASSERT_TRUE(metrics.ok()) << metrics.status();
    QueryRequest query;
    query.set_run_id(id);
    query.add_names("learner/checkpoint_failures");
    absl::StatusOr<QueryResponse> stored = (*metrics)->Query(query);
    ASSERT_TRUE(stored.ok()) << stored.status();
    for (const Series& series : stored->series()) {
      for (const MetricPoint& point : series.points()) {
        telemetry_failures = std::max(telemetry_failures, point.value());
        ++telemetry_points;
      }
    }
  }
  EXPECT_EQ(telemetry_failures, static_cast<double>(failures.size()));

  std::printf("\ndisk full figures\n");
  std::printf("  tmpfs                 %s, %lld bytes used before the fill\n",
              kTmpfsSize, static_cast<long long>(used_before_fill));
  std::printf("  checkpoint            %lld bytes (%s)\n",
              static_cast<long long>(checkpoint_bytes), first->c_str());
  std::printf("  filler                %lld bytes, then ENOSPC (%lld free)\n",
              static_cast<long long>(filler_bytes_),
              static_cast<long long>(free_when_full));
  std::printf("  kept checkpoint       %s (intact, loads)\n",
              fs::path(*kept).filename().c_str());
  std::printf(
      "  checkpoint failures   %lld while full (freed at the 2nd), %zu in "
      "all; telemetry says %.0f (%lld points)\n",
      static_cast<long long>(failures_when_freed), failures.size(),
      telemetry_failures, static_cast<long long>(telemetry_points));
  std::printf(
      "  telemetry store       %zu \"disk is full\" errors logged, "
      "survived\n",
      Lines(ReadTestFile(TelemetryLog()), "disk is full").size());
  std::printf("  first error           %s\n", error.c_str());
  std::printf("  recovery              %s\n", recovered.front().c_str());
  std::printf("  failed at updates     %lld and %lld (while full)\n",
              static_cast<long long>(first_failed_update),
              static_cast<long long>(second_failed_update));
  std::printf("  checkpoints at end    %s (latest loads)\n",
              absl::StrJoin(checkpoints_at_end, " ").c_str());
  std::printf("  run                   %s, %lld of %lld env steps\n",
              RunState_Name(done.state()).c_str(),
              static_cast<long long>(done.progress().env_steps()),
              static_cast<long long>(kSteps));
  std::printf(
      "  timeline (s)          1st checkpoint %.1f, filled %.1f, 1st failure "
      "%.1f, 2nd failure %.1f, freed %.1f, recovered %.1f, ended %.1f\n",
      first_at, filled_at, first_failure_at, second_failure_at, freed_at,
      recovered_at, ended_at);
  std::fflush(stdout);
}

}  // namespace
}  // namespace rl
