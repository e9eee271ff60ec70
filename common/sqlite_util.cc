#include "common/sqlite_util.h"

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

absl::Status ExecSql(sqlite3* db, const std::string& sql) {
  char* error = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
    const std::string message = error ? error : "unknown error";
    sqlite3_free(error);
    return absl::InternalError(absl::StrCat("sqlite: ", message));
  }
  return absl::OkStatus();
}

absl::Status Statement::status() const {
  if (rc_ == SQLITE_OK) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("sqlite prepare: ", sqlite3_errmsg(db_)));
}

absl::Status Statement::Done(int rc) const {
  if (rc == SQLITE_DONE || rc == SQLITE_ROW) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("sqlite: ", sqlite3_errmsg(db_)));
}

}  // namespace rl
