#include "common/sqlite_util.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace rl {

absl::StatusOr<sqlite3*> OpenDurableDatabase(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
    const std::string error = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return absl::UnavailableError(
        absl::StrCat("cannot open store ", path, ": ", error));
  }
  sqlite3_busy_timeout(db, 5000);
  // WAL + synchronous=FULL: a committed transaction survives a crash.
  for (const char* pragma :
       {"PRAGMA journal_mode=WAL;", "PRAGMA synchronous=FULL;"}) {
    if (absl::Status s = ExecSql(db, pragma); !s.ok()) {
      sqlite3_close(db);
      return absl::UnavailableError(
          absl::StrCat("cannot open store ", path, ": ", s.message()));
    }
  }
  return db;
}

absl::Status SqliteError(sqlite3* db, absl::string_view context) {
  const int code = sqlite3_extended_errcode(db) & 0xff;
  const char* file = sqlite3_db_filename(db, "main");
  const std::string message =
      absl::StrCat(context, " (store ", file != nullptr && *file ? file : "?",
                   "): ", sqlite3_errmsg(db));
  switch (code) {
    case SQLITE_FULL:
      return absl::ResourceExhaustedError(absl::StrCat(
          message, "; free disk space (or raise the store's size limit)"));
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
      return absl::UnavailableError(message);
    case SQLITE_READONLY:
    case SQLITE_PERM:
      return absl::FailedPreconditionError(message);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::DataLossError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::Status ExecSql(sqlite3* db, const std::string& sql) {
  char* error = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
    sqlite3_free(error);  // the same text as sqlite3_errmsg
    return SqliteError(db, "sqlite");
  }
  return absl::OkStatus();
}

absl::Status LimitDatabaseSize(sqlite3* db, int64_t max_bytes) {
  if (max_bytes <= 0) return absl::OkStatus();
  const int page_size = [&] {
    Statement s(db, "PRAGMA page_size;");
    return s.Step() == SQLITE_ROW ? static_cast<int>(s.Int(0)) : 4096;
  }();
  const int64_t pages = std::max<int64_t>(1, max_bytes / page_size);
  return ExecSql(db, absl::StrCat("PRAGMA max_page_count=", pages, ";"));
}

absl::Status Statement::status() const {
  if (rc_ == SQLITE_OK) return absl::OkStatus();
  return SqliteError(db_, "sqlite prepare");
}

absl::Status Statement::Done(int rc) const {
  if (rc == SQLITE_DONE || rc == SQLITE_ROW) return absl::OkStatus();
  return SqliteError(db_, "sqlite");
}

}  // namespace rl
