#include "telemetry/tfevents/event_file_cache.h"

#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status.h"

namespace rl {

absl::StatusOr<std::unique_ptr<EventFileCache>> EventFileCache::Create(
    EventFileCacheOptions options) {
  if (options.root_dir.empty()) {
    return absl::InvalidArgumentError("event file cache: root_dir is empty");
  }
  if (options.max_open_files < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("event file cache: max_open_files is ",
                     options.max_open_files, ", at least 1"));
  }
  return std::unique_ptr<EventFileCache>(
      new EventFileCache(std::move(options)));
}

EventFileCache::EventFileCache(EventFileCacheOptions options)
    : options_(std::move(options)) {}

EventFileCache::~EventFileCache() = default;  // writers flush as they close

absl::Status EventFileCache::AddScalar(const std::string& dir_name,
                                       absl::string_view tag, int64_t step,
                                       double wall_time_s, float value) {
  ASSIGN_OR_RETURN(TfEventsWriter * writer, Writer(dir_name));
  return writer->AddScalar(tag, step, wall_time_s, value);
}

absl::Status EventFileCache::AddHParams(
    const std::string& dir_name,
    const std::map<std::string, google::protobuf::Value>& hparams,
    const std::string& group_name, double wall_time_s) {
  ASSIGN_OR_RETURN(TfEventsWriter * writer, Writer(dir_name));
  return writer->AddHParams(hparams, group_name, wall_time_s);
}

absl::Status EventFileCache::Flush() {
  absl::Status first = std::move(eviction_error_);
  eviction_error_ = absl::OkStatus();
  for (auto& [dir, file] : open_) first.Update(file.writer->Flush());
  return first;
}

absl::StatusOr<TfEventsWriter*> EventFileCache::Writer(
    const std::string& dir_name) {
  if (auto it = open_.find(dir_name); it != open_.end()) {
    if (absl::Now() - it->second.writer->failed_at() <
        options_.retry_after_error) {
      // Working (failed_at is in the future), or failed a moment ago: its
      // calls return the error.
      recency_.splice(recency_.begin(), recency_, it->second.recency);
      return it->second.writer.get();
    }
    // Failed a while ago: a new file after it (its last record may be
    // partial, and readers stop there).
    recency_.erase(it->second.recency);
    open_.erase(it);
    ++replaced_after_error_;
  }
  // Close one first, so the open count never passes the bound.
  if (static_cast<int>(open_.size()) >= options_.max_open_files) {
    EvictLeastRecentlyUsed();
  }
  std::unique_ptr<TfEventsWriter> writer;
  if (auto it = closed_.find(dir_name); it != closed_.end()) {
    absl::StatusOr<std::unique_ptr<TfEventsWriter>> reopened =
        TfEventsWriter::Reopen(it->second);
    // Gone (or unreadable): a new file below.
    if (reopened.ok()) writer = *std::move(reopened);
    closed_.erase(it);
  }
  if (writer == nullptr) {
    ASSIGN_OR_RETURN(
        writer,
        TfEventsWriter::Create(
            (std::filesystem::path(options_.root_dir) / dir_name).string()));
  }
  recency_.push_front(dir_name);
  TfEventsWriter* raw = writer.get();
  open_[dir_name] = {std::move(writer), recency_.begin()};
  return raw;
}

void EventFileCache::EvictLeastRecentlyUsed() {
  const std::string dir_name = std::move(recency_.back());
  recency_.pop_back();
  auto it = open_.find(dir_name);
  // A writer that failed may end in a partial record: never append to it.
  if (absl::Status flushed = it->second.writer->Flush(); flushed.ok()) {
    closed_[dir_name] = it->second.writer->path();
  } else {
    eviction_error_.Update(flushed);
  }
  open_.erase(it);
  ++evictions_;
}

}  // namespace rl
