#include "telemetry/tfevents/tfevents_writer.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "telemetry/tfevents/event.pb.h"
#include "telemetry/tfevents/tfrecord.h"
#include "testing/file_size_limit.h"

namespace rl {
namespace {

namespace fs = std::filesystem;

struct Event {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  std::vector<std::pair<std::string, float>> values;  // tag, simple_value
};

Event ParseEvent(const std::string& data) {
  tensorboard::Event proto;
  EXPECT_TRUE(proto.ParseFromString(data));
  Event event;
  event.wall_time = proto.wall_time();
  event.step = proto.step();
  event.file_version = proto.file_version();
  for (const tensorboard::Summary::Value& v : proto.summary().value()) {
    EXPECT_TRUE(v.has_simple_value()) << v.tag();
    event.values.emplace_back(v.tag(), v.simple_value());
  }
  return event;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> ReadRecords(const std::string& path) {
  auto records = DecodeTfRecords(ReadFile(path));
  EXPECT_TRUE(records.ok()) << records.status();
  return records.ok() ? *records : std::vector<std::string>{};
}

std::string TestDir() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const auto* info = testing::UnitTest::GetInstance()->current_test_info();
  const fs::path dir = fs::path(tmp != nullptr ? tmp : "/tmp") /
                       "tfevents_writer_test" /
                       absl::StrCat(info->name(), "-", getpid());
  fs::remove_all(dir);
  return dir.string();
}

std::string Hostname() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof(a)) == 0; }

// event.proto has TensorFlow's field numbers: golden bytes from
// TensorBoard's own event_pb2.Event.SerializeToString().
TEST(EventProtoTest, BytesMatchTensorBoardProtos) {
  tensorboard::Event version;
  version.set_wall_time(1700000000.25);
  version.set_file_version("brain.Event:2");
  EXPECT_EQ(absl::BytesToHexString(version.SerializeAsString()),
            "0900001040fc54d9411a0d627261696e2e4576656e743a32");

  tensorboard::Event scalar;
  scalar.set_wall_time(1700000000.5);
  scalar.set_step(42);
  tensorboard::Summary::Value* value = scalar.mutable_summary()->add_value();
  value->set_tag("loss/policy");
  value->set_simple_value(0.1f);
  EXPECT_EQ(
      absl::BytesToHexString(scalar.SerializeAsString()),
      "0900002040fc54d941102a2a140a120a0b6c6f73732f706f6c69637915cdcccc3d");

  // A negative step is a ten-byte varint.
  scalar.set_wall_time(1.0);
  scalar.set_step(-3);
  value->set_tag("x");
  value->set_simple_value(-std::numeric_limits<float>::infinity());
  EXPECT_EQ(absl::BytesToHexString(scalar.SerializeAsString()),
            "09000000000000f03f10fdffffffffffffffff012a0a0a080a017815000080ff");
}

TEST(TfEventsWriterTest, WritesFileVersionThenScalars) {
  const std::string dir = TestDir() + "/nested/run";  // created recursively
  const double before =
      absl::FDivDuration(absl::Now() - absl::UnixEpoch(), absl::Seconds(1));
  auto writer = TfEventsWriter::Create(dir);
  ASSERT_TRUE(writer.ok()) << writer.status();
  const double after =
      absl::FDivDuration(absl::Now() - absl::UnixEpoch(), absl::Seconds(1));

  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<Event> scalars = {
      {1700000000.125, 0, "", {{"loss/policy", 0.1f}}},
      {1700000001.5, 1, "", {{"loss/policy", std::nanf("")}}},
      {1700000002.0, -5, "", {{"reward", -inf}}},
      {1700000003.0, int64_t{1} << 40, "", {{"reward", inf}}},
  };
  for (const Event& e : scalars) {
    ASSERT_TRUE((*writer)
                    ->AddScalar(e.values[0].first, e.step, e.wall_time,
                                e.values[0].second)
                    .ok());
  }
  ASSERT_TRUE((*writer)->Flush().ok());

  const std::string path = (*writer)->path();
  EXPECT_EQ(fs::path(path).parent_path(), fs::path(dir));
  // Records are visible after Flush, before the writer closes the file.
  const std::vector<std::string> records = ReadRecords(path);
  ASSERT_EQ(records.size(), 1 + scalars.size());

  const Event version = ParseEvent(records[0]);
  EXPECT_EQ(version.file_version, "brain.Event:2");
  EXPECT_GE(version.wall_time, before - 1e-3);
  EXPECT_LE(version.wall_time, after + 1e-3);
  EXPECT_TRUE(version.values.empty());

  for (size_t i = 0; i < scalars.size(); ++i) {
    const Event got = ParseEvent(records[i + 1]);
    EXPECT_EQ(got.file_version, "");
    EXPECT_EQ(got.wall_time, scalars[i].wall_time) << i;
    EXPECT_EQ(got.step, scalars[i].step) << i;
    ASSERT_EQ(got.values.size(), 1u) << i;
    EXPECT_EQ(got.values[0].first, scalars[i].values[0].first);
    EXPECT_TRUE(SameBits(got.values[0].second, scalars[i].values[0].second))
        << i << ": " << got.values[0].second;
  }
}

TEST(TfEventsWriterTest, FileNameIsTensorBoardStyle) {
  const std::string dir = TestDir();
  const int64_t before = absl::ToUnixSeconds(absl::Now());
  auto writer = TfEventsWriter::Create(dir);
  ASSERT_TRUE(writer.ok()) << writer.status();
  const int64_t after = absl::ToUnixSeconds(absl::Now());
  const std::string name = fs::path((*writer)->path()).filename().string();
  bool matched = false;
  for (int64_t t = before; t <= after; ++t) {
    matched |= name == absl::StrCat("events.out.tfevents.", t, ".", Hostname(),
                                    ".", getpid());
  }
  EXPECT_TRUE(matched) << name;
}

TEST(TfEventsWriterTest, TakenNameGetsCounterSuffix) {
  const std::string dir = TestDir();
  fs::create_directories(dir);
  // Occupy the names for the seconds around now, so Create must pick a
  // suffixed one whichever second it sees.
  const int64_t now = absl::ToUnixSeconds(absl::Now());
  for (int64_t t = now - 1; t <= now + 3; ++t) {
    std::ofstream(fs::path(dir) / absl::StrCat("events.out.tfevents.", t, ".",
                                               Hostname(), ".", getpid()));
  }
  auto first = TfEventsWriter::Create(dir);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = TfEventsWriter::Create(dir);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_NE((*first)->path(), (*second)->path());
  EXPECT_EQ((*first)->path().substr((*first)->path().size() - 2), ".1");
  EXPECT_EQ((*second)->path().substr((*second)->path().size() - 2), ".2");
  ASSERT_TRUE((*first)->AddScalar("a", 1, 1.0, 1.0f).ok());
  ASSERT_TRUE((*second)->AddScalar("b", 2, 2.0, 2.0f).ok());
  first->reset();
  second->reset();
  // Each file holds its own writer's records; the placeholders are untouched.
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string path = entry.path().string();
    const std::vector<std::string> records = ReadRecords(path);
    if (records.empty()) {
      EXPECT_EQ(fs::file_size(path), 0u) << path;
      continue;
    }
    ASSERT_EQ(records.size(), 2u) << path;
    const Event e = ParseEvent(records[1]);
    ASSERT_EQ(e.values.size(), 1u);
    EXPECT_EQ(e.values[0].first, path.back() == '1' ? "a" : "b") << path;
  }
}

TEST(TfEventsWriterTest, ManyWritersInOneSecondGetDistinctFiles) {
  const std::string dir = TestDir();
  std::vector<std::unique_ptr<TfEventsWriter>> writers;
  for (int i = 0; i < 5; ++i) {
    auto w = TfEventsWriter::Create(dir);
    ASSERT_TRUE(w.ok()) << w.status();
    writers.push_back(*std::move(w));
  }
  for (size_t i = 0; i < writers.size(); ++i) {
    for (size_t j = i + 1; j < writers.size(); ++j) {
      EXPECT_NE(writers[i]->path(), writers[j]->path());
    }
  }
}

TEST(TfEventsWriterTest, DestructorFlushes) {
  const std::string dir = TestDir();
  std::string path;
  {
    auto writer = TfEventsWriter::Create(dir);
    ASSERT_TRUE(writer.ok()) << writer.status();
    path = (*writer)->path();
    for (int step = 0; step < 100; ++step) {
      ASSERT_TRUE((*writer)->AddScalar("x", step, step, 0.5f * step).ok());
    }
  }
  const std::vector<std::string> records = ReadRecords(path);
  ASSERT_EQ(records.size(), 101u);
  EXPECT_EQ(ParseEvent(records[100]).step, 99);
}

// A closed file reopened for append: one file-version record, then every
// scalar of both writers in order.
TEST(TfEventsWriterTest, ReopenAppendsWithoutASecondFileVersion) {
  const std::string dir = TestDir();
  std::string path;
  {
    auto writer = TfEventsWriter::Create(dir);
    ASSERT_TRUE(writer.ok()) << writer.status();
    path = (*writer)->path();
    ASSERT_TRUE((*writer)->AddScalar("x", 1, 1.0, 1.0f).ok());
  }
  {
    auto writer = TfEventsWriter::Reopen(path);
    ASSERT_TRUE(writer.ok()) << writer.status();
    EXPECT_EQ((*writer)->path(), path);
    ASSERT_TRUE((*writer)->AddScalar("x", 2, 2.0, 2.0f).ok());
    ASSERT_TRUE((*writer)->AddScalar("y", 3, 3.0, 3.0f).ok());
  }
  const std::vector<std::string> records = ReadRecords(path);
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(ParseEvent(records[0]).file_version, "brain.Event:2");
  for (int i = 1; i < 4; ++i) {
    const Event e = ParseEvent(records[i]);
    EXPECT_EQ(e.file_version, "");
    EXPECT_EQ(e.step, i);
  }
  EXPECT_EQ(
      std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 1);

  fs::remove(path);
  EXPECT_EQ(TfEventsWriter::Reopen(path).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_FALSE(fs::exists(path));
}

TEST(TfEventsWriterTest, DirectoryThatCannotBeCreatedNamesThePath) {
  const std::string dir = TestDir();
  fs::create_directories(dir);
  const std::string file = dir + "/a_file";
  std::ofstream(file) << "x";
  auto writer = TfEventsWriter::Create(file + "/sub");
  ASSERT_FALSE(writer.ok());
  EXPECT_NE(writer.status().message().find(file + "/sub"),
            absl::string_view::npos)
      << writer.status();

  EXPECT_EQ(TfEventsWriter::Create("").status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A full disk, simulated with RLIMIT_FSIZE: the write error names the file,
// and the writer refuses further records rather than appending after a
// partial one.
TEST(TfEventsWriterTest, WriteErrorIsReportedAndSticky) {
  const std::string dir = TestDir();
  auto writer = TfEventsWriter::Create(dir);
  ASSERT_TRUE(writer.ok()) << writer.status();
  const std::string path = (*writer)->path();
  ASSERT_TRUE((*writer)->Flush().ok());

  absl::Status error;
  {
    const FileSizeLimit full_disk(10000);
    const std::string tag(500, 't');
    for (int step = 0; step < 1000 && error.ok(); ++step) {
      error = (*writer)->AddScalar(tag, step, step, 1.0f);
      if (error.ok()) error = (*writer)->Flush();
    }
  }

  ASSERT_FALSE(error.ok()) << "no write error under a 10000-byte limit";
  EXPECT_NE(error.message().find(path), absl::string_view::npos) << error;
  const absl::Status later = (*writer)->AddScalar("x", 1, 1.0, 1.0f);
  EXPECT_EQ(later.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(later.message().find(path), absl::string_view::npos) << later;
  EXPECT_EQ((*writer)->Flush().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_LE(fs::file_size(path), 10000u);
}

}  // namespace
}  // namespace rl
