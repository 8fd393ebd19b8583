#pragma once
// A small RAII layer over the SQLite C API: one connection, its prepared statements (prepared
// once and reused, keyed by their SQL text), bind and read helpers, and transactions. Not
// thread-safe: the store serializes its own calls. Every SQLite error becomes a StoreError that
// names the file, the operation under way and SQLite's message.
#include "dtx/results/Store.h"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

struct sqlite3;
struct sqlite3_stmt;

namespace dtx::results::detail {

/// "results store '<file>': <operation>: <cause>".
std::string error_text(std::string_view file, std::string_view operation, std::string_view cause);
/// The file of a connection (":memory:" for an in-memory database).
std::string file_name(sqlite3* db);
/// Throws StoreError with the connection's file and its last error message.
[[noreturn]] void throw_sqlite_error(sqlite3* db, std::string_view operation);
/// Runs one or more statements that return nothing of interest.
void exec(sqlite3* db, const std::string& sql, std::string_view operation);
/// The integer value of `PRAGMA <name>`.
std::int64_t pragma_int(sqlite3* db, const std::string& name, std::string_view operation);

class Database;

/// A prepared statement in use. It is reset (bindings cleared) when this handle goes away, so
/// that no read transaction outlives it; cached statements go back to the cache.
class Statement {
public:
  Statement(Database& db, sqlite3_stmt* stmt, bool* in_use);
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  // Parameters are numbered from 1, as in SQLite.
  Statement& bind(int index, std::int64_t value);
  Statement& bind(int index, int value) { return bind(index, static_cast<std::int64_t>(value)); }
  Statement& bind(int index, double value);
  Statement& bind(int index, std::string_view value);
  Statement& bind_null(int index);
  template <class T> Statement& bind(int index, const std::optional<T>& value) {
    return value ? bind(index, *value) : bind_null(index);
  }

  /// One step: true when a row is ready, false when done.
  bool step();
  /// Steps to the end (for statements run for their effect).
  void run();

  // Columns are numbered from 0, as in SQLite; NULL reads as 0 or "".
  bool is_null(int column) const;
  std::int64_t int64(int column) const;
  double real(int column) const;
  std::string text(int column) const;
  std::optional<std::int64_t> opt_int64(int column) const;
  std::optional<double> opt_real(int column) const;

private:
  Database& db_;
  sqlite3_stmt* stmt_;
  bool* in_use_; // the cache's flag, or null when this handle owns a one-off statement
};

class Database {
public:
  static constexpr int kBusyTimeoutMs = 5000;
  enum class Access {
    ReadWrite, // created if needed
    ReadOnly,  // an existing file, never written (WAL: its -shm must exist or be creatable)
    /// An existing file read as if nothing could change it (SQLite's `immutable`): its WAL
    /// index is neither read nor created. Only for a file no process can be writing, as one on
    /// a read-only file system.
    Immutable,
  };
  /// Opens the file, with extended error codes and a busy timeout.
  explicit Database(const std::filesystem::path& path, int busy_timeout_ms = kBusyTimeoutMs,
                    Access access = Access::ReadWrite);
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
  ~Database();

  sqlite3* handle() const { return db_; }
  const std::string& file() const { return file_; }

  /// A statement prepared on first use and reused afterwards. While one handle of a given SQL
  /// text is in use, another request for it gets a one-off statement.
  Statement prepare(const std::string& sql);
  void exec(const std::string& sql);
  std::int64_t last_insert_rowid() const;
  /// Rows changed by the last INSERT, UPDATE or DELETE.
  std::int64_t changes() const;
  /// Rows changed by every INSERT, UPDATE and DELETE since the connection opened.
  std::int64_t total_changes() const;
  /// How long a statement waits for another connection's lock before SQLITE_BUSY.
  void set_busy_timeout(int ms);

  [[noreturn]] void fail() const;                       // with sqlite3_errmsg
  [[noreturn]] void fail(std::string_view cause) const; // with a cause of ours

  /// Names the operation under way in error messages, for the lifetime of this object.
  class Operation {
  public:
    Operation(Database& db, const char* name) : db_(db), previous_(db.operation_) {
      db.operation_ = name;
    }
    Operation(const Operation&) = delete;
    Operation& operator=(const Operation&) = delete;
    ~Operation() { db_.operation_ = previous_; }

  private:
    Database& db_;
    const char* previous_;
  };

private:
  friend class Statement;
  struct Cached {
    sqlite3_stmt* stmt = nullptr;
    bool in_use = false;
  };
  sqlite3* db_ = nullptr;
  std::string file_;
  const char* operation_ = "open";
  std::unordered_map<std::string, std::unique_ptr<Cached>> cache_;
};

/// A transaction: `Write` takes the write lock at once (BEGIN IMMEDIATE, waiting up to the busy
/// timeout), so that it never fails half-way for a lock; `Read` (BEGIN) sees one snapshot.
/// Rolled back unless committed.
class Transaction {
public:
  enum Kind { Read, Write };
  Transaction(Database& db, Kind kind);
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();
  void commit();

private:
  Database& db_;
  bool open_ = true;
};

} // namespace dtx::results::detail
