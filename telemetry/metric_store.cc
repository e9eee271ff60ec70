// MetricStore::Write: one transaction over a group of batches, in phases
// (admit, append to chunks, save the streams, publish to the catalog), and
// the limits a batch must keep. The tables and opening are
// metric_store_schema.cc, reads metric_store_query.cc.
#include "telemetry/metric_store.h"

#include <algorithm>
#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/sqlite_util.h"
#include "common/status.h"
#include "telemetry/downsample.h"
#include "telemetry/metric_store_catalog.h"
#include "telemetry/metric_store_write.h"
#include "telemetry/point_chunk.h"
#include "telemetry/stream_ledger.h"

namespace rl {
namespace {

Labels SortedLabels(const google::protobuf::Map<std::string, std::string>& m) {
  Labels labels(m.begin(), m.end());
  std::sort(labels.begin(), labels.end());
  return labels;
}

// Deletes the stored points of `series_id` at the steps `incoming` has, in
// place: a chunk left empty is deleted (the open one too: `*open_chunk`
// becomes 0), the others are rewritten with their exact step range. Returns
// how many points went. Inside Write's transaction.
absl::StatusOr<int64_t> RemoveStoredSteps(
    sqlite3* db, int64_t series_id, const std::vector<PointRecord>& incoming,
    int64_t* open_chunk, int64_t* open_count) {
  absl::flat_hash_set<int64_t> steps;
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const PointRecord& p : incoming) {
    steps.insert(p.step);
    lo = std::min(lo, p.step);
    hi = std::max(hi, p.step);
  }
  // Read first, then change: no table is modified under an open SELECT.
  std::vector<std::pair<int64_t, std::string>> overlapping;  // id, data
  {
    Statement list(db,
                   "SELECT id, data FROM chunks WHERE series_id = ? AND "
                   "min_step <= ? AND max_step >= ?;");
    RETURN_IF_ERROR(list.status());
    list.Bind(1, series_id);
    list.Bind(2, hi);
    list.Bind(3, lo);
    int rc;
    while ((rc = list.Step()) == SQLITE_ROW) {
      overlapping.emplace_back(list.Int(0), list.Blob(1));
    }
    RETURN_IF_ERROR(list.Done(rc));
  }
  Statement update(db,
                   "UPDATE chunks SET data = ?, count = ?, min_step = ?, "
                   "max_step = ? WHERE id = ?;");
  Statement del(db, "DELETE FROM chunks WHERE id = ?;");
  RETURN_IF_ERROR(update.status());
  RETURN_IF_ERROR(del.status());
  int64_t removed = 0;
  for (const auto& [id, data] : overlapping) {
    std::string kept;
    int64_t count = 0, total = 0;
    int64_t min_step = INT64_MAX, max_step = INT64_MIN;
    ForEachPoint(data, [&](const PointRecord& p) {
      ++total;
      if (steps.contains(p.step)) return;
      AppendPoints(&kept, &p, 1);
      ++count;
      min_step = std::min(min_step, p.step);
      max_step = std::max(max_step, p.step);
    });
    if (count == total) continue;
    removed += total - count;
    if (count == 0) {
      del.Reset();
      del.Bind(1, id);
      RETURN_IF_ERROR(del.Done(del.Step()));
      if (id == *open_chunk) {
        *open_chunk = 0;
        *open_count = 0;
      }
      continue;
    }
    update.Reset();
    update.BindBlob(1, kept);
    update.Bind(2, count);
    update.Bind(3, min_step);
    update.Bind(4, max_step);
    update.Bind(5, id);
    RETURN_IF_ERROR(update.Done(update.Step()));
    if (id == *open_chunk) *open_count = count;
  }
  return removed;
}

}  // namespace

absl::Status MetricStore::Write(const std::vector<const MetricBatch*>& batches,
                                std::vector<absl::Status>* results,
                                std::vector<bool>* duplicate) {
  absl::MutexLock write_lock(&write_mu_);
  results->assign(batches.size(), absl::OkStatus());
  duplicate->assign(batches.size(), false);
  PendingWrite w;
  RETURN_IF_ERROR(ExecSql(writer_, "BEGIN IMMEDIATE;"));
  // Any error: nothing of this call is stored; the catalog is reloaded.
  auto fail = [&](absl::Status s) {
    ExecSql(writer_, "ROLLBACK;").IgnoreError();
    LoadCatalog().IgnoreError();
    return s;
  };
  for (size_t i = 0; i < batches.size(); ++i) {
    bool repeated = false;
    const absl::Status admitted =
        AdmitBatch(*batches[i], i, w, &(*results)[i], &repeated);
    (*duplicate)[i] = repeated;
    if (!admitted.ok()) return fail(admitted);
  }
  if (absl::Status s = AppendPending(w); !s.ok()) return fail(s);
  if (absl::Status s = SaveStreams(w); !s.ok()) return fail(s);
  if (absl::Status s = ExecSql(writer_, "COMMIT;"); !s.ok()) return fail(s);
  PublishWrite(w);
  return absl::OkStatus();
}

// The limits a batch that creates `fresh` series must keep: series per run
// and per source, new runs per source per minute, runs. OK, or the reason
// it alone is refused (and counted). `*budgets`: the source's and the
// caller's new-run budgets to charge once the batch is taken (null: none).
absl::Status MetricStore::CheckSeriesLimits(const MetricBatch& b, int64_t fresh,
                                            PendingWrite& w,
                                            RunBudgets* budgets,
                                            bool count_refusal) {
  *budgets = {};
  if (fresh == 0) return absl::OkStatus();
  Catalog& c = *catalog_;
  const int64_t in_run = w.RunSeriesCount(c, b.run_id());
  if (in_run + fresh > options_.max_series_per_run) {
    if (count_refusal)
      refused_series_per_run_.fetch_add(1, std::memory_order_relaxed);
    return absl::FailedPreconditionError(
        absl::StrCat("batch ", b.sequence_number(), ": run ", b.run_id(),
                     " would have ", in_run + fresh, " series, at most ",
                     options_.max_series_per_run, " (max_series_per_run)"));
  }
  if (options_.max_series_per_source > 0) {
    const int64_t by_source = series_by_source_[b.source()] +
                              w.created_per_source[b.source()] + fresh;
    if (by_source > options_.max_series_per_source) {
      if (count_refusal)
        refused_series_per_source_.fetch_add(1, std::memory_order_relaxed);
      return absl::FailedPreconditionError(absl::StrCat(
          "batch ", b.sequence_number(), ": source ", b.source(),
          " would have created ", by_source, " series, at most ",
          options_.max_series_per_source, " (max_series_per_source)"));
    }
  }
  if (in_run != 0) return absl::OkStatus();  // not a new run
  if (options_.max_new_runs_per_source_per_minute > 0) {
    const double rate = options_.max_new_runs_per_source_per_minute;
    const absl::Time now = absl::Now();
    // One budget per source and one per caller (the stream's token or
    // address, stamped by the service): a client that changes `source`
    // with every batch still draws from its caller's.
    int n = 0;
    for (const std::string& key :
         {absl::StrCat("source:", b.source()),
          b.caller().empty() ? std::string() : "caller:" + b.caller()}) {
      if (key.empty()) continue;
      auto [it, added] = new_runs_by_source_.try_emplace(key);
      RunBudget& budget = it->second;
      budget.tokens =
          added ? rate
                : std::min(rate, budget.tokens + rate * absl::ToDoubleMinutes(
                                                            now - budget.at));
      budget.at = now;
      if (budget.tokens < 1) {
        if (count_refusal)
          refused_runs_per_source_.fetch_add(1, std::memory_order_relaxed);
        return absl::FailedPreconditionError(
            absl::StrCat("batch ", b.sequence_number(), ": ",
                         absl::StartsWith(key, "caller:")
                             ? absl::StrCat("caller ", b.caller())
                             : absl::StrCat("source ", b.source()),
                         " creates new runs faster than ",
                         options_.max_new_runs_per_source_per_minute,
                         " a minute (max_new_runs_per_source_per_minute); run ",
                         b.run_id(), " refused"));
      }
      (*budgets)[n++] = &budget;
    }
  }
  if (w.RunCount(c) >= options_.max_runs) {
    *budgets = {};
    if (count_refusal) refused_runs_.fetch_add(1, std::memory_order_relaxed);
    return absl::FailedPreconditionError(absl::StrCat(
        "batch ", b.sequence_number(), ": run ", b.run_id(),
        " would be a new run beyond the ", options_.max_runs,
        " runs stored, at most ", options_.max_runs, " (max_runs)"));
  }
  return absl::OkStatus();
}

// Phase 1, per batch: a duplicate of a stored batch is marked; a batch
// beyond the limits is refused (`*refused`); else its new series are
// inserted and its points grouped by series. An error is the Write's.
absl::Status MetricStore::AdmitBatch(const MetricBatch& b, size_t index,
                                     PendingWrite& w, absl::Status* refused,
                                     bool* duplicate) {
  Catalog& c = *catalog_;
  const std::string stream_key =
      StreamKey(b.source(), b.incarnation(), b.run_id());
  auto stream = w.streams.find(stream_key);
  if (stream == w.streams.end()) {
    auto stored = c.streams.find(stream_key);
    if (stored == c.streams.end()) {  // kept by an older store?
      stored = c.streams.find(StreamKey(b.source(), b.incarnation(), ""));
    }
    stream =
        w.streams
            .emplace(stream_key, stored == c.streams.end() ? StreamLedger()
                                                           : stored->second)
            .first;
  }
  if (stream->second.Has(b.sequence_number())) {
    *duplicate = true;
    return absl::OkStatus();
  }
  // Resolve the batch's series first, so a refused batch creates nothing.
  struct Fresh {
    std::string key;
    Labels labels;
    std::string name;
  };
  std::vector<Fresh> fresh;
  absl::flat_hash_set<std::string> fresh_keys;
  // Per point (and the dropped-points series last): its series, or null
  // until it is created.
  std::vector<SeriesEntry*> entries(b.points_size() + 1, nullptr);
  // Whether the series is new to the store and to the batch so far.
  auto resolve = [&](int p, const std::string& name, Labels labels) {
    const std::string key = SeriesKey(b.run_id(), name, LabelsKey(labels));
    entries[p] = w.FindSeries(c, key);
    if (entries[p] == nullptr && fresh_keys.insert(key).second) {
      fresh.push_back({key, std::move(labels), name});
      return true;
    }
    return false;
  };
  for (int p = 0; p < b.points_size(); ++p) {
    resolve(p, b.points(p).name(), SortedLabels(b.points(p).labels()));
  }
  const Labels dropped_labels = {{"source", b.source()}};
  bool record_dropped = b.dropped_points() > 0;
  const bool dropped_is_new =
      record_dropped &&
      resolve(b.points_size(), kDroppedPointsSeries, dropped_labels);
  RunBudgets budgets{};
  if (dropped_is_new &&
      !CheckSeriesLimits(b, static_cast<int64_t>(fresh.size()), w, &budgets,
                         /*count_refusal=*/false)
           .ok()) {
    // The source's dropped-points series is new and over a limit: the
    // batch's own points go in without it (its running total is recorded
    // by a later batch where there is room). Refusing the batch for it
    // would drop this batch too, and every one after it, since each
    // carries a total above 0.
    fresh.pop_back();
    record_dropped = false;
  }
  *refused =
      CheckSeriesLimits(b, static_cast<int64_t>(fresh.size()), w, &budgets);
  if (!refused->ok()) return absl::OkStatus();
  for (RunBudget* budget : budgets) {
    if (budget != nullptr) budget->tokens -= 1;
  }
  for (Fresh& f : fresh) {
    Statement insert(writer_,
                     "INSERT INTO series (run_id, name, labels) VALUES "
                     "(?, ?, ?);");
    RETURN_IF_ERROR(insert.status());
    insert.Bind(1, b.run_id());
    insert.Bind(2, f.name);
    insert.Bind(3, LabelsKey(f.labels));
    RETURN_IF_ERROR(insert.Done(insert.Step()));
    auto e = std::make_unique<SeriesEntry>();
    e->id = sqlite3_last_insert_rowid(writer_);
    e->run_id = b.run_id();
    e->name = f.name;
    e->labels = std::move(f.labels);
    w.created_by_key[f.key] = e.get();
    ++w.created_per_run[b.run_id()];
    ++w.created_per_source[b.source()];
    w.created.push_back(std::move(e));
  }
  for (int p = 0; p < b.points_size(); ++p) {
    const MetricPoint& mp = b.points(p);
    SeriesEntry* e = entries[p];
    if (e == nullptr) {
      e = w.FindSeries(c, SeriesKey(b.run_id(), mp.name(),
                                    LabelsKey(SortedLabels(mp.labels()))));
    }
    w.Add(e, index, {mp.step(), mp.wall_time_ns(), mp.value()});
  }
  if (record_dropped) {
    SeriesEntry* e = entries[b.points_size()];
    if (e == nullptr) {
      e = w.FindSeries(c, SeriesKey(b.run_id(), kDroppedPointsSeries,
                                    LabelsKey(dropped_labels)));
    }
    const int64_t wall = b.points_size()
                             ? b.points(b.points_size() - 1).wall_time_ns()
                             : absl::ToUnixNanos(absl::Now());
    // At wall-clock milliseconds: a restarted source (whose sequence
    // numbers start again) follows its earlier points, not replaces them.
    w.Add(e, index,
          {wall / 1000000, wall, static_cast<double>(b.dropped_points())});
  }
  stream->second.Add(b.sequence_number());
  w.streams_stored.insert(stream_key);
  return absl::OkStatus();
}

// Phase 2: the points go into their series' chunks.
absl::Status MetricStore::AppendPending(PendingWrite& w) {
  // Append the points: replace the stored points at their steps, fill the
  // open chunk, then new chunks.
  //
  // A step written again replaces what a series had at that step: a learner
  // that resumes from an earlier checkpoint emits those steps again, and its
  // curve must not hold two values per step. Points that one batch carries at
  // one step (an actor's episode returns of one segment) are all kept, and
  // replaced together. Done here rather than when reading, so every reader
  // (raw and downsampled queries, the counts, trimming) sees the same points
  // and none has to hold a series in memory to dedupe it; it costs nothing
  // while a series' steps only grow: only a point at or below its last step
  // makes the store read its chunks back.
  Catalog& c = *catalog_;
  std::vector<PendingWrite::Stats>& stats = w.stats;
  stats.resize(w.touched.size());
  {
    absl::MutexLock lock(&c.mu);
    for (size_t t = 0; t < w.touched.size(); ++t) {
      const SeriesEntry* e = w.touched[t].first;
      stats[t] = {e->num_points, e->last_step, e->last_wall_ns};
    }
  }
  Statement read_chunk(writer_, "SELECT data FROM chunks WHERE id = ?;");
  Statement update_chunk(writer_,
                         "UPDATE chunks SET data = ?, count = ?, min_step = "
                         "min(min_step, ?), max_step = max(max_step, ?) "
                         "WHERE id = ?;");
  Statement insert_chunk(writer_,
                         "INSERT INTO chunks (series_id, min_step, max_step, "
                         "count, data) VALUES (?, ?, ?, ?, ?);");
  Statement update_series(writer_,
                          "UPDATE series SET num_points = ?, last_step = ?, "
                          "last_wall_ns = ? WHERE id = ?;");
  for (Statement* st :
       {&read_chunk, &update_chunk, &insert_chunk, &update_series}) {
    if (!st->status().ok()) return st->status();
  }
  for (size_t t = 0; t < w.touched.size(); ++t) {
    SeriesEntry* e = w.touched[t].first;
    w.touched[t].second.KeepLatestBatchPerStep();
    const std::vector<PointRecord>& pts = w.touched[t].second.points;
    PendingWrite::Stats& st = stats[t];
    int64_t min_step = INT64_MAX;
    for (const PointRecord& r : pts) min_step = std::min(min_step, r.step);
    if (st.num_points > 0 && min_step <= st.last_step) {
      absl::StatusOr<int64_t> removed = RemoveStoredSteps(
          writer_, e->id, pts, &e->open_chunk, &e->open_count);
      if (!removed.ok()) return removed.status();
      st.num_points -= *removed;
    }
    size_t done = 0;
    auto step_range = [&](size_t from, size_t n) {
      int64_t lo = pts[from].step, hi = pts[from].step;
      for (size_t k = from; k < from + n; ++k) {
        lo = std::min(lo, pts[k].step);
        hi = std::max(hi, pts[k].step);
      }
      return std::make_pair(lo, hi);
    };
    if (e->open_chunk != 0 && e->open_count < kChunkPoints) {
      const size_t n =
          std::min<size_t>(kChunkPoints - e->open_count, pts.size());
      read_chunk.Reset();
      read_chunk.Bind(1, e->open_chunk);
      const int rc = read_chunk.Step();
      if (rc != SQLITE_ROW) return read_chunk.Done(SQLITE_ERROR);
      std::string blob = read_chunk.Blob(0);
      AppendPoints(&blob, pts.data(), n);
      const auto [lo, hi] = step_range(0, n);
      update_chunk.Reset();
      update_chunk.BindBlob(1, blob);
      update_chunk.Bind(2, e->open_count + static_cast<int64_t>(n));
      update_chunk.Bind(3, lo);
      update_chunk.Bind(4, hi);
      update_chunk.Bind(5, e->open_chunk);
      if (absl::Status s = update_chunk.Done(update_chunk.Step()); !s.ok()) {
        return s;
      }
      e->open_count += static_cast<int64_t>(n);
      done = n;
    }
    while (done < pts.size()) {
      const size_t n = std::min<size_t>(kChunkPoints, pts.size() - done);
      std::string blob;
      AppendPoints(&blob, pts.data() + done, n);
      const auto [lo, hi] = step_range(done, n);
      insert_chunk.Reset();
      insert_chunk.Bind(1, e->id);
      insert_chunk.Bind(2, lo);
      insert_chunk.Bind(3, hi);
      insert_chunk.Bind(4, static_cast<int64_t>(n));
      insert_chunk.BindBlob(5, blob);
      if (absl::Status s = insert_chunk.Done(insert_chunk.Step()); !s.ok()) {
        return s;
      }
      e->open_chunk = sqlite3_last_insert_rowid(writer_);
      e->open_count = static_cast<int64_t>(n);
      done += n;
    }
    st.num_points += static_cast<int64_t>(pts.size());
    for (const PointRecord& r : pts) {
      if (r.step >= st.last_step) st.last_step = r.step;
      st.last_wall_ns = std::max(st.last_wall_ns, r.wall_ns);
    }
    if (options_.max_points_per_series > 0 &&
        st.num_points > options_.max_points_per_series) {
      absl::StatusOr<int64_t> removed =
          TrimSeries(e->id, e->open_chunk, st.num_points);
      if (!removed.ok()) return removed.status();
      st.num_points -= *removed;
    }
    update_series.Reset();
    update_series.Bind(1, st.num_points);
    update_series.Bind(2, st.last_step);
    update_series.Bind(3, st.last_wall_ns);
    update_series.Bind(4, e->id);
    if (absl::Status s = update_series.Done(update_series.Step()); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// Phase 3: the streams' sequence numbers (and gaps) are stored.
absl::Status MetricStore::SaveStreams(PendingWrite& w) {
  Catalog& c = *catalog_;
  Statement put_stream(writer_,
                       "INSERT OR REPLACE INTO streams (source, incarnation, "
                       "run_id, last_sequence, last_write_ns) VALUES (?, ?, "
                       "?, ?, ?);");
  const int64_t now_ns = absl::ToUnixNanos(absl::Now());
  Statement clear_gaps(writer_,
                       "DELETE FROM stream_gaps WHERE source = ? AND "
                       "incarnation = ? AND run_id = ?;");
  Statement put_gap(writer_,
                    "INSERT INTO stream_gaps (source, incarnation, run_id, "
                    "first_sequence, last_sequence) VALUES (?, ?, ?, ?, ?);");
  for (Statement* st : {&put_stream, &clear_gaps, &put_gap}) {
    if (!st->status().ok()) return st->status();
  }
  for (auto& [key, state] : w.streams) {
    if (!w.streams_stored.contains(key)) continue;
    state.last_write_ns = now_ns;
    const std::vector<absl::string_view> parts =
        absl::StrSplit(key, absl::MaxSplits('\0', 2));
    int64_t incarnation = 0;
    if (parts.size() != 3 || !absl::SimpleAtoi(parts[1], &incarnation)) {
      return absl::InternalError("bad stream key");
    }
    const absl::string_view source = parts[0];
    const absl::string_view run_id = parts[2];
    put_stream.Reset();
    put_stream.Bind(1, source);
    put_stream.Bind(2, incarnation);
    put_stream.Bind(3, run_id);
    put_stream.Bind(4, state.last);
    put_stream.Bind(5, now_ns);
    if (absl::Status s = put_stream.Done(put_stream.Step()); !s.ok()) {
      return s;
    }
    // Streams without gaps, before and after (all but a failed write's),
    // cost nothing more.
    auto stored = c.streams.find(key);
    if (state.gaps.empty() &&
        (stored == c.streams.end() || stored->second.gaps.empty())) {
      continue;
    }
    clear_gaps.Reset();
    clear_gaps.Bind(1, source);
    clear_gaps.Bind(2, incarnation);
    clear_gaps.Bind(3, run_id);
    if (absl::Status s = clear_gaps.Done(clear_gaps.Step()); !s.ok()) {
      return s;
    }
    for (const auto& [first, end] : state.gaps) {
      put_gap.Reset();
      put_gap.Bind(1, source);
      put_gap.Bind(2, incarnation);
      put_gap.Bind(3, run_id);
      put_gap.Bind(4, first);
      put_gap.Bind(5, end);
      if (absl::Status s = put_gap.Done(put_gap.Step()); !s.ok()) {
        return s;
      }
    }
  }
  return absl::OkStatus();
}

// Phase 4, once committed: the catalog learns what is now durable.
void MetricStore::PublishWrite(PendingWrite& w) {
  Catalog& c = *catalog_;
  // Durable: publish to the catalog.
  for (const auto& [source, n] : w.created_per_source) {
    series_by_source_[source] += n;
  }
  for (auto& [key, state] : w.streams) {
    if (w.streams_stored.contains(key)) c.streams[key] = std::move(state);
  }
  absl::MutexLock lock(&c.mu);
  for (auto& e : w.created) {
    c.by_key[SeriesKey(e->run_id, e->name, LabelsKey(e->labels))] = e.get();
    c.by_run[e->run_id].push_back(e.get());
    c.series.push_back(std::move(e));
  }
  for (size_t t = 0; t < w.touched.size(); ++t) {
    SeriesEntry* e = w.touched[t].first;
    e->num_points = w.stats[t].num_points;
    e->last_step = w.stats[t].last_step;
    e->last_wall_ns = w.stats[t].last_wall_ns;
  }
}

int64_t MetricStore::num_streams() {
  absl::MutexLock write_lock(&write_mu_);
  return static_cast<int64_t>(catalog_->streams.size());
}

MetricStoreStats MetricStore::stats() const {
  MetricStoreStats s;
  s.refused_series_per_run =
      refused_series_per_run_.load(std::memory_order_relaxed);
  s.refused_runs = refused_runs_.load(std::memory_order_relaxed);
  s.refused_series_per_source =
      refused_series_per_source_.load(std::memory_order_relaxed);
  s.refused_runs_per_source =
      refused_runs_per_source_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace rl
