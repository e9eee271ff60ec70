// Helpers of the metric store's tests (metric_store_test.cc,
// metric_store_query_test.cc, metric_store_retention_test.cc,
// metric_store_limits_test.cc): a store in a fresh test directory, points
// and batches, one batch written, queries, and the chunks as stored.
#ifndef RL_TELEMETRY_METRIC_STORE_TEST_UTIL_H_
#define RL_TELEMETRY_METRIC_STORE_TEST_UTIL_H_

#include <sqlite3.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "telemetry/metric_store.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace rl {

inline std::string DbPath(const std::string& name) {
  return MakeTestDir(name) + "/telemetry.db";
}

inline std::unique_ptr<MetricStore> OpenStore(const std::string& path,
                                              MetricStoreOptions options = {}) {
  absl::StatusOr<std::unique_ptr<MetricStore>> store =
      MetricStore::Open(path, options);
  EXPECT_OK(store);
  return store.ok() ? std::move(*store) : nullptr;
}

inline MetricPoint Point(
    const std::string& name, int64_t step, double value, int64_t wall_ns = 0,
    const std::map<std::string, std::string>& labels = {}) {
  MetricPoint p;
  p.set_name(name);
  p.set_step(step);
  p.set_value(value);
  p.set_wall_time_ns(wall_ns == 0 ? 1000 + step : wall_ns);
  for (const auto& [k, v] : labels) (*p.mutable_labels())[k] = v;
  return p;
}

inline MetricBatch Batch(const std::string& run, int64_t seq,
                         std::vector<MetricPoint> points,
                         const std::string& source = "learner/0",
                         int64_t incarnation = 1) {
  MetricBatch b;
  b.set_run_id(run);
  b.set_sequence_number(seq);
  b.set_source(source);
  b.set_incarnation(incarnation);
  for (MetricPoint& p : points) *b.add_points() = std::move(p);
  return b;
}

// Writes one batch; returns its result, `duplicate` set if given.
inline absl::Status WriteOne(MetricStore* store, const MetricBatch& batch,
                             bool* duplicate = nullptr) {
  std::vector<absl::Status> results;
  std::vector<bool> dup;
  absl::Status st = store->Write({&batch}, &results, &dup);
  if (!st.ok()) return st;
  EXPECT_EQ(results.size(), 1u);
  EXPECT_EQ(dup.size(), 1u);
  if (duplicate != nullptr) *duplicate = dup[0];
  return results[0];
}

inline QueryRequest Raw(const std::string& run,
                        const std::vector<std::string>& names = {}) {
  QueryRequest q;
  q.set_run_id(run);
  for (const std::string& n : names) q.add_names(n);
  return q;
}

inline QueryResponse MustQuery(MetricStore* store, const QueryRequest& q) {
  absl::StatusOr<QueryResponse> r = store->Query(q);
  EXPECT_OK(r);
  return r.ok() ? *r : QueryResponse();
}

inline std::vector<int64_t> Steps(const Series& s) {
  std::vector<int64_t> out;
  for (const MetricPoint& p : s.points()) out.push_back(p.step());
  return out;
}

// Chunk sizes of one series as stored, oldest first.
inline std::vector<int64_t> ChunkCounts(const std::string& path,
                                        const std::string& run,
                                        const std::string& name) {
  std::vector<int64_t> out;
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr),
            SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(
                db,
                "SELECT c.count FROM chunks c JOIN series s ON c.series_id = "
                "s.id WHERE s.run_id = ? AND s.name = ? ORDER BY c.id;",
                -1, &st, nullptr),
            SQLITE_OK);
  sqlite3_bind_text(st, 1, run.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 2, name.c_str(), -1, SQLITE_TRANSIENT);
  while (sqlite3_step(st) == SQLITE_ROW) {
    out.push_back(sqlite3_column_int64(st, 0));
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

}  // namespace rl

#endif  // RL_TELEMETRY_METRIC_STORE_TEST_UTIL_H_
