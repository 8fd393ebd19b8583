#include "Database.h"

#include "dtx/results/Utf8.h"

#include <sqlite3.h>

#include <cctype>

namespace dtx::results::detail {

std::string error_text(std::string_view file, std::string_view operation, std::string_view cause) {
  std::string out = "results store '";
  out += file;
  out += "': ";
  out += operation;
  out += ": ";
  out += cause;
  return out;
}

std::string file_name(sqlite3* db) {
  const char* name = sqlite3_db_filename(db, "main");
  return name && *name ? name : ":memory:";
}

void throw_sqlite_error(sqlite3* db, std::string_view operation) {
  throw StoreError(error_text(file_name(db), operation, sqlite3_errmsg(db)),
                   sqlite3_extended_errcode(db));
}

void exec(sqlite3* db, const std::string& sql, std::string_view operation) {
  char* message = nullptr;
  if (int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message); rc != SQLITE_OK) {
    std::string cause = message ? message : sqlite3_errmsg(db);
    sqlite3_free(message);
    throw StoreError(error_text(file_name(db), operation, cause), rc);
  }
}

std::int64_t pragma_int(sqlite3* db, const std::string& name, std::string_view operation) {
  sqlite3_stmt* stmt = nullptr;
  std::string sql = "PRAGMA " + name;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK)
    throw_sqlite_error(db, operation);
  int rc = sqlite3_step(stmt);
  std::int64_t value = rc == SQLITE_ROW ? sqlite3_column_int64(stmt, 0) : 0;
  sqlite3_finalize(stmt);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) throw_sqlite_error(db, operation);
  return value;
}

// --- StoreError

} // namespace dtx::results::detail

namespace dtx::results {

bool StoreError::unwritable() const {
  switch (sqlite_code_ & 0xff) {
  case SQLITE_FULL:     // the disk (or a quota) is full
  case SQLITE_IOERR:    // a read or write of the file failed (EFBIG, EIO...)
  case SQLITE_READONLY: // a read-only file, directory or mount
  case SQLITE_CANTOPEN: // the journal or WAL cannot be created
  case SQLITE_PERM:     // the operating system refused access
  case SQLITE_NOLFS:
    return true;
  default:
    return false;
  }
}

} // namespace dtx::results

namespace dtx::results::detail {

// --- Statement

Statement::Statement(Database& db, sqlite3_stmt* stmt, bool* in_use)
    : db_(db), stmt_(stmt), in_use_(in_use) {}

Statement::~Statement() {
  if (in_use_) {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    *in_use_ = false;
  } else {
    sqlite3_finalize(stmt_);
  }
}

Statement& Statement::bind(int index, std::int64_t value) {
  if (sqlite3_bind_int64(stmt_, index, value) != SQLITE_OK) db_.fail();
  return *this;
}

Statement& Statement::bind(int index, double value) {
  if (sqlite3_bind_double(stmt_, index, value) != SQLITE_OK) db_.fail();
  return *this;
}

Statement& Statement::bind(int index, std::string_view value) {
  // Stored text is valid UTF-8: invalid bytes are replaced, never the row dropped.
  std::string text = valid_utf8(value);
  if (sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8) !=
      SQLITE_OK)
    db_.fail();
  return *this;
}

Statement& Statement::bind_null(int index) {
  if (sqlite3_bind_null(stmt_, index) != SQLITE_OK) db_.fail();
  return *this;
}

bool Statement::step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  db_.fail();
}

void Statement::run() {
  while (step()) {
  }
}

bool Statement::is_null(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

std::int64_t Statement::int64(int column) const {
  return sqlite3_column_int64(stmt_, column);
}

double Statement::real(int column) const {
  return sqlite3_column_double(stmt_, column);
}

std::string Statement::text(int column) const {
  const unsigned char* data = sqlite3_column_text(stmt_, column);
  if (!data) return {};
  return std::string(reinterpret_cast<const char*>(data),
                     static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column)));
}

std::optional<std::int64_t> Statement::opt_int64(int column) const {
  if (is_null(column)) return std::nullopt;
  return int64(column);
}

std::optional<double> Statement::opt_real(int column) const {
  if (is_null(column)) return std::nullopt;
  return real(column);
}

// --- Database

namespace {

/// `file:PATH?immutable=1`, the path's bytes other than letters, digits and `/._-~` escaped.
std::string immutable_uri(const std::string& path) {
  static const char* hex = "0123456789ABCDEF";
  std::string out = "file:";
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '/' || c == '.' || c == '_' || c == '-' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out + "?immutable=1";
}

} // namespace

Database::Database(const std::filesystem::path& path, int busy_timeout_ms, Access access)
    : file_(path.string()) {
  int flags = SQLITE_OPEN_NOMUTEX;
  std::string name = file_;
  if (access == Access::ReadWrite) {
    flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  } else {
    flags |= SQLITE_OPEN_READONLY;
    if (access == Access::Immutable) {
      flags |= SQLITE_OPEN_URI;
      name = immutable_uri(file_);
    }
  }
  int rc = sqlite3_open_v2(name.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string cause = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    int code = db_ ? sqlite3_extended_errcode(db_) : rc;
    sqlite3_close_v2(db_);
    throw StoreError(error_text(file_, operation_, cause), code);
  }
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_busy_timeout(db_, busy_timeout_ms);
}

Database::~Database() {
  for (auto& [sql, cached] : cache_)
    sqlite3_finalize(cached->stmt);
  sqlite3_close_v2(db_);
}

Statement Database::prepare(const std::string& sql) {
  auto it = cache_.find(sql);
  if (it != cache_.end() && !it->second->in_use) {
    it->second->in_use = true;
    return Statement(*this, it->second->stmt, &it->second->in_use);
  }
  sqlite3_stmt* stmt = nullptr;
  if (it == cache_.end()) {
    if (sqlite3_prepare_v3(db_, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr) !=
        SQLITE_OK)
      fail();
    auto& cached = cache_[sql];
    cached = std::make_unique<Cached>();
    cached->stmt = stmt;
    cached->in_use = true;
    return Statement(*this, stmt, &cached->in_use);
  }
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) fail();
  return Statement(*this, stmt, nullptr);
}

void Database::exec(const std::string& sql) {
  detail::exec(db_, sql, operation_);
}

std::int64_t Database::last_insert_rowid() const {
  return sqlite3_last_insert_rowid(db_);
}

std::int64_t Database::changes() const {
  return sqlite3_changes64(db_);
}

std::int64_t Database::total_changes() const {
  return sqlite3_total_changes64(db_);
}

void Database::set_busy_timeout(int ms) {
  sqlite3_busy_timeout(db_, ms);
}

void Database::fail() const {
  throw StoreError(error_text(file_, operation_, sqlite3_errmsg(db_)),
                   sqlite3_extended_errcode(db_));
}

void Database::fail(std::string_view cause) const {
  throw StoreError(error_text(file_, operation_, cause));
}

// --- Transaction

Transaction::Transaction(Database& db, Kind kind) : db_(db) {
  db_.prepare(kind == Write ? "BEGIN IMMEDIATE" : "BEGIN").run();
}

Transaction::~Transaction() {
  // SQLite may have rolled back already (after some errors); then there is nothing to undo.
  if (open_ && !sqlite3_get_autocommit(db_.handle()))
    sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
  db_.prepare("COMMIT").run();
  open_ = false;
}

} // namespace dtx::results::detail
