// The metric store's tables and their migrations from older stores,
// opening a store, and the catalog loaded from its tables. Writes are
// metric_store.cc, reads metric_store_query.cc.
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/sqlite_util.h"
#include "common/status.h"
#include "telemetry/metric_store.h"
#include "telemetry/metric_store_catalog.h"
#include "telemetry/metric_store_write.h"
#include "telemetry/stream_ledger.h"

namespace rl {
namespace {

constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS series (
  id INTEGER PRIMARY KEY,
  run_id TEXT NOT NULL,
  name TEXT NOT NULL,
  labels TEXT NOT NULL,
  num_points INTEGER NOT NULL DEFAULT 0,
  last_step INTEGER NOT NULL DEFAULT 0,
  last_wall_ns INTEGER NOT NULL DEFAULT 0,
  UNIQUE (run_id, name, labels)
);
CREATE TABLE IF NOT EXISTS chunks (
  id INTEGER PRIMARY KEY,
  series_id INTEGER NOT NULL,
  min_step INTEGER NOT NULL,
  max_step INTEGER NOT NULL,
  count INTEGER NOT NULL,
  data BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_by_series ON chunks (series_id, min_step);
CREATE TABLE IF NOT EXISTS streams (
  source TEXT NOT NULL,
  incarnation INTEGER NOT NULL,
  run_id TEXT NOT NULL DEFAULT '',
  last_sequence INTEGER NOT NULL,
  last_write_ns INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (source, incarnation, run_id)
);
CREATE TABLE IF NOT EXISTS stream_gaps (
  source TEXT NOT NULL,
  incarnation INTEGER NOT NULL,
  run_id TEXT NOT NULL DEFAULT '',
  first_sequence INTEGER NOT NULL,
  last_sequence INTEGER NOT NULL,
  PRIMARY KEY (source, incarnation, run_id, first_sequence)
);
)sql";

// Stores made before streams had `last_write_ns` get the column (0: their
// streams are forgotten at the first ForgetIdleStreams).
absl::Status AddStreamWriteTimes(sqlite3* db) {
  Statement columns(db, "PRAGMA table_info(streams);");
  RETURN_IF_ERROR(columns.status());
  int rc;
  while ((rc = columns.Step()) == SQLITE_ROW) {
    if (columns.Text(1) == "last_write_ns") return absl::OkStatus();
  }
  RETURN_IF_ERROR(columns.Done(rc));
  return ExecSql(db,
                 "ALTER TABLE streams ADD COLUMN last_write_ns INTEGER NOT "
                 "NULL DEFAULT 0;");
}

bool StreamsHaveRuns(sqlite3* db, absl::Status* status) {
  Statement columns(db, "PRAGMA table_info(streams);");
  *status = columns.status();
  if (!status->ok()) return false;
  int rc;
  while ((rc = columns.Step()) == SQLITE_ROW) {
    if (columns.Text(1) == "run_id") return true;
  }
  *status = columns.Done(rc);
  return false;
}

// Stores made before a stream was keyed by its run too get the column (as
// part of the key, so the tables are made again): their streams are kept
// under the run "", which a batch's stream falls back to (every batch names
// a run), so what the old store knew still holds.
absl::Status AddStreamRuns(sqlite3* db, const char* schema) {
  absl::Status status;
  if (StreamsHaveRuns(db, &status) || !status.ok()) return status;
  RETURN_IF_ERROR(ExecSql(db, "BEGIN IMMEDIATE;"));
  status =
      ExecSql(db,
              "ALTER TABLE streams RENAME TO streams_without_runs;"
              "ALTER TABLE stream_gaps RENAME TO stream_gaps_without_runs;");
  if (status.ok()) status = ExecSql(db, schema);
  if (status.ok()) {
    status = ExecSql(
        db,
        "INSERT INTO streams (source, incarnation, run_id, last_sequence, "
        "last_write_ns) SELECT source, incarnation, '', last_sequence, "
        "last_write_ns FROM streams_without_runs;"
        "INSERT INTO stream_gaps (source, incarnation, run_id, "
        "first_sequence, last_sequence) SELECT source, incarnation, '', "
        "first_sequence, last_sequence FROM stream_gaps_without_runs;"
        "DROP TABLE streams_without_runs;"
        "DROP TABLE stream_gaps_without_runs;");
  }
  if (!status.ok()) {
    ExecSql(db, "ROLLBACK;").IgnoreError();
    return status;
  }
  return ExecSql(db, "COMMIT;");
}

Labels ParseLabelsKey(const std::string& key) {
  Labels labels;
  for (absl::string_view pair :
       absl::StrSplit(key, '\x1e', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv =
        absl::StrSplit(pair, absl::MaxSplits('\x1f', 1));
    labels.push_back(std::move(kv));
  }
  return labels;
}

}  // namespace

MetricStore::MetricStore(sqlite3* writer, sqlite3* reader,
                         MetricStoreOptions options)
    : options_(options),
      writer_(writer),
      reader_(reader),
      catalog_(std::make_unique<Catalog>()) {}

MetricStore::~MetricStore() {
  sqlite3_close(reader_);
  sqlite3_close(writer_);
}

absl::StatusOr<std::unique_ptr<MetricStore>> MetricStore::Open(
    const std::string& path, MetricStoreOptions options) {
  RETURN_IF_ERROR(CheckStoreOptions(options));
  ASSIGN_OR_RETURN(sqlite3 * writer, OpenDurableDatabase(path));
  if (absl::Status s = ExecSql(writer, kSchema); !s.ok()) {
    sqlite3_close(writer);
    return s;
  }
  if (absl::Status s = AddStreamWriteTimes(writer); !s.ok()) {
    sqlite3_close(writer);
    return s;
  }
  if (absl::Status s = AddStreamRuns(writer, kSchema); !s.ok()) {
    sqlite3_close(writer);
    return s;
  }
  absl::StatusOr<sqlite3*> reader = OpenDurableDatabase(path);
  if (!reader.ok()) {
    sqlite3_close(writer);
    return reader.status();
  }
  auto store =
      std::unique_ptr<MetricStore>(new MetricStore(writer, *reader, options));
  RETURN_IF_ERROR(store->LoadCatalog());
  return store;
}

absl::Status MetricStore::LoadCatalog() {
  Catalog& c = *catalog_;
  absl::MutexLock lock(&c.mu);
  c.series.clear();
  c.by_key.clear();
  c.by_run.clear();
  c.streams.clear();
  Statement list(writer_,
                 "SELECT id, run_id, name, labels, num_points, last_step, "
                 "last_wall_ns FROM series ORDER BY id;");
  RETURN_IF_ERROR(list.status());
  int rc;
  while ((rc = list.Step()) == SQLITE_ROW) {
    auto e = std::make_unique<SeriesEntry>();
    e->id = list.Int(0);
    e->run_id = list.Text(1);
    e->name = list.Text(2);
    const std::string labels_key = list.Text(3);
    e->labels = ParseLabelsKey(labels_key);
    e->num_points = list.Int(4);
    e->last_step = list.Int(5);
    e->last_wall_ns = list.Int(6);
    c.by_key[SeriesKey(e->run_id, e->name, labels_key)] = e.get();
    c.by_run[e->run_id].push_back(e.get());
    c.series.push_back(std::move(e));
  }
  RETURN_IF_ERROR(list.Done(rc));
  // The newest chunk of each series stays open for appends.
  Statement open(writer_,
                 "SELECT series_id, id, count FROM chunks WHERE id IN "
                 "(SELECT max(id) FROM chunks GROUP BY series_id);");
  RETURN_IF_ERROR(open.status());
  absl::flat_hash_map<int64_t, SeriesEntry*> by_id;
  for (auto& e : c.series) by_id[e->id] = e.get();
  while ((rc = open.Step()) == SQLITE_ROW) {
    auto it = by_id.find(open.Int(0));
    if (it == by_id.end() || open.Int(2) >= kChunkPoints) continue;
    it->second->open_chunk = open.Int(1);
    it->second->open_count = open.Int(2);
  }
  RETURN_IF_ERROR(open.Done(rc));
  Statement streams(writer_,
                    "SELECT source, incarnation, run_id, last_sequence, "
                    "last_write_ns FROM streams;");
  RETURN_IF_ERROR(streams.status());
  while ((rc = streams.Step()) == SQLITE_ROW) {
    StreamLedger& state =
        c.streams[StreamKey(streams.Text(0), streams.Int(1), streams.Text(2))];
    state.last = streams.Int(3);
    state.last_write_ns = streams.Int(4);
  }
  RETURN_IF_ERROR(streams.Done(rc));
  Statement gaps(writer_,
                 "SELECT source, incarnation, run_id, first_sequence, "
                 "last_sequence FROM stream_gaps ORDER BY source, incarnation, "
                 "run_id, first_sequence;");
  RETURN_IF_ERROR(gaps.status());
  while ((rc = gaps.Step()) == SQLITE_ROW) {
    c.streams[StreamKey(gaps.Text(0), gaps.Int(1), gaps.Text(2))]
        .gaps.emplace_back(gaps.Int(3), gaps.Int(4));
  }
  return gaps.Done(rc);
}

}  // namespace rl
