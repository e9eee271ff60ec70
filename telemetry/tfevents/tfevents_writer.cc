#include "telemetry/tfevents/tfevents_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status.h"
#include "telemetry/tfevents/event.pb.h"
#include "telemetry/tfevents/tfrecord.h"

namespace rl {
namespace {

constexpr char kFileVersion[] = "brain.Event:2";

// Tries names until one does not exist yet; O_EXCL makes "does not exist"
// and "create" one step, so two writers never share a file.
constexpr int kMaxNameAttempts = 1000;

// Buffered bytes that trigger a write without Flush: large enough that a
// training loop's scalars cost few syscalls, small enough to bound memory.
constexpr size_t kWriteThreshold = 64 << 10;

std::string Hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') {
    return "localhost";
  }
  return name;
}

absl::StatusOr<std::pair<std::string, int>> CreateEventFile(
    const std::string& dir, int64_t unix_seconds) {
  const std::string stem = (std::filesystem::path(dir) /
                            absl::StrCat("events.out.tfevents.", unix_seconds,
                                         ".", Hostname(), ".", getpid()))
                               .string();
  for (int n = 0; n < kMaxNameAttempts; ++n) {
    std::string path = n == 0 ? stem : absl::StrCat(stem, ".", n);
    const int fd =
        open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) return std::make_pair(std::move(path), fd);
    if (errno != EEXIST) {
      return absl::ErrnoToStatus(errno, absl::StrCat("cannot create ", path));
    }
  }
  return absl::AlreadyExistsError(
      absl::StrCat("cannot create an event file: ", stem, " and ",
                   kMaxNameAttempts - 1, " suffixed names exist"));
}

// Writes all of `data`, retrying short writes and EINTR.
absl::Status WriteAll(int fd, absl::string_view data, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, absl::StrCat("write ", path));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<TfEventsWriter>> TfEventsWriter::Create(
    const std::string& dir) {
  if (dir.empty()) {
    return absl::InvalidArgumentError("event file directory is empty");
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::ErrnoToStatus(ec.value(),
                               absl::StrCat("cannot create directory ", dir));
  }
  const absl::Time now = absl::Now();
  ASSIGN_OR_RETURN(auto created,
                   CreateEventFile(dir, absl::ToUnixSeconds(now)));
  std::unique_ptr<TfEventsWriter> writer(
      new TfEventsWriter(std::move(created.first), created.second));
  tensorboard::Event version;
  version.set_wall_time(
      absl::FDivDuration(now - absl::UnixEpoch(), absl::Seconds(1)));
  version.set_file_version(kFileVersion);
  RETURN_IF_ERROR(writer->AppendRecord(version.SerializeAsString()));
  return writer;
}

absl::StatusOr<std::unique_ptr<TfEventsWriter>> TfEventsWriter::Reopen(
    const std::string& path) {
  // No O_CREAT: a file removed meanwhile must not come back without its
  // file-version record.
  const int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot reopen ", path));
  }
  return std::unique_ptr<TfEventsWriter>(new TfEventsWriter(path, fd));
}

TfEventsWriter::TfEventsWriter(std::string path, int fd)
    : path_(std::move(path)), fd_(fd) {}

TfEventsWriter::~TfEventsWriter() {
  Flush().IgnoreError();
  close(fd_);
}

absl::Status TfEventsWriter::AddScalar(absl::string_view tag, int64_t step,
                                       double wall_time_s, float value) {
  tensorboard::Event event;
  event.set_wall_time(wall_time_s);
  event.set_step(step);
  tensorboard::Summary::Value* summary = event.mutable_summary()->add_value();
  summary->set_tag(std::string(tag));
  summary->set_simple_value(value);
  return AppendRecord(event.SerializeAsString());
}

absl::Status TfEventsWriter::AddHParams(
    const std::map<std::string, google::protobuf::Value>& hparams,
    const std::string& group_name, double wall_time_s) {
  tensorboard::HParamsPluginData data;
  tensorboard::SessionStartInfo* start = data.mutable_session_start_info();
  for (const auto& [name, value] : hparams)
    (*start->mutable_hparams())[name] = value;
  start->set_group_name(group_name);
  start->set_start_time_secs(wall_time_s);
  tensorboard::Event event;
  event.set_wall_time(wall_time_s);
  event.set_step(0);
  tensorboard::Summary::Value* summary = event.mutable_summary()->add_value();
  summary->set_tag("_hparams_/session_start_info");
  tensorboard::SummaryMetadata::PluginData* plugin =
      summary->mutable_metadata()->mutable_plugin_data();
  plugin->set_plugin_name("hparams");
  plugin->set_content(data.SerializeAsString());
  tensorboard::TensorProto* tensor = summary->mutable_tensor();
  tensor->set_dtype(1);  // DT_FLOAT
  tensor->mutable_tensor_shape();
  tensor->add_float_val(0);
  return AppendRecord(event.SerializeAsString());
}

absl::Status TfEventsWriter::Flush() {
  RETURN_IF_ERROR(error_);
  const absl::Status written = WriteAll(fd_, buffer_, path_);
  buffer_.clear();
  if (!written.ok()) return Fail(written);
  return absl::OkStatus();
}

absl::Status TfEventsWriter::AppendRecord(absl::string_view data) {
  RETURN_IF_ERROR(error_);
  buffer_ += EncodeTfRecord(data);
  if (buffer_.size() >= kWriteThreshold) return Flush();
  return absl::OkStatus();
}

absl::Status TfEventsWriter::Fail(absl::Status error) {
  failed_at_ = absl::Now();
  error_ = absl::FailedPreconditionError(absl::StrCat(
      "event file writer stopped after an error: ", error.message()));
  return error;
}

}  // namespace rl
