// Small SQLite helpers shared by the stores (coordinator runs, telemetry
// series): opening a durable WAL database, statements that finalize
// themselves, and errors as absl::Status.
#ifndef RL_COMMON_SQLITE_UTIL_H_
#define RL_COMMON_SQLITE_UTIL_H_

#include <sqlite3.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rl {

// Opens (creating) `path` in WAL mode with synchronous=FULL, so a committed
// transaction survives a crash, and a busy timeout. UNAVAILABLE naming the
// path if it cannot be opened.
absl::StatusOr<sqlite3*> OpenDurableDatabase(const std::string& path);

// Runs `sql` (any number of statements). An error as SqliteError says.
absl::Status ExecSql(sqlite3* db, const std::string& sql);

// SQLite's latest error on `db` as a Status naming the database file, with
// a code a client can act on: a full disk or store (SQLITE_FULL) is
// RESOURCE_EXHAUSTED, a busy or locked database or an I/O error UNAVAILABLE
// (retry later), a read-only one FAILED_PRECONDITION, a corrupt one
// DATA_LOSS, anything else INTERNAL.
absl::Status SqliteError(sqlite3* db, absl::string_view context);

// Caps the database at about `max_bytes` (SQLite's max_page_count); writes
// beyond it fail with RESOURCE_EXHAUSTED, as on a full disk. 0: no cap.
absl::Status LimitDatabaseSize(sqlite3* db, int64_t max_bytes);

// A prepared statement that finalizes itself.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) : db_(db) {
    rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  absl::Status status() const;
  void Bind(int i, int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  void Bind(int i, absl::string_view v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()),
                      SQLITE_TRANSIENT);
  }
  void Bind(int i, const std::string& v) { Bind(i, absl::string_view(v)); }
  void Bind(int i, const char* v) { Bind(i, absl::string_view(v)); }
  void BindBlob(int i, absl::string_view v) {
    sqlite3_bind_blob(stmt_, i, v.data(), static_cast<int>(v.size()),
                      SQLITE_TRANSIENT);
  }
  void BindDouble(int i, double v) { sqlite3_bind_double(stmt_, i, v); }
  void BindNull(int i) { sqlite3_bind_null(stmt_, i); }
  int Step() { return sqlite3_step(stmt_); }
  // Makes the statement reusable with new bindings.
  void Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  int64_t Int(int col) { return sqlite3_column_int64(stmt_, col); }
  bool IsNull(int col) {
    return sqlite3_column_type(stmt_, col) == SQLITE_NULL;
  }
  std::string Blob(int col) {
    const void* p = sqlite3_column_blob(stmt_, col);
    return std::string(static_cast<const char*>(p),
                       sqlite3_column_bytes(stmt_, col));
  }
  // Valid until the next Step/Reset.
  absl::string_view BlobView(int col) {
    const void* p = sqlite3_column_blob(stmt_, col);
    return absl::string_view(static_cast<const char*>(p),
                             sqlite3_column_bytes(stmt_, col));
  }
  std::string Text(int col) {
    const unsigned char* p = sqlite3_column_text(stmt_, col);
    return p ? std::string(reinterpret_cast<const char*>(p),
                           sqlite3_column_bytes(stmt_, col))
             : std::string();
  }
  // OK for SQLITE_DONE / SQLITE_ROW, SqliteError otherwise.
  absl::Status Done(int rc) const;

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  int rc_;
};

}  // namespace rl

#endif  // RL_COMMON_SQLITE_UTIL_H_
