#include "coordinator/run_store.h"

#include <sqlite3.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/json_quote.h"
#include "common/sqlite_util.h"
#include "common/status.h"
#include "runspec/run_spec.h"

namespace rl {
namespace {

constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS runs (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id TEXT UNIQUE,
  state INTEGER NOT NULL,
  idempotency_key TEXT UNIQUE,
  run BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS run_events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id TEXT NOT NULL,
  from_state INTEGER NOT NULL,
  to_state INTEGER NOT NULL,
  reason TEXT NOT NULL,
  time_ns INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS run_events_by_run ON run_events(run_id);
CREATE TABLE IF NOT EXISTS workers (
  worker_id TEXT PRIMARY KEY,
  role INTEGER NOT NULL,
  address TEXT NOT NULL,
  registered_ns INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS worker_keys (
  worker_id TEXT PRIMARY KEY,
  nonce TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS sweeps (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  sweep_id TEXT UNIQUE,
  state INTEGER NOT NULL,
  idempotency_key TEXT UNIQUE,
  sweep BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS assignments (
  worker_id TEXT PRIMARY KEY,
  run_id TEXT NOT NULL,
  role INTEGER NOT NULL,
  rank INTEGER NOT NULL,
  assignment_id INTEGER NOT NULL
);
)sql";

void SetTime(google::protobuf::Timestamp* ts, absl::Time t) {
  const int64_t ns = absl::ToUnixNanos(t);
  ts->set_seconds(ns / 1000000000);
  ts->set_nanos(static_cast<int32_t>(ns % 1000000000));
}

absl::StatusOr<Run> ParseRun(const std::string& blob) {
  Run run;
  if (!run.ParseFromString(blob)) {
    return absl::DataLossError("stored run does not parse");
  }
  CompleteStoredRunSpec(run.mutable_spec());
  return run;
}

absl::StatusOr<Sweep> ParseSweep(const std::string& blob) {
  Sweep sweep;
  if (!sweep.ParseFromString(blob)) {
    return absl::DataLossError("stored sweep does not parse");
  }
  return sweep;
}

// A key names a run (or sweep) among its owner's only: a user who guesses
// another's (a sweep's trial keys are "<sweep id>/<index>") gets their own.
// The owner's length first: no two (owner, key) pairs are stored alike.
std::string OwnersKey(const std::string& owner, const std::string& key) {
  return absl::StrCat(owner.size(), ":", owner, "/", key);
}

// As stored: OwnersKey, or NULL for no key.
void BindOwnersKey(Statement* statement, int i, const std::string& owner,
                   const std::string& key) {
  if (key.empty()) {
    statement->BindNull(i);
  } else {
    statement->Bind(i, OwnersKey(owner, key));
  }
}

// Files before user_version 1 stored keys bare: each becomes OwnersKey of
// its row's owner (a row that does not parse, nor can be read, loses it).
template <typename Stored>
absl::Status ScopeBareKeys(sqlite3* db, const std::string& table,
                           const std::string& column) {
  std::vector<std::pair<int64_t, std::string>> keys;  // seq, scoped key
  Statement list(
      db, absl::StrCat("SELECT seq, idempotency_key, ", column, " FROM ", table,
                       " WHERE idempotency_key IS NOT NULL;")
              .c_str());
  RETURN_IF_ERROR(list.status());
  int rc;
  while ((rc = list.Step()) == SQLITE_ROW) {
    Stored stored;
    if (!stored.ParseFromString(list.Blob(2))) continue;
    keys.emplace_back(list.Int(0), OwnersKey(stored.owner(), list.Text(1)));
  }
  RETURN_IF_ERROR(list.Done(rc));
  // All cleared first: a bare key may spell another row's scoped one.
  RETURN_IF_ERROR(ExecSql(
      db, absl::StrCat("UPDATE ", table, " SET idempotency_key = NULL;")));
  Statement update(db, absl::StrCat("UPDATE ", table,
                                    " SET idempotency_key = ? WHERE seq = ?;")
                           .c_str());
  RETURN_IF_ERROR(update.status());
  for (const auto& [seq, key] : keys) {
    update.Reset();
    update.Bind(1, key);
    update.Bind(2, seq);
    RETURN_IF_ERROR(update.Done(update.Step()));
  }
  return absl::OkStatus();
}

// The file brought to user_version 1, in one transaction.
absl::Status UpgradeSchema(sqlite3* db) {
  RETURN_IF_ERROR(ExecSql(db, "BEGIN IMMEDIATE;"));
  Statement read(db, "PRAGMA user_version;");
  absl::Status status = read.status();
  const bool bare = status.ok() && read.Step() == SQLITE_ROW && read.Int(0) < 1;
  if (status.ok()) read.Reset();
  if (bare) {
    status = ScopeBareKeys<Run>(db, "runs", "run");
    if (status.ok()) status = ScopeBareKeys<Sweep>(db, "sweeps", "sweep");
    if (status.ok()) status = ExecSql(db, "PRAGMA user_version = 1;");
  }
  if (!status.ok()) ExecSql(db, "ROLLBACK;").IgnoreError();
  return status.ok() ? ExecSql(db, "COMMIT;") : status;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RunStore>> RunStore::Open(
    const std::string& path, int64_t max_bytes) {
  ASSIGN_OR_RETURN(sqlite3 * db, OpenDurableDatabase(path));
  auto store = std::unique_ptr<RunStore>(new RunStore(db));
  absl::MutexLock lock(&store->mu_);
  RETURN_IF_ERROR(store->Exec(kSchema));
  RETURN_IF_ERROR(UpgradeSchema(db));
  RETURN_IF_ERROR(LimitDatabaseSize(db, max_bytes));
  return store;
}

RunStore::~RunStore() {
  absl::MutexLock lock(&mu_);
  sqlite3_close(db_);
}

absl::Status RunStore::Exec(const std::string& sql) {
  return ExecSql(db_, sql);
}

absl::Status RunStore::Rollback(absl::Status status) {
  Exec("ROLLBACK;").IgnoreError();
  return status;
}

absl::Status RunStore::LogEventLocked(const std::string& run_id, RunState from,
                                      RunState to, const std::string& reason,
                                      absl::Time time) {
  Statement event(db_,
                  "INSERT INTO run_events(run_id, from_state, to_state, "
                  "reason, time_ns) VALUES(?, ?, ?, ?, ?);");
  RETURN_IF_ERROR(event.status());
  event.Bind(1, run_id);
  event.Bind(2, static_cast<int64_t>(from));
  event.Bind(3, static_cast<int64_t>(to));
  event.Bind(4, reason);
  event.Bind(5, absl::ToUnixNanos(time));
  return event.Done(event.Step());
}

bool RunStore::TransitionAllowed(RunState from, RunState to) {
  if (from == SUCCEEDED || from == FAILED || from == CANCELLED) return false;
  if (to == FAILED || to == CANCELLED) return true;
  switch (from) {
    case QUEUED:
      return to == PLACING;
    case PLACING:
      return to == RUNNING || to == QUEUED;
    case RUNNING:
      return to == SUCCEEDED || to == PLACING;
    default:
      return false;
  }
}

absl::StatusOr<Run> RunStore::SubmitRun(const RunSpec& spec,
                                        const std::string& idempotency_key,
                                        bool* created, const std::string& owner,
                                        int max_queued_per_owner,
                                        const RunRound& round) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE;"));
  if (!idempotency_key.empty()) {
    Statement find(db_, "SELECT run FROM runs WHERE idempotency_key = ?;");
    RETURN_IF_ERROR(find.status());
    find.Bind(1, OwnersKey(owner, idempotency_key));
    if (find.Step() == SQLITE_ROW) {
      auto run = ParseRun(find.Blob(0));
      RETURN_IF_ERROR(Exec("COMMIT;"));
      *created = false;
      return run;
    }
  }
  if (max_queued_per_owner > 0) {
    // Owners are inside the stored protos; queued runs are few enough to
    // read them in the same transaction as the insert.
    Statement queued(db_, "SELECT run FROM runs WHERE state IN (?, ?);");
    RETURN_IF_ERROR(queued.status());
    queued.Bind(1, static_cast<int64_t>(QUEUED));
    queued.Bind(2, static_cast<int64_t>(PLACING));
    int count = 0;
    while (queued.Step() == SQLITE_ROW) {
      absl::StatusOr<Run> run = ParseRun(queued.Blob(0));
      if (run.ok() && run->owner() == owner) ++count;
    }
    if (count >= max_queued_per_owner) {
      return Rollback(absl::ResourceExhaustedError(absl::StrCat(
          owner, " already has ", count, " runs waiting to start, at most ",
          max_queued_per_owner,
          " (--max_queued_runs_per_user): cancel some or wait for them to "
          "start")));
    }
  }
  Statement insert(db_,
                   "INSERT INTO runs(state, idempotency_key, run) "
                   "VALUES(?, ?, x'');");
  RETURN_IF_ERROR(insert.status());
  insert.Bind(1, static_cast<int64_t>(QUEUED));
  BindOwnersKey(&insert, 2, owner, idempotency_key);
  absl::Status status = insert.Done(insert.Step());
  if (!status.ok()) return Rollback(status);
  const int64_t seq = sqlite3_last_insert_rowid(db_);
  Run run;
  run.set_run_id(absl::StrFormat("run-%06d", seq));
  *run.mutable_spec() = spec;
  run.set_state(QUEUED);
  run.set_owner(owner);
  run.set_generation(1);
  const absl::Time now = absl::Now();
  SetTime(run.mutable_create_time(), now);
  SetTime(run.mutable_update_time(), now);
  run.mutable_progress()->set_mean_return(std::nan(""));
  run.set_start_from_run(round.start_from_run);
  run.set_stop_env_steps(round.stop_env_steps);
  Statement update(db_, "UPDATE runs SET run_id = ?, run = ? WHERE seq = ?;");
  RETURN_IF_ERROR(update.status());
  update.Bind(1, run.run_id());
  update.BindBlob(2, run.SerializeAsString());
  update.Bind(3, seq);
  status = update.Done(update.Step());
  if (!status.ok()) return Rollback(status);

  status = LogEventLocked(run.run_id(), RUN_STATE_UNSPECIFIED, QUEUED,
                          "submitted", now);
  if (!status.ok()) return Rollback(status);
  RETURN_IF_ERROR(Exec("COMMIT;"));
  *created = true;
  return run;
}

absl::StatusOr<Run> RunStore::GetRunLocked(const std::string& run_id) {
  Statement find(db_, "SELECT run FROM runs WHERE run_id = ?;");
  RETURN_IF_ERROR(find.status());
  find.Bind(1, run_id);
  if (find.Step() != SQLITE_ROW) {
    return absl::NotFoundError(
        absl::StrCat("no run with id ", QuoteForError(run_id)));
  }
  return ParseRun(find.Blob(0));
}

absl::StatusOr<Run> RunStore::GetRun(const std::string& run_id) {
  absl::MutexLock lock(&mu_);
  return GetRunLocked(run_id);
}

absl::StatusOr<std::vector<Run>> RunStore::ListRuns(
    const std::vector<RunState>& states, int page_size,
    const std::string& page_token, std::string* next_page_token) {
  int64_t before = std::numeric_limits<int64_t>::max();
  if (!page_token.empty() &&
      (!absl::SimpleAtoi(page_token, &before) || before < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "page_token: not a token from ListRuns (got \"", page_token, "\")"));
  }
  if (page_size <= 0) page_size = 50;
  page_size = std::min(page_size, 1000);
  std::string sql = "SELECT seq, run FROM runs WHERE seq < ?";
  if (!states.empty()) {
    std::vector<std::string> numbers;
    for (RunState s : states)
      numbers.push_back(absl::StrCat(static_cast<int>(s)));
    absl::StrAppend(&sql, " AND state IN (", absl::StrJoin(numbers, ","), ")");
  }
  absl::StrAppend(&sql, " ORDER BY seq DESC LIMIT ?;");
  absl::MutexLock lock(&mu_);
  Statement list(db_, sql.c_str());
  RETURN_IF_ERROR(list.status());
  list.Bind(1, before);
  list.Bind(2, static_cast<int64_t>(page_size) + 1);
  std::vector<Run> runs;
  int64_t last_seq = 0;
  next_page_token->clear();
  int rc;
  while ((rc = list.Step()) == SQLITE_ROW) {
    if (static_cast<int>(runs.size()) == page_size) {
      *next_page_token = absl::StrCat(last_seq);
      break;
    }
    last_seq = list.Int(0);
    ASSIGN_OR_RETURN(Run run, ParseRun(list.Blob(1)));
    runs.push_back(std::move(run));
  }
  return runs;
}

absl::StatusOr<Run> RunStore::Transition(const std::string& run_id, RunState to,
                                         const std::string& reason) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE;"));
  auto run = GetRunLocked(run_id);
  if (!run.ok()) return Rollback(run.status());
  const RunState from = run->state();
  if (!TransitionAllowed(from, to)) {
    return Rollback(absl::FailedPreconditionError(
        absl::StrCat("run ", run_id, " cannot go from ", RunState_Name(from),
                     " to ", RunState_Name(to))));
  }
  const absl::Time now = absl::Now();
  run->set_state(to);
  run->set_generation(run->generation() + 1);
  SetTime(run->mutable_update_time(), now);
  if (to == FAILED || to == CANCELLED) run->set_failure_reason(reason);

  Statement update(db_, "UPDATE runs SET state = ?, run = ? WHERE run_id = ?;");
  RETURN_IF_ERROR(update.status());
  update.Bind(1, static_cast<int64_t>(to));
  update.BindBlob(2, run->SerializeAsString());
  update.Bind(3, run_id);
  absl::Status status = update.Done(update.Step());
  if (!status.ok()) return Rollback(status);
  status = LogEventLocked(run_id, from, to, reason, now);
  if (!status.ok()) return Rollback(status);
  RETURN_IF_ERROR(Exec("COMMIT;"));
  return *run;
}

absl::Status RunStore::UpdateProgress(const std::string& run_id,
                                      const RunProgress& progress) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE;"));
  auto run = GetRunLocked(run_id);
  absl::Status status = run.status();
  if (status.ok()) {
    *run->mutable_progress() = progress;
    SetTime(run->mutable_update_time(), absl::Now());
    Statement update(db_, "UPDATE runs SET run = ? WHERE run_id = ?;");
    update.BindBlob(1, run->SerializeAsString());
    update.Bind(2, run_id);
    status =
        update.status().ok() ? update.Done(update.Step()) : update.status();
  }
  return status.ok() ? Exec("COMMIT;") : Rollback(status);
}

absl::Status RunStore::PutWorker(const std::string& worker_id, WorkerRole role,
                                 const std::string& address) {
  absl::MutexLock lock(&mu_);
  Statement put(db_,
                "INSERT OR REPLACE INTO workers(worker_id, role, address, "
                "registered_ns) VALUES(?, ?, ?, ?);");
  RETURN_IF_ERROR(put.status());
  put.Bind(1, worker_id);
  put.Bind(2, static_cast<int64_t>(role));
  put.Bind(3, address);
  put.Bind(4, absl::ToUnixNanos(absl::Now()));
  return put.Done(put.Step());
}

absl::Status RunStore::PutAssignment(const AssignmentRecord& a) {
  absl::MutexLock lock(&mu_);
  Statement put(db_,
                "INSERT OR REPLACE INTO assignments(worker_id, run_id, role, "
                "rank, assignment_id) VALUES(?, ?, ?, ?, ?);");
  RETURN_IF_ERROR(put.status());
  put.Bind(1, a.worker_id);
  put.Bind(2, a.run_id);
  put.Bind(3, static_cast<int64_t>(a.role));
  put.Bind(4, static_cast<int64_t>(a.rank));
  put.Bind(5, a.assignment_id);
  return put.Done(put.Step());
}

absl::Status RunStore::ClearAssignment(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  Statement del(db_, "DELETE FROM assignments WHERE worker_id = ?;");
  RETURN_IF_ERROR(del.status());
  del.Bind(1, worker_id);
  return del.Done(del.Step());
}

absl::Status RunStore::RemoveWorker(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE;"));
  for (const char* sql : {"DELETE FROM assignments WHERE worker_id = ?;",
                          "DELETE FROM worker_keys WHERE worker_id = ?;",
                          "DELETE FROM workers WHERE worker_id = ?;"}) {
    Statement del(db_, sql);
    absl::Status s = del.status();
    if (s.ok()) {
      del.Bind(1, worker_id);
      s = del.Done(del.Step());
    }
    if (!s.ok()) return Rollback(s);
  }
  return Exec("COMMIT;");
}

absl::Status RunStore::PutWorkerNonce(const std::string& worker_id,
                                      const std::string& nonce) {
  absl::MutexLock lock(&mu_);
  Statement put(db_,
                "INSERT OR REPLACE INTO worker_keys(worker_id, nonce) "
                "VALUES(?, ?);");
  RETURN_IF_ERROR(put.status());
  put.Bind(1, worker_id);
  put.Bind(2, nonce);
  return put.Done(put.Step());
}

absl::StatusOr<std::map<std::string, std::string>> RunStore::WorkerNonces() {
  absl::MutexLock lock(&mu_);
  Statement list(db_, "SELECT worker_id, nonce FROM worker_keys;");
  RETURN_IF_ERROR(list.status());
  std::map<std::string, std::string> nonces;
  while (list.Step() == SQLITE_ROW) nonces[list.Text(0)] = list.Text(1);
  return nonces;
}

absl::StatusOr<std::vector<AssignmentRecord>> RunStore::Assignments() {
  absl::MutexLock lock(&mu_);
  Statement list(db_,
                 "SELECT worker_id, run_id, role, rank, assignment_id FROM "
                 "assignments ORDER BY worker_id;");
  RETURN_IF_ERROR(list.status());
  std::vector<AssignmentRecord> all;
  while (list.Step() == SQLITE_ROW) {
    all.push_back({list.Text(0), list.Text(1),
                   static_cast<WorkerRole>(list.Int(2)),
                   static_cast<int>(list.Int(3)), list.Int(4)});
  }
  return all;
}

absl::StatusOr<std::vector<RunEventRecord>> RunStore::Events(
    const std::string& run_id) {
  absl::MutexLock lock(&mu_);
  Statement list(db_,
                 "SELECT from_state, to_state, reason, time_ns FROM "
                 "run_events WHERE run_id = ? ORDER BY id;");
  RETURN_IF_ERROR(list.status());
  list.Bind(1, run_id);
  std::vector<RunEventRecord> events;
  while (list.Step() == SQLITE_ROW) {
    events.push_back({run_id, static_cast<RunState>(list.Int(0)),
                      static_cast<RunState>(list.Int(1)), list.Text(2),
                      absl::FromUnixNanos(list.Int(3))});
  }
  return events;
}

absl::StatusOr<Sweep> RunStore::FindSweepByKeyLocked(
    const std::string& idempotency_key, const std::string& owner) {
  Statement find(db_, "SELECT sweep FROM sweeps WHERE idempotency_key = ?;");
  RETURN_IF_ERROR(find.status());
  find.Bind(1, OwnersKey(owner, idempotency_key));
  if (find.Step() != SQLITE_ROW) {
    return absl::NotFoundError("no sweep with that idempotency key");
  }
  return ParseSweep(find.Blob(0));
}

absl::StatusOr<Sweep> RunStore::CreateSweep(Sweep sweep,
                                            const std::string& idempotency_key,
                                            bool* created) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE;"));
  if (!idempotency_key.empty()) {
    absl::StatusOr<Sweep> stored =
        FindSweepByKeyLocked(idempotency_key, sweep.owner());
    if (stored.ok()) {
      RETURN_IF_ERROR(Exec("COMMIT;"));
      *created = false;
      return stored;
    }
    if (!absl::IsNotFound(stored.status())) return Rollback(stored.status());
  }
  Statement insert(db_,
                   "INSERT INTO sweeps(state, idempotency_key, sweep) "
                   "VALUES(?, ?, x'');");
  RETURN_IF_ERROR(insert.status());
  insert.Bind(1, static_cast<int64_t>(sweep.state()));
  BindOwnersKey(&insert, 2, sweep.owner(), idempotency_key);
  absl::Status status = insert.Done(insert.Step());
  if (!status.ok()) return Rollback(status);
  const int64_t seq = sqlite3_last_insert_rowid(db_);
  sweep.set_sweep_id(absl::StrFormat("sweep-%06d", seq));
  Statement update(db_,
                   "UPDATE sweeps SET sweep_id = ?, sweep = ? WHERE seq = ?;");
  RETURN_IF_ERROR(update.status());
  update.Bind(1, sweep.sweep_id());
  update.BindBlob(2, sweep.SerializeAsString());
  update.Bind(3, seq);
  status = update.Done(update.Step());
  if (!status.ok()) return Rollback(status);
  RETURN_IF_ERROR(Exec("COMMIT;"));
  *created = true;
  return sweep;
}

absl::StatusOr<Sweep> RunStore::FindSweepByKey(
    const std::string& idempotency_key, const std::string& owner) {
  absl::MutexLock lock(&mu_);
  return FindSweepByKeyLocked(idempotency_key, owner);
}

absl::Status RunStore::PutSweep(const Sweep& sweep) {
  absl::MutexLock lock(&mu_);
  Statement update(
      db_, "UPDATE sweeps SET state = ?, sweep = ? WHERE sweep_id = ?;");
  RETURN_IF_ERROR(update.status());
  update.Bind(1, static_cast<int64_t>(sweep.state()));
  update.BindBlob(2, sweep.SerializeAsString());
  update.Bind(3, sweep.sweep_id());
  RETURN_IF_ERROR(update.Done(update.Step()));
  if (sqlite3_changes(db_) == 0) {
    return absl::NotFoundError(
        absl::StrCat("no sweep \"", sweep.sweep_id(), "\""));
  }
  return absl::OkStatus();
}

absl::StatusOr<Sweep> RunStore::GetSweep(const std::string& sweep_id) {
  absl::MutexLock lock(&mu_);
  Statement find(db_, "SELECT sweep FROM sweeps WHERE sweep_id = ?;");
  RETURN_IF_ERROR(find.status());
  find.Bind(1, sweep_id);
  if (find.Step() != SQLITE_ROW) {
    return absl::NotFoundError(absl::StrCat("no sweep \"", sweep_id, "\""));
  }
  return ParseSweep(find.Blob(0));
}

absl::StatusOr<std::vector<Sweep>> RunStore::ListSweeps(bool unfinished_only,
                                                        int limit) {
  absl::MutexLock lock(&mu_);
  Statement list(db_, unfinished_only
                          ? "SELECT sweep FROM sweeps WHERE state NOT IN "
                            "(?, ?, ?) ORDER BY seq DESC LIMIT ?;"
                          : "SELECT sweep FROM sweeps ORDER BY seq DESC "
                            "LIMIT ?;");
  RETURN_IF_ERROR(list.status());
  int next = 1;
  if (unfinished_only) {
    for (const RunState s : {SUCCEEDED, FAILED, CANCELLED}) {
      list.Bind(next++, static_cast<int64_t>(s));
    }
  }
  list.Bind(next, static_cast<int64_t>(limit));
  std::vector<Sweep> sweeps;
  while (list.Step() == SQLITE_ROW) {
    ASSIGN_OR_RETURN(Sweep sweep, ParseSweep(list.Blob(0)));
    sweeps.push_back(std::move(sweep));
  }
  return sweeps;
}

}  // namespace rl
