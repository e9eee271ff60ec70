// TensorBoard event files of many runs, at most `max_open_files` of them open
// at once, so thousands of runs cannot exhaust the process's file
// descriptors.
//
// AddScalar(dir) -> that directory's open writer, made the most recently
// used; if it has none: the least recently used writer is flushed and
// closed, then the directory's previous file is reopened for append
// (TfEventsWriter::Reopen), or a new file is created when there is none, it
// is gone, or its writer had failed. An open writer that failed is replaced
// by a new file `retry_after_error` after its error. Appending, rather than a
// new file per reopen, keeps one growing file per run and process, which
// TensorBoard reads like any file still being written.
#ifndef RL_TELEMETRY_TFEVENTS_EVENT_FILE_CACHE_H_
#define RL_TELEMETRY_TFEVENTS_EVENT_FILE_CACHE_H_

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "telemetry/tfevents/tfevents_writer.h"

namespace rl {

struct EventFileCacheOptions {
  // Files go to <root_dir>/<dir name>/.
  std::string root_dir;
  // Event files open at once, at least 1.
  int max_open_files = 64;
  // A run's writer that failed (a full disk) refuses everything after its
  // error; this long after it, the run's next point starts a new file (not
  // at once: while the disk stays full, not a new empty file a flush).
  absl::Duration retry_after_error = absl::Seconds(30);
};

// Not thread-safe: one thread (or the caller's mutex) makes every call.
class EventFileCache {
 public:
  // INVALID_ARGUMENT for an empty root_dir or max_open_files < 1.
  static absl::StatusOr<std::unique_ptr<EventFileCache>> Create(
      EventFileCacheOptions options);
  // Flushes and closes every open file.
  ~EventFileCache();

  EventFileCache(const EventFileCache&) = delete;
  EventFileCache& operator=(const EventFileCache&) = delete;

  // Buffers one scalar in the event file of <root_dir>/<dir_name>/. An error
  // opening the file (nothing is kept open then) or from its writer.
  absl::Status AddScalar(const std::string& dir_name, absl::string_view tag,
                         int64_t step, double wall_time_s, float value);

  // Buffers a run's hyperparameters (TfEventsWriter::AddHParams) in the
  // event file of <root_dir>/<dir_name>/.
  absl::Status AddHParams(
      const std::string& dir_name,
      const std::map<std::string, google::protobuf::Value>& hparams,
      const std::string& group_name, double wall_time_s);

  // Pushes every open file's buffered records to the OS; the first error,
  // after trying them all (or from a file closed since the last Flush).
  absl::Status Flush();

  int open_files() const { return static_cast<int>(open_.size()); }
  // Files closed to make room for another (each is reopened when its run
  // gets points again).
  int64_t evictions() const { return evictions_; }
  // Writers that had failed and were replaced by a new file.
  int64_t replaced_after_error() const { return replaced_after_error_; }

 private:
  explicit EventFileCache(EventFileCacheOptions options);

  // The open writer of `dir_name`, opening it (after closing the least
  // recently used one if the cache is full).
  absl::StatusOr<TfEventsWriter*> Writer(const std::string& dir_name);
  void EvictLeastRecentlyUsed();

  struct OpenFile {
    std::unique_ptr<TfEventsWriter> writer;
    std::list<std::string>::iterator recency;  // into recency_
  };

  const EventFileCacheOptions options_;
  // Directory names of open files, most recently used first.
  std::list<std::string> recency_;
  absl::flat_hash_map<std::string, OpenFile> open_;
  // Directory name -> its last file, closed without error (appended to when
  // the directory gets points again). A short path per run ever written.
  absl::flat_hash_map<std::string, std::string> closed_;
  int64_t evictions_ = 0;
  int64_t replaced_after_error_ = 0;
  // From flushing a file as it was closed; reported by the next Flush.
  absl::Status eviction_error_;
};

}  // namespace rl

#endif  // RL_TELEMETRY_TFEVENTS_EVENT_FILE_CACHE_H_
