// A TensorBoard event file (`events.out.tfevents.*`) for scalar summaries.
//
// AddScalar -> tensorflow.Event (event.proto) -> TFRecord frame -> in-memory
// buffer -> write(2) when the buffer passes 64 KiB or on Flush -> OS page
// cache (no fsync). The first record is the file-version event.
#ifndef RL_TELEMETRY_TFEVENTS_TFEVENTS_WRITER_H_
#define RL_TELEMETRY_TFEVENTS_TFEVENTS_WRITER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "google/protobuf/struct.pb.h"

namespace rl {

// Not thread-safe: the caller serializes all calls on one writer (e.g. one
// writer per run, used from one thread or under the caller's mutex).
//
// A failed write may leave a partial record at the end of the file, and
// readers stop there, so after the first write error (returned with its errno
// code) every later AddScalar/Flush returns FAILED_PRECONDITION with that
// error's message instead of writing after it.
class TfEventsWriter {
 public:
  // Creates `dir` (and its parents) if needed and a new file in it named
  // events.out.tfevents.<unix seconds>.<hostname>.<pid>, with a ".<n>" suffix
  // when that name is taken (two writers in one second in one process).
  // Writes the file-version record (not yet flushed).
  static absl::StatusOr<std::unique_ptr<TfEventsWriter>> Create(
      const std::string& dir);

  // Appends to an event file that an earlier writer created and closed
  // without error (its file-version record is already there, so none is
  // written). For a file whose writer failed this would append after a
  // partial record, which readers never get past: use Create instead.
  // NOT_FOUND if the file is gone.
  static absl::StatusOr<std::unique_ptr<TfEventsWriter>> Reopen(
      const std::string& path);

  // Flushes (unless a write failed) and closes the file.
  ~TfEventsWriter();

  TfEventsWriter(const TfEventsWriter&) = delete;
  TfEventsWriter& operator=(const TfEventsWriter&) = delete;

  // Buffers one scalar event. NaN and infinities are written as they are
  // (TensorBoard shows them).
  absl::Status AddScalar(absl::string_view tag, int64_t step,
                         double wall_time_s, float value);

  // Buffers the HParams plugin's session_start_info of this run (tag
  // "_hparams_/session_start_info", step 0): its hyperparameters (JSON
  // scalars: number, string or bool) and `group_name` (the configuration
  // its seeds share); TensorBoard's HParams dashboard lists the run with
  // them beside its scalars.
  absl::Status AddHParams(
      const std::map<std::string, google::protobuf::Value>& hparams,
      const std::string& group_name, double wall_time_s);

  // Pushes buffered records to the OS (write(2), no fsync), so a reader sees
  // them.
  absl::Status Flush();

  const std::string& path() const { return path_; }
  // When the first write failed (the writer refuses everything since);
  // InfiniteFuture while none has.
  absl::Time failed_at() const { return failed_at_; }

 private:
  TfEventsWriter(std::string path, int fd);

  absl::Status AppendRecord(absl::string_view data);
  // Records `error` as the writer's sticky error and returns it.
  absl::Status Fail(absl::Status error);

  const std::string path_;
  const int fd_;
  // Whole records not yet written; after a failed write it is dropped, never
  // retried, so the file holds no bytes after the first error.
  std::string buffer_;
  absl::Status error_;
  absl::Time failed_at_ = absl::InfiniteFuture();
};

}  // namespace rl

#endif  // RL_TELEMETRY_TFEVENTS_TFEVENTS_WRITER_H_
