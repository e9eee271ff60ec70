#include "telemetry/tfevents/tfevents_writer.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "telemetry/tfevents/tfrecord.h"

namespace rl {
namespace {

namespace fs = std::filesystem;

// A test-only reader for the protobuf wire format, enough to take apart the
// events the writer produces (without TensorFlow's protos).
struct Field {
  uint32_t number = 0;
  uint32_t wire_type = 0;
  uint64_t scalar = 0;  // varint, fixed64 or fixed32 payload
  std::string bytes;    // length-delimited payload
};

bool ReadVarint(absl::string_view* in, uint64_t* out) {
  *out = 0;
  for (int shift = 0; shift < 64 && !in->empty(); shift += 7) {
    const auto byte = static_cast<unsigned char>(in->front());
    in->remove_prefix(1);
    *out |= static_cast<uint64_t>(byte & 0x7F) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

uint64_t ReadLe(absl::string_view* in, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) {
    v |= static_cast<uint64_t>(static_cast<unsigned char>((*in)[i])) << (8 * i);
  }
  in->remove_prefix(n);
  return v;
}

std::vector<Field> ParseFields(absl::string_view in) {
  std::vector<Field> fields;
  while (!in.empty()) {
    uint64_t key;
    if (!ReadVarint(&in, &key)) {
      ADD_FAILURE() << "bad key";
      return fields;
    }
    Field f;
    f.number = static_cast<uint32_t>(key >> 3);
    f.wire_type = static_cast<uint32_t>(key & 7);
    uint64_t len = 0;
    switch (f.wire_type) {
      case 0:
        if (!ReadVarint(&in, &f.scalar)) ADD_FAILURE() << "bad varint";
        break;
      case 1:
        if (in.size() < 8) return ADD_FAILURE() << "short fixed64", fields;
        f.scalar = ReadLe(&in, 8);
        break;
      case 5:
        if (in.size() < 4) return ADD_FAILURE() << "short fixed32", fields;
        f.scalar = ReadLe(&in, 4);
        break;
      case 2:
        if (!ReadVarint(&in, &len) || len > in.size()) {
          return ADD_FAILURE() << "bad length", fields;
        }
        f.bytes = std::string(in.substr(0, len));
        in.remove_prefix(len);
        break;
      default:
        return ADD_FAILURE() << "wire type " << f.wire_type, fields;
    }
    fields.push_back(std::move(f));
  }
  return fields;
}

struct Event {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  std::vector<std::pair<std::string, float>> values;  // tag, simple_value
};

double AsDouble(uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, sizeof(d));
  return d;
}

float AsFloat(uint64_t bits) {
  const auto b32 = static_cast<uint32_t>(bits);
  float f;
  std::memcpy(&f, &b32, sizeof(f));
  return f;
}

Event ParseEvent(absl::string_view data) {
  Event event;
  for (const Field& f : ParseFields(data)) {
    if (f.number == 1 && f.wire_type == 1) {
      event.wall_time = AsDouble(f.scalar);
    } else if (f.number == 2 && f.wire_type == 0) {
      event.step = static_cast<int64_t>(f.scalar);
    } else if (f.number == 3 && f.wire_type == 2) {
      event.file_version = f.bytes;
    } else if (f.number == 5 && f.wire_type == 2) {
      for (const Field& v : ParseFields(f.bytes)) {
        EXPECT_EQ(v.number, 1u);
        std::pair<std::string, float> value;
        for (const Field& vf : ParseFields(v.bytes)) {
          if (vf.number == 1 && vf.wire_type == 2) value.first = vf.bytes;
          if (vf.number == 2 && vf.wire_type == 5) {
            value.second = AsFloat(vf.scalar);
          }
        }
        event.values.push_back(value);
      }
    } else {
      ADD_FAILURE() << "unexpected Event field " << f.number;
    }
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

  struct rlimit old_limit;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old_limit;
  small.rlim_cur = 10000;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);

  absl::Status error;
  const std::string tag(500, 't');
  for (int step = 0; step < 1000 && error.ok(); ++step) {
    error = (*writer)->AddScalar(tag, step, step, 1.0f);
    if (error.ok()) error = (*writer)->Flush();
  }
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old_limit), 0);
  std::signal(SIGXFSZ, old_handler);

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
