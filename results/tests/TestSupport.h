#pragma once
// Helpers shared by the store's tests: a temporary directory, a raw SQLite connection for
// looking at (or crafting) files behind the store's back, and sample rows.
#include "dtx/results/Store.h"

#include <sqlite3.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace dtx::results::testing {

/// A fresh directory under the system's temporary directory, removed with its contents.
class TempDir {
public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "dtx-results-XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::filesystem::path file(const std::string& name) const { return path_ / name; }

private:
  std::filesystem::path path_;
};

/// A plain SQLite connection (no store rules), for tests that inspect or craft files.
class RawDb {
public:
  explicit RawDb(const std::filesystem::path& path) {
    if (sqlite3_open(path.c_str(), &db_) != SQLITE_OK)
      throw std::runtime_error("cannot open " + path.string());
    sqlite3_busy_timeout(db_, 5000);
  }
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;
  ~RawDb() { sqlite3_close(db_); }
  sqlite3* handle() const { return db_; }

  void exec(const std::string& sql) {
    char* message = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
      std::string text = message ? message : "?";
      sqlite3_free(message);
      throw std::runtime_error(sql + ": " + text);
    }
  }
  /// The first column of the first row, as text ("" when there is no row).
  std::string text(const std::string& sql) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK)
      throw std::runtime_error(sql + ": " + sqlite3_errmsg(db_));
    std::string out;
    if (sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_text(stmt, 0))
      out = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    sqlite3_finalize(stmt);
    return out;
  }
  /// The first column of the first row, as an integer (0 when there is no row).
  std::int64_t integer(const std::string& sql) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK)
      throw std::runtime_error(sql + ": " + sqlite3_errmsg(db_));
    std::int64_t out = sqlite3_step(stmt) == SQLITE_ROW ? sqlite3_column_int64(stmt, 0) : 0;
    sqlite3_finalize(stmt);
    return out;
  }

private:
  sqlite3* db_ = nullptr;
};

inline Environment h100() {
  Environment env;
  env.device_name = "NVIDIA H100 80GB HBM3";
  env.device_kind = "cuda";
  env.driver = "550.54.15";
  env.cuda = "12.4";
  env.torch = "2.4.0";
  env.triton = "3.0.0";
  env.host = "node-1";
  return env;
}

inline Environment h200() {
  Environment env = h100();
  env.device_name = "NVIDIA H200";
  env.host = "node-2";
  return env;
}

inline MeasurementRecord measurement(const std::string& status, std::optional<double> time_ms,
                                     const std::string& protocol = "screen",
                                     const Environment& env = h100()) {
  MeasurementRecord m;
  m.shape = "x=16,y=32";
  m.dtype = "float32";
  m.protocol = protocol;
  m.status = status;
  m.time_ms = time_ms;
  m.rounds = 1;
  m.env = env;
  return m;
}

inline ExplorationSpec spec(const std::string& kernel = "geglu") {
  ExplorationSpec s;
  s.kernel = kernel;
  s.algorithm = "func " + kernel + "(x, y) = x * y;";
  s.template_text = "block(" + kernel + ", x, {16, 32});";
  s.shape = "x=16,y=32";
  s.dtype = "float32";
  s.strategy = "exhaustive";
  s.settings_json = R"({"budget": 100})";
  return s;
}

} // namespace dtx::results::testing
