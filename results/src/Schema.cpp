#include "Schema.h"

#include "Database.h"

#include <sqlite3.h>

#include <array>
#include <string>

namespace dtx::results::detail {

namespace {

#define DTX_NOW "(strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))"

// Migration N (1-based) takes a file from version N-1 to version N.
constexpr std::array<const char*, 6> kMigrations = {
    // 1: the tables.
    R"sql(
CREATE TABLE algorithms (
  id INTEGER PRIMARY KEY,
  sha256 TEXT NOT NULL UNIQUE,
  source TEXT NOT NULL
);
CREATE TABLE templates (
  id INTEGER PRIMARY KEY,
  sha256 TEXT NOT NULL UNIQUE,
  text TEXT NOT NULL
);
CREATE TABLE explorations (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  kernel TEXT NOT NULL,
  algorithm_id INTEGER NOT NULL REFERENCES algorithms (id),
  template_id INTEGER NOT NULL REFERENCES templates (id),
  template_file TEXT NOT NULL DEFAULT '',
  shape TEXT NOT NULL,
  dtype TEXT NOT NULL,
  strategy TEXT NOT NULL,
  settings_json TEXT NOT NULL DEFAULT '',
  state TEXT NOT NULL DEFAULT 'queued'
    CHECK (state IN ('queued', 'running', 'done', 'failed', 'cancelled')),
  message TEXT NOT NULL DEFAULT '',
  space_size INTEGER NOT NULL DEFAULT 0,
  candidates INTEGER NOT NULL DEFAULT 0,
  device_name TEXT NOT NULL DEFAULT '',
  created_at TEXT NOT NULL DEFAULT )sql" DTX_NOW R"sql(,
  updated_at TEXT NOT NULL DEFAULT )sql" DTX_NOW R"sql(
);
CREATE TABLE rejections (
  exploration_id INTEGER NOT NULL REFERENCES explorations (id),
  reason TEXT NOT NULL,
  count INTEGER NOT NULL,
  PRIMARY KEY (exploration_id, reason)
) WITHOUT ROWID;
CREATE TABLE modules (
  code_hash TEXT PRIMARY KEY,
  source TEXT NOT NULL,
  created_at TEXT NOT NULL DEFAULT )sql" DTX_NOW R"sql(
);
CREATE TABLE schedules (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  exploration_id INTEGER NOT NULL REFERENCES explorations (id),
  canonical TEXT NOT NULL,
  candidate_index INTEGER NOT NULL DEFAULT -1,
  code_hash TEXT REFERENCES modules (code_hash),
  created_at TEXT NOT NULL DEFAULT )sql" DTX_NOW R"sql(,
  UNIQUE (exploration_id, canonical)
);
CREATE TABLE measurements (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  schedule_id INTEGER REFERENCES schedules (id),
  code_hash TEXT NOT NULL,
  shape TEXT NOT NULL,
  dtype TEXT NOT NULL,
  protocol TEXT NOT NULL,
  status TEXT NOT NULL,
  message TEXT NOT NULL,
  bench_median_ms REAL, bench_q20_ms REAL, bench_q80_ms REAL, bench_min_ms REAL,
  bench_max_ms REAL, bench_samples INTEGER,
  gpu_median_ms REAL, gpu_q20_ms REAL, gpu_q80_ms REAL, gpu_min_ms REAL,
  gpu_max_ms REAL, gpu_samples INTEGER,
  host_us REAL,
  time_ms REAL,
  time_stdev_ms REAL,
  rounds INTEGER NOT NULL,
  rel_l2 REAL,
  max_abs REAL,
  compile_s REAL NOT NULL,
  device_name TEXT NOT NULL,
  device_kind TEXT NOT NULL,
  driver TEXT NOT NULL,
  cuda TEXT NOT NULL,
  torch TEXT NOT NULL,
  triton TEXT NOT NULL,
  host TEXT NOT NULL,
  created_at TEXT NOT NULL DEFAULT )sql" DTX_NOW R"sql(
);
CREATE TABLE baselines (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  exploration_id INTEGER NOT NULL REFERENCES explorations (id),
  name TEXT NOT NULL,
  measurement_id INTEGER NOT NULL UNIQUE REFERENCES measurements (id)
);
)sql",
    // 2: each schedule's latest `screen` and `full` measurement and its ranking key (kept by
    // add_measurement, which must agree with the fill below), and indexes for the queries.
    // rank_group: 0 ranked (its ranking measurement, the latest `full` else the latest
    // `screen`, is ok with a time), 1 not ranked (any other result), 2 measured under other
    // protocols only, 3 not measured; rank_ms: the ranking time, in group 0 only.
    R"sql(
ALTER TABLE schedules ADD COLUMN screen_id INTEGER REFERENCES measurements (id);
ALTER TABLE schedules ADD COLUMN full_id INTEGER REFERENCES measurements (id);
ALTER TABLE schedules ADD COLUMN rank_group INTEGER NOT NULL DEFAULT 3;
ALTER TABLE schedules ADD COLUMN rank_ms REAL;
UPDATE schedules SET
  screen_id = (SELECT MAX(id) FROM measurements
               WHERE schedule_id = schedules.id AND protocol = 'screen'),
  full_id = (SELECT MAX(id) FROM measurements
             WHERE schedule_id = schedules.id AND protocol = 'full');
UPDATE schedules SET (rank_group, rank_ms) = (
  SELECT CASE WHEN m.id IS NULL THEN 2
              WHEN m.status = 'ok' AND m.time_ms IS NOT NULL THEN 0 ELSE 1 END,
         CASE WHEN m.status = 'ok' THEN m.time_ms END
  FROM (SELECT 1) LEFT JOIN measurements m
    ON m.id = COALESCE(schedules.full_id, schedules.screen_id))
WHERE EXISTS (SELECT 1 FROM measurements WHERE schedule_id = schedules.id);
CREATE INDEX schedules_by_rank ON schedules (exploration_id, rank_group, rank_ms, id);
CREATE INDEX schedules_by_code_hash ON schedules (code_hash);
CREATE INDEX explorations_by_kernel ON explorations (kernel, id);
CREATE INDEX explorations_by_state ON explorations (state, id);
CREATE INDEX measurements_by_schedule ON measurements (schedule_id, protocol, id);
CREATE INDEX measurements_by_key ON measurements (code_hash, shape, dtype, protocol, id);
CREATE INDEX measurements_by_result ON measurements (shape, dtype, protocol, status, time_ms);
CREATE INDEX baselines_by_exploration ON baselines (exploration_id, id);
)sql",
    // 3: schedules timed with the full protocol rank before those only screened (a screening
    // time is short do_bench runs, not comparable with the full protocol's mean of medians):
    // rank_tier 1 for a ranked schedule whose ranking measurement is `screen`, else 0.
    R"sql(
ALTER TABLE schedules ADD COLUMN rank_tier INTEGER NOT NULL DEFAULT 0;
UPDATE schedules SET rank_tier = CASE WHEN rank_group = 0 AND full_id IS NULL THEN 1 ELSE 0 END;
DROP INDEX schedules_by_rank;
CREATE INDEX schedules_by_rank ON schedules (exploration_id, rank_group, rank_tier, rank_ms, id);
)sql",
    // 4: where each measurement ran, once a backend spans machines: the node (a Ray node id;
    // empty for the local pool) and the GPU's index on it (NULL on the interpreter).
    R"sql(
ALTER TABLE measurements ADD COLUMN node TEXT NOT NULL DEFAULT '';
ALTER TABLE measurements ADD COLUMN gpu INTEGER;
)sql",
    // 5: leases, so that one process at a time runs an exploration: the holder (an instance id
    // drawn per process, its program, host, pid and start time, and the boot and PID namespace
    // in which the pid means that process) and the lease's times. No row: no one runs it.
    R"sql(
CREATE TABLE leases (
  exploration_id INTEGER PRIMARY KEY REFERENCES explorations (id),
  instance TEXT NOT NULL,
  program TEXT NOT NULL,
  host TEXT NOT NULL,
  pid INTEGER NOT NULL,
  started INTEGER NOT NULL,
  pid_scope TEXT NOT NULL,
  acquired_at TEXT NOT NULL,
  renewed_at TEXT NOT NULL,
  expires_at TEXT NOT NULL
);
)sql",
    // 6: one row that Store::probe_write rewrites, to find out whether the file can be written.
    R"sql(
CREATE TABLE write_probe (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  probed_at TEXT NOT NULL,
  pad BLOB NOT NULL
);
)sql",
};

#undef DTX_NOW

std::string newer_text(int found) {
  return "schema version " + std::to_string(found) + " is newer than this program's (" +
         std::to_string(latest_version()) + "); use a newer dtx";
}

[[noreturn]] void refuse(sqlite3* db, const std::string& why) {
  throw StoreError(error_text(file_name(db), "open", "not a dtx results store: " + why));
}

} // namespace

int latest_version() {
  return static_cast<int>(kMigrations.size());
}

int schema_version(sqlite3* db) {
  return static_cast<int>(pragma_int(db, "user_version", "schema version"));
}

namespace {

void check_snapshot(sqlite3* db) {
  // The first read of the header: a file that is not SQLite fails here.
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db,
                              "SELECT name FROM sqlite_master WHERE substr(name, 1, 7) <> "
                              "'sqlite_' ORDER BY name LIMIT 3",
                              -1, &stmt, nullptr);
  std::string tables;
  if (rc == SQLITE_OK) {
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      if (!tables.empty()) tables += ", ";
      tables += reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    }
  }
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE) {
    if ((rc & 0xff) == SQLITE_NOTADB) refuse(db, std::string(sqlite3_errmsg(db)));
    throw_sqlite_error(db, "open");
  }
  auto application_id = pragma_int(db, "application_id", "open");
  int version = schema_version(db);
  if (application_id == kApplicationId) {
    if (version > latest_version())
      throw StoreError(error_text(file_name(db), "open", newer_text(version)));
    return;
  }
  if (application_id != 0)
    refuse(db, "an SQLite database of another program (application_id " +
                   std::to_string(application_id) + ")");
  if (version != 0)
    refuse(db,
           "an SQLite database of another program (user_version " + std::to_string(version) + ")");
  if (!tables.empty()) refuse(db, "an SQLite database with other tables (" + tables + ")");
}

} // namespace

void check_store(sqlite3* db) {
  // One read transaction: a connection migrating a new file commits its application_id and
  // user_version together, and a reader between the two would take it for another program's.
  exec(db, "BEGIN", "open");
  try {
    check_snapshot(db);
  } catch (...) {
    if (!sqlite3_get_autocommit(db)) sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
  exec(db, "COMMIT", "open");
}

void migrate_to(sqlite3* db, int version) {
  if (version > latest_version())
    throw StoreError(
        error_text(file_name(db), "migrate", "no schema version " + std::to_string(version)));
  for (int step = 1; step <= version; ++step) {
    if (schema_version(db) >= step) continue;
    exec(db, "BEGIN IMMEDIATE", "migrate");
    try {
      int found = schema_version(db); // another connection may have migrated meanwhile
      if (found > latest_version())
        throw StoreError(error_text(file_name(db), "migrate", newer_text(found)));
      if (found < step) {
        std::string what = "migrate to version " + std::to_string(step);
        exec(db, kMigrations[step - 1], what);
        if (step == 1) exec(db, "PRAGMA application_id = " + std::to_string(kApplicationId), what);
        exec(db, "PRAGMA user_version = " + std::to_string(step), what);
      }
      exec(db, "COMMIT", "migrate");
    } catch (...) {
      if (!sqlite3_get_autocommit(db)) sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  }
  int found = schema_version(db);
  if (found > latest_version())
    throw StoreError(error_text(file_name(db), "migrate", newer_text(found)));
}

} // namespace dtx::results::detail
