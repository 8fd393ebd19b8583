// The Store on SQLite. Every public call takes the store's mutex, names itself for error
// messages, and runs in one statement or one transaction (writes: BEGIN IMMEDIATE; reads of
// several statements: one snapshot). See docs/results-store.md for the schema and the rules.
#include "Database.h"
#include "Schema.h"
#include "dtx/Sha256.h"
#include "dtx/results/Store.h"
#include <atomic>

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iterator>
#include <mutex>
#include <thread>
#include <type_traits>

namespace dtx::results {

namespace {

using detail::Database;
using detail::Statement;
using detail::Transaction;
using Op = Database::Operation;

#define DTX_NOW "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"

// The measurement columns that add_measurement writes, in bind order; reads add `id` before
// them and `created_at` after them.
constexpr const char* kMeasurementColumns[] = {
    "code_hash",     "shape",        "dtype",           "protocol",
    "status",        "message",      "bench_median_ms", "bench_q20_ms",
    "bench_q80_ms",  "bench_min_ms", "bench_max_ms",    "bench_samples",
    "gpu_median_ms", "gpu_q20_ms",   "gpu_q80_ms",      "gpu_min_ms",
    "gpu_max_ms",    "gpu_samples",  "host_us",         "time_ms",
    "time_stdev_ms", "rounds",       "rel_l2",          "max_abs",
    "compile_s",     "device_name",  "device_kind",     "driver",
    "cuda",          "torch",        "triton",          "host",
    "node",          "gpu"};
constexpr int kMeasurementWritten = static_cast<int>(std::size(kMeasurementColumns));
constexpr int kMeasurementRead = kMeasurementWritten + 2;

std::string measurement_columns(const std::string& alias) {
  std::string out = alias + ".id";
  for (const char* column : kMeasurementColumns)
    out += ", " + alias + "." + column;
  return out + ", " + alias + ".created_at";
}

std::string measurement_insert() {
  std::string columns = "schedule_id", values = "?";
  for (const char* column : kMeasurementColumns) {
    columns += ", ";
    columns += column;
    values += ", ?";
  }
  return "INSERT INTO measurements (" + columns + ") VALUES (" + values + ")";
}

void bind_quantiles(Statement& st, int first, const std::optional<TimeQuantiles>& q) {
  if (!q) {
    for (int i = 0; i < 6; ++i)
      st.bind_null(first + i);
    return;
  }
  st.bind(first, q->median_ms);
  st.bind(first + 1, q->q20_ms);
  st.bind(first + 2, q->q80_ms);
  st.bind(first + 3, q->min_ms);
  st.bind(first + 4, q->max_ms);
  st.bind(first + 5, q->samples);
}

/// Binds the written columns from parameter `first` on, in kMeasurementColumns order.
void bind_measurement(Statement& st, int first, const MeasurementRecord& m) {
  int i = first;
  st.bind(i++, m.code_hash);
  st.bind(i++, m.shape);
  st.bind(i++, m.dtype);
  st.bind(i++, m.protocol);
  st.bind(i++, m.status);
  st.bind(i++, m.message);
  bind_quantiles(st, i, m.bench);
  i += 6;
  bind_quantiles(st, i, m.gpu);
  i += 6;
  st.bind(i++, m.host_us);
  st.bind(i++, m.time_ms);
  st.bind(i++, m.time_stdev_ms);
  st.bind(i++, m.rounds);
  st.bind(i++, m.rel_l2);
  st.bind(i++, m.max_abs);
  st.bind(i++, m.compile_s);
  st.bind(i++, m.env.device_name);
  st.bind(i++, m.env.device_kind);
  st.bind(i++, m.env.driver);
  st.bind(i++, m.env.cuda);
  st.bind(i++, m.env.torch);
  st.bind(i++, m.env.triton);
  st.bind(i++, m.env.host);
  st.bind(i++, m.env.node);
  st.bind(i++, m.env.gpu);
}

std::optional<TimeQuantiles> read_quantiles(const Statement& st, int first) {
  if (st.is_null(first + 5)) return std::nullopt; // samples: NULL when there were no times
  TimeQuantiles q;
  q.median_ms = st.real(first);
  q.q20_ms = st.real(first + 1);
  q.q80_ms = st.real(first + 2);
  q.min_ms = st.real(first + 3);
  q.max_ms = st.real(first + 4);
  q.samples = st.int64(first + 5);
  return q;
}

/// Reads the columns of measurement_columns() from column `first` on.
MeasurementRecord read_measurement(const Statement& st, int first) {
  MeasurementRecord m;
  int i = first;
  m.id = st.int64(i++);
  m.code_hash = st.text(i++);
  m.shape = st.text(i++);
  m.dtype = st.text(i++);
  m.protocol = st.text(i++);
  m.status = st.text(i++);
  m.message = st.text(i++);
  m.bench = read_quantiles(st, i);
  i += 6;
  m.gpu = read_quantiles(st, i);
  i += 6;
  m.host_us = st.opt_real(i++);
  m.time_ms = st.opt_real(i++);
  m.time_stdev_ms = st.opt_real(i++);
  m.rounds = static_cast<int>(st.int64(i++));
  m.rel_l2 = st.opt_real(i++);
  m.max_abs = st.opt_real(i++);
  m.compile_s = st.real(i++);
  m.env.device_name = st.text(i++);
  m.env.device_kind = st.text(i++);
  m.env.driver = st.text(i++);
  m.env.cuda = st.text(i++);
  m.env.torch = st.text(i++);
  m.env.triton = st.text(i++);
  m.env.host = st.text(i++);
  m.env.node = st.text(i++);
  m.env.gpu = st.opt_int64(i++);
  m.created_at = st.text(i++);
  return m;
}

// A lease's columns (from `l`, the leases table) and whether it has expired.
const std::string kLeaseColumns =
    "l.exploration_id, l.instance, l.program, l.host, l.pid, l.started, l.pid_scope, "
    "l.acquired_at, l.renewed_at, l.expires_at, l.expires_at <= " DTX_NOW;

/// Reads the columns of kLeaseColumns from column `first` on (nullopt: no lease, a NULL join).
std::optional<Lease> read_lease(const Statement& st, int first) {
  if (st.is_null(first)) return std::nullopt;
  Lease l;
  int i = first;
  l.exploration_id = st.int64(i++);
  l.holder.instance = st.text(i++);
  l.holder.program = st.text(i++);
  l.holder.host = st.text(i++);
  l.holder.pid = st.int64(i++);
  l.holder.started = st.int64(i++);
  l.holder.pid_scope = st.text(i++);
  l.acquired_at = st.text(i++);
  l.renewed_at = st.text(i++);
  l.expires_at = st.text(i++);
  l.expired = st.int64(i++) != 0;
  l.holder_gone = l.holder.gone();
  return l;
}

/// Now, as the store writes times: 2026-01-02T03:04:05.678Z.
std::string utc_now() {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[80];
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms.count()));
  return text;
}

/// An SQLite date modifier `ttl_s` seconds ahead ("+30.000 seconds").
std::string seconds_ahead(double ttl_s) {
  char text[64];
  std::snprintf(text, sizeof text, "%+.3f seconds", ttl_s);
  return text;
}

const std::string kExplorationSelect =
    "SELECT e.id, e.kernel, a.source, t.text, e.template_file, e.shape, e.dtype, e.strategy, "
    "e.settings_json, e.state, e.message, e.space_size, e.candidates, e.device_name, "
    "e.created_at, e.updated_at, " +
    kLeaseColumns +
    " FROM explorations e JOIN algorithms a ON a.id = e.algorithm_id "
    "JOIN templates t ON t.id = e.template_id LEFT JOIN leases l ON l.exploration_id = e.id";

Exploration read_exploration(const Statement& st) {
  Exploration e;
  e.id = st.int64(0);
  e.spec.kernel = st.text(1);
  e.spec.algorithm = st.text(2);
  e.spec.template_text = st.text(3);
  e.spec.template_file = st.text(4);
  e.spec.shape = st.text(5);
  e.spec.dtype = st.text(6);
  e.spec.strategy = st.text(7);
  e.spec.settings_json = st.text(8);
  e.state = parse_state(st.text(9)).value_or(State::Queued); // the table's CHECK lists them
  e.message = st.text(10);
  e.space_size = st.int64(11);
  e.candidates = st.int64(12);
  e.device_name = st.text(13);
  e.created_at = st.text(14);
  e.updated_at = st.text(15);
  e.lease = read_lease(st, 16);
  return e;
}

// A schedule with its latest `full` and `screen` measurements and its rank group. The ranking
// key (schedules.rank_group, rank_ms) follows the ranking measurement, the latest `full` one
// else the latest `screen` one (see Schema.cpp, migration 2).
const std::string kScheduleSelect =
    "SELECT s.id, s.canonical, s.code_hash, s.candidate_index, s.rank_group, " +
    measurement_columns("f") + ", " + measurement_columns("sc") +
    " FROM schedules s"
    " LEFT JOIN measurements f ON f.id = s.full_id"
    " LEFT JOIN measurements sc ON sc.id = s.screen_id";

// ?1 exploration, ?2 status of the ranking measurement (NULL: all), ?3 limit, ?4 offset.
const std::string kRankedSql =
    kScheduleSelect +
    " WHERE s.exploration_id = ?1 AND (?2 IS NULL OR COALESCE(f.status, sc.status) = ?2)"
    " ORDER BY s.rank_group, s.rank_tier, s.rank_ms, s.id LIMIT ?3 OFFSET ?4";

// Keeps a schedule's latest measurements as one more arrives (?1 the schedule, ?2 the
// measurement, ?3 its protocol). Measurement ids only grow, so the new one is the latest.
const std::string kScheduleLatestSql =
    "UPDATE schedules SET"
    " screen_id = CASE WHEN ?3 = 'screen' THEN ?2 ELSE screen_id END,"
    " full_id = CASE WHEN ?3 = 'full' THEN ?2 ELSE full_id END"
    " WHERE id = ?1";

// Then its ranking key from its ranking measurement: the rule of migration 2's fill.
const std::string kScheduleRankSql =
    "UPDATE schedules SET (rank_group, rank_ms, rank_tier) = (SELECT"
    " CASE WHEN m.id IS NULL THEN 2"
    "  WHEN m.status = 'ok' AND m.time_ms IS NOT NULL THEN 0 ELSE 1 END,"
    " CASE WHEN m.status = 'ok' THEN m.time_ms END,"
    " CASE WHEN m.status = 'ok' AND m.time_ms IS NOT NULL AND schedules.full_id IS NULL"
    "  THEN 1 ELSE 0 END"
    " FROM (SELECT 1) LEFT JOIN measurements m"
    "  ON m.id = COALESCE(schedules.full_id, schedules.screen_id))"
    " WHERE id = ?1";

// Per exploration: schedules with any measurement, those not ranked, the fastest ranked time
// (all from the index schedules_by_rank).
const std::string kSummarySql =
    "SELECT COUNT(*) FILTER (WHERE rank_group < 3), COUNT(*) FILTER (WHERE rank_group = 1),"
    " (SELECT rank_ms FROM schedules WHERE exploration_id = ?1 AND rank_group = 0"
    "  ORDER BY rank_tier, rank_ms, id LIMIT 1),"
    " (SELECT rank_tier FROM schedules WHERE exploration_id = ?1 AND rank_group = 0"
    "  ORDER BY rank_tier, rank_ms, id LIMIT 1)"
    " FROM schedules WHERE exploration_id = ?1";

// The times of a schedule's latest `full` (f) and `screen` (sc) measurements, in rank order.
std::string times_columns(const std::string& a) {
  return a + ".id, " + a + ".status, CASE WHEN " + a + ".status = 'ok' THEN '' ELSE " + a +
         ".message END, " + a + ".time_ms, " + a + ".bench_median_ms, " + a + ".bench_q20_ms, " +
         a + ".bench_q80_ms, " + a + ".gpu_median_ms, " + a + ".host_us";
}
constexpr int kTimesRead = 9;
const std::string kTimesSql =
    "SELECT s.id, s.canonical, s.candidate_index, s.rank_group, " + times_columns("f") + ", " +
    times_columns("sc") +
    " FROM schedules s"
    " LEFT JOIN measurements f ON f.id = s.full_id"
    " LEFT JOIN measurements sc ON sc.id = s.screen_id"
    " WHERE s.exploration_id = ?1 ORDER BY s.rank_group, s.rank_tier, s.rank_ms, s.id";

std::optional<ProtocolTimes> read_times(const Statement& st, int first) {
  if (st.is_null(first)) return std::nullopt;
  ProtocolTimes t;
  t.measurement_id = st.int64(first);
  t.status = st.text(first + 1);
  t.message = st.text(first + 2);
  if (t.status == "ok") {
    t.time_ms = st.opt_real(first + 3);
    t.median_ms = st.opt_real(first + 4);
    t.q20_ms = st.opt_real(first + 5);
    t.q80_ms = st.opt_real(first + 6);
    t.gpu_ms = st.opt_real(first + 7);
    t.host_us = st.opt_real(first + 8);
  }
  return t;
}

RankedSchedule read_schedule(const Statement& st) {
  RankedSchedule r;
  r.schedule_id = st.int64(0);
  r.canonical = st.text(1);
  r.code_hash = st.text(2);
  r.candidate_index = st.int64(3);
  if (!st.is_null(5)) r.full = read_measurement(st, 5);
  if (!st.is_null(5 + kMeasurementRead)) r.screen = read_measurement(st, 5 + kMeasurementRead);
  return r;
}

class SqliteStore final : public Store {
public:
  explicit SqliteStore(const std::filesystem::path& path,
                       Database::Access access = Database::Access::ReadWrite)
      : db_(path, Database::kBusyTimeoutMs, access) {
    detail::check_store(db_.handle());
    if (access != Database::Access::ReadWrite) return; // read as it is (open_read_only)
    use_wal();                                         // ":memory:" stays in memory mode
    db_.exec("PRAGMA synchronous = NORMAL");
    db_.exec("PRAGMA foreign_keys = ON");
    detail::migrate_to(db_.handle(), detail::latest_version());
  }

  // The switch to WAL needs the file to itself: while another connection reads it (another
  // opener of a new file), SQLite answers "locked" at once rather than through the busy
  // handler, so the switch is tried again for as long as the busy timeout.
  void use_wal() {
    auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(Database::kBusyTimeoutMs);
    for (;;) {
      try {
        db_.exec("PRAGMA journal_mode = WAL");
        return;
      } catch (const StoreError& e) {
        if ((e.sqlite_code() & 0xff) != SQLITE_BUSY || std::chrono::steady_clock::now() > deadline)
          throw;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

  int version() const override {
    std::lock_guard lock(mutex_);
    return detail::schema_version(db_.handle());
  }

  // --- explorations

  std::int64_t create_exploration(const ExplorationSpec& spec) override {
    std::lock_guard lock(mutex_);
    Op op(db_, "create_exploration");
    return writing([&] {
      Transaction tx(db_, Transaction::Write);
      std::int64_t id = insert_exploration(spec);
      tx.commit();
      return id;
    });
  }

  std::vector<std::int64_t>
  create_explorations(const std::vector<ExplorationSpec>& specs) override {
    std::lock_guard lock(mutex_);
    Op op(db_, "create_explorations");
    return writing([&] {
      Transaction tx(db_, Transaction::Write);
      std::vector<std::int64_t> ids;
      for (const ExplorationSpec& spec : specs)
        ids.push_back(insert_exploration(spec));
      tx.commit();
      return ids;
    });
  }

  std::int64_t create_leased_exploration(const ExplorationSpec& spec, const LeaseHolder& holder,
                                         double ttl_s) override {
    std::lock_guard lock(mutex_);
    Op op(db_, "create_leased_exploration");
    return writing([&] {
      Transaction tx(db_, Transaction::Write);
      std::int64_t id = insert_exploration(spec);
      write_lease(id, holder, ttl_s);
      tx.commit();
      return id;
    });
  }

  std::optional<Exploration> exploration(std::int64_t id) const override {
    std::lock_guard lock(mutex_);
    Op op(db_, "exploration");
    Transaction tx(db_, Transaction::Read);
    std::optional<Exploration> e;
    {
      auto st = db_.prepare(kExplorationSelect + " WHERE e.id = ?1");
      st.bind(1, id);
      if (st.step()) e = read_exploration(st);
    }
    if (e) add_summary(*e);
    tx.commit();
    return e;
  }

  std::vector<Exploration> explorations(const ExplorationQuery& query) const override {
    std::lock_guard lock(mutex_);
    Op op(db_, "explorations");
    std::string sql = kExplorationSelect + " WHERE 1";
    if (query.kernel) sql += " AND e.kernel = ?1";
    if (query.state) sql += " AND e.state = ?2";
    // A part of the name, any case (ASCII): instr over lower(), not LIKE, whose % and _ are
    // wildcards in a name that holds them.
    if (query.kernel_contains) sql += " AND instr(lower(e.kernel), lower(?5)) > 0";
    sql += " ORDER BY e.id DESC LIMIT ?3 OFFSET ?4";
    Transaction tx(db_, Transaction::Read);
    std::vector<Exploration> out;
    {
      auto st = db_.prepare(sql);
      if (query.kernel) st.bind(1, *query.kernel);
      if (query.state) st.bind(2, state_name(*query.state));
      if (query.kernel_contains) st.bind(5, *query.kernel_contains);
      st.bind(3, query.limit).bind(4, query.offset);
      while (st.step())
        out.push_back(read_exploration(st));
    }
    for (auto& e : out)
      add_summary(e);
    tx.commit();
    return out;
  }

  void set_state(std::int64_t id, State state, const std::string& message) override {
    std::lock_guard lock(mutex_);
    Op op(db_, "set_state");
    writing([&] {
      auto st =
          db_.prepare("UPDATE explorations SET state = ?2, message = ?3, updated_at = " DTX_NOW
                      " WHERE id = ?1");
      st.bind(1, id).bind(2, state_name(state)).bind(3, message).run();
      if (db_.changes() == 0) no_exploration(id);
    });
  }

  void set_space(std::int64_t id, std::int64_t space_size, std::int64_t candidates) override {
    std::lock_guard lock(mutex_);
    Op op(db_, "set_space");
    writing([&] {
      auto st = db_.prepare("UPDATE explorations SET space_size = ?2, candidates = ?3, "
                            "updated_at = " DTX_NOW " WHERE id = ?1");
      st.bind(1, id).bind(2, space_size).bind(3, candidates).run();
      if (db_.changes() == 0) no_exploration(id);
    });
  }

  void set_device(std::int64_t id, const std::string& device_name) override {
    std::lock_guard lock(mutex_);
    Op op(db_, "set_device");
    writing([&] {
      auto st = db_.prepare("UPDATE explorations SET device_name = ?2, updated_at = " DTX_NOW
                            " WHERE id = ?1");
      st.bind(1, id).bind(2, device_name).run();
      if (db_.changes() == 0) no_exploration(id);
    });
  }

  void set_rejections(std::int64_t id,
                      const std::map<std::string, std::int64_t>& by_reason) override {
    std::lock_guard lock(mutex_);
    Op op(db_, "set_rejections");
    writing([&] {
      Transaction tx(db_, Transaction::Write);
      touch(id);
      db_.prepare("DELETE FROM rejections WHERE exploration_id = ?1").bind(1, id).run();
      for (const auto& [reason, count] : by_reason) {
        auto st = db_.prepare(
            "INSERT INTO rejections (exploration_id, reason, count) VALUES (?1, ?2, ?3)");
        st.bind(1, id).bind(2, reason).bind(3, count).run();
      }
      tx.commit();
    });
  }

  std::map<std::string, std::int64_t> rejections(std::int64_t id) const override {
    std::lock_guard lock(mutex_);
    Op op(db_, "rejections");
    std::map<std::string, std::int64_t> out;
    auto st = db_.prepare("SELECT reason, count FROM rejections WHERE exploration_id = ?1");
    st.bind(1, id);
    while (st.step())
      out[st.text(0)] = st.int64(1);
    return out;
  }

  std::vector<Exploration> unfinished() const override {
    std::lock_guard lock(mutex_);
    Op op(db_, "unfinished");
    Transaction tx(db_, Transaction::Read);
    std::vector<Exploration> out;
    {
      auto st =
          db_.prepare(kExplorationSelect + " WHERE e.state IN ('queued', 'running') ORDER BY e.id");
      while (st.step())
        out.push_back(read_exploration(st));
    }
    for (auto& e : out)
      add_summary(e);
    tx.commit();
    return out;
  }

  // --- leases

  LeaseAttempt acquire_lease(std::int64_t exploration_id, const LeaseHolder& holder,
                             double ttl_s) override {
    std::lock_guard lock(mutex_);
    Op op(db_, "acquire_lease");
    return writing([&] {
      // The write lock first: the lease read below is the one this transaction replaces.
      Transaction tx(db_, Transaction::Write);
      require_exploration(exploration_id);
      LeaseAttempt attempt;
      std::optional<Lease> current = lease_row(exploration_id);
      if (current && current->holder.instance != holder.instance) {
        if (current->live()) {
          attempt.lease = *current; // refused: nothing written (rolled back)
          return attempt;
        }
        attempt.replaced = current;
      }
      write_lease(exploration_id, holder, ttl_s);
      attempt.lease = lease_row(exploration_id).value();
      tx.commit();
      attempt.acquired = true;
      return attempt;
    });
  }

  bool renew_lease(std::int64_t exploration_id, const std::string& instance,
                   double ttl_s) override {
    std::lock_guard lock(mutex_);
    Op op(db_, "renew_lease");
    return writing([&] {
      auto st = db_.prepare("UPDATE leases SET renewed_at = " DTX_NOW
                            ", expires_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?3)"
                            " WHERE exploration_id = ?1 AND instance = ?2");
      st.bind(1, exploration_id).bind(2, instance).bind(3, seconds_ahead(ttl_s)).run();
      return db_.changes() > 0;
    });
  }

  void release_lease(std::int64_t exploration_id, const std::string& instance) override {
    std::lock_guard lock(mutex_);
    Op op(db_, "release_lease");
    writing([&] {
      db_.prepare("DELETE FROM leases WHERE exploration_id = ?1 AND instance = ?2")
          .bind(1, exploration_id)
          .bind(2, instance)
          .run();
    });
  }

  std::optional<Lease> lease(std::int64_t exploration_id) const override {
    std::lock_guard lock(mutex_);
    Op op(db_, "lease");
    return lease_row(exploration_id);
  }

  // --- health

  WriteHealth write_health() const override {
    std::lock_guard lock(health_mutex_);
    return health_;
  }
  std::int64_t writes() const override { return writes_.load(); }

  WriteHealth probe_write() override {
    std::lock_guard lock(mutex_);
    Op op(db_, "probe_write");
    db_.set_busy_timeout(1000); // a writer of another process: try again at the next probe
    try {
      writing([&] {
        db_.prepare("INSERT INTO write_probe (id, probed_at, pad) VALUES (1, " DTX_NOW
                    ", zeroblob(16384)) ON CONFLICT (id) DO UPDATE SET"
                    " probed_at = excluded.probed_at, pad = excluded.pad")
            .run();
      });
    } catch (const StoreError&) {
      // Recorded by writing() when the file cannot be written; a busy file tells nothing.
    }
    db_.set_busy_timeout(Database::kBusyTimeoutMs);
    return write_health();
  }

  std::string damage() const override {
    std::lock_guard lock(mutex_);
    Op op(db_, "quick_check");
    std::string found;
    try {
      auto st = db_.prepare("PRAGMA quick_check(10)");
      while (st.step()) {
        std::string line = st.text(0);
        if (line.rfind("*** in database", 0) == 0) line.erase(0, line.find('\n') + 1);
        if (line != "ok") found += (found.empty() ? "" : "\n") + line;
      }
    } catch (const StoreError& e) {
      // A page the check itself cannot read: that is the damage.
      found += (found.empty() ? "" : "\n") + std::string(e.what());
    }
    return found;
  }

  // --- schedules and generated modules

  std::int64_t add_schedule(std::int64_t exploration_id, const std::string& canonical,
                            std::int64_t candidate_index, const std::string& code_hash,
                            const std::string& module_source) override {
    std::lock_guard lock(mutex_);
    Op op(db_, "add_schedule");
    return writing([&] {
      Transaction tx(db_, Transaction::Write);
      require_exploration(exploration_id);
      if (!code_hash.empty()) {
        auto st = db_.prepare("INSERT INTO modules (code_hash, source) VALUES (?1, ?2) "
                              "ON CONFLICT (code_hash) DO NOTHING");
        st.bind(1, code_hash).bind(2, module_source).run();
      }
      std::int64_t id = 0;
      {
        // A repeated (exploration, canonical) keeps its row; it only learns a candidate index or
        // a code hash it did not have.
        auto st = db_.prepare(
            "INSERT INTO schedules (exploration_id, canonical, candidate_index, code_hash) "
            "VALUES (?1, ?2, ?3, ?4) ON CONFLICT (exploration_id, canonical) DO UPDATE SET "
            "candidate_index = CASE WHEN candidate_index < 0 THEN excluded.candidate_index "
            "ELSE candidate_index END, code_hash = COALESCE(code_hash, excluded.code_hash) "
            "RETURNING id");
        st.bind(1, exploration_id).bind(2, canonical).bind(3, candidate_index);
        if (code_hash.empty())
          st.bind_null(4);
        else
          st.bind(4, code_hash);
        if (!st.step()) db_.fail("the schedule row was not returned");
        id = st.int64(0);
        st.run();
      }
      tx.commit();
      return id;
    });
  }

  std::optional<std::string> module_source(const std::string& code_hash) const override {
    std::lock_guard lock(mutex_);
    Op op(db_, "module_source");
    auto st = db_.prepare("SELECT source FROM modules WHERE code_hash = ?1");
    st.bind(1, code_hash);
    if (!st.step()) return std::nullopt;
    return st.text(0);
  }

  // --- measurements

  std::int64_t add_measurement(std::int64_t schedule_id, MeasurementRecord m) override {
    std::lock_guard lock(mutex_);
    Op op(db_, "add_measurement");
    return writing([&] {
      Transaction tx(db_, Transaction::Write);
      std::int64_t exploration_id = 0;
      {
        auto st = db_.prepare("SELECT exploration_id, code_hash FROM schedules WHERE id = ?1");
        st.bind(1, schedule_id);
        if (!st.step()) db_.fail("no schedule " + std::to_string(schedule_id));
        exploration_id = st.int64(0);
        std::string schedule_hash = st.text(1);
        if (m.code_hash.empty())
          m.code_hash = schedule_hash;
        else if (!schedule_hash.empty() && m.code_hash != schedule_hash)
          db_.fail("the measurement's code hash " + m.code_hash + " is not schedule " +
                   std::to_string(schedule_id) + "'s (" + schedule_hash + ")");
      }
      std::int64_t id = insert_measurement(schedule_id, m);
      db_.prepare(kScheduleLatestSql).bind(1, schedule_id).bind(2, id).bind(3, m.protocol).run();
      db_.prepare(kScheduleRankSql).bind(1, schedule_id).run();
      touch(exploration_id);
      tx.commit();
      return id;
    });
  }

  std::optional<MeasurementRecord>
  find_measurement(const std::string& code_hash, const std::string& shape, const std::string& dtype,
                   const std::string& protocol, const Environment& env) const override {
    std::lock_guard lock(mutex_);
    Op op(db_, "find_measurement");
    auto st = db_.prepare(
        "SELECT " + measurement_columns("m") +
        " FROM measurements m WHERE m.code_hash = ?1 AND m.shape = ?2 AND m.dtype = ?3"
        " AND m.protocol = ?4 AND m.device_name = ?5 AND m.device_kind = ?6 AND m.driver = ?7"
        " AND m.cuda = ?8 AND m.torch = ?9 AND m.triton = ?10"
        " AND m.schedule_id IS NOT NULL AND m.status NOT IN ('timeout', 'crashed')"
        " ORDER BY m.id DESC LIMIT 1");
    st.bind(1, code_hash).bind(2, shape).bind(3, dtype).bind(4, protocol);
    st.bind(5, env.device_name).bind(6, env.device_kind).bind(7, env.driver);
    st.bind(8, env.cuda).bind(9, env.torch).bind(10, env.triton);
    if (!st.step()) return std::nullopt;
    return read_measurement(st, 0);
  }

  std::int64_t add_baseline(std::int64_t exploration_id, const std::string& name,
                            MeasurementRecord m) override {
    std::lock_guard lock(mutex_);
    Op op(db_, "add_baseline");
    return writing([&] {
      Transaction tx(db_, Transaction::Write);
      touch(exploration_id);
      std::int64_t measurement_id = insert_measurement(std::nullopt, m);
      {
        auto st = db_.prepare(
            "INSERT INTO baselines (exploration_id, name, measurement_id) VALUES (?1, ?2, ?3)");
        st.bind(1, exploration_id).bind(2, name).bind(3, measurement_id).run();
      }
      std::int64_t id = db_.last_insert_rowid();
      tx.commit();
      return id;
    });
  }

  std::vector<BaselineRecord> baselines(std::int64_t exploration_id) const override {
    std::lock_guard lock(mutex_);
    Op op(db_, "baselines");
    auto st = db_.prepare("SELECT b.id, b.exploration_id, b.name, " + measurement_columns("m") +
                          " FROM baselines b JOIN measurements m ON m.id = b.measurement_id"
                          " WHERE b.exploration_id = ?1 ORDER BY b.id");
    st.bind(1, exploration_id);
    std::vector<BaselineRecord> out;
    while (st.step()) {
      BaselineRecord b;
      b.id = st.int64(0);
      b.exploration_id = st.int64(1);
      b.name = st.text(2);
      b.measurement = read_measurement(st, 3);
      out.push_back(std::move(b));
    }
    return out;
  }

  // --- queries

  std::vector<RankedSchedule> ranked(std::int64_t exploration_id,
                                     const RankedQuery& query) const override {
    std::lock_guard lock(mutex_);
    Op op(db_, "ranked");
    std::int64_t offset = std::max<std::int64_t>(query.offset, 0);
    auto st = db_.prepare(kRankedSql);
    st.bind(1, exploration_id).bind(2, query.status).bind(3, query.limit).bind(4, offset);
    std::vector<RankedSchedule> out;
    while (st.step()) {
      out.push_back(read_schedule(st));
      out.back().exploration_id = exploration_id;
      // Ranked schedules come first, in rank order, in every listing that holds them (all, or
      // status `ok`), so a row's rank is its position.
      if (st.int64(4) == 0)
        out.back().rank = static_cast<int>(offset) + static_cast<int>(out.size());
    }
    return out;
  }

  std::vector<ScheduleTimes> schedule_times(std::int64_t exploration_id) const override {
    std::lock_guard lock(mutex_);
    Op op(db_, "schedule_times");
    auto st = db_.prepare(kTimesSql);
    st.bind(1, exploration_id);
    std::vector<ScheduleTimes> out;
    int ranked = 0;
    while (st.step()) {
      ScheduleTimes& t = out.emplace_back();
      t.schedule_id = st.int64(0);
      t.canonical = st.text(1);
      t.candidate_index = st.int64(2);
      if (st.int64(3) == 0) t.rank = ++ranked;
      t.full = read_times(st, 4);
      t.screen = read_times(st, 4 + kTimesRead);
    }
    return out;
  }

  std::vector<std::int64_t> measured_indices(std::int64_t exploration_id,
                                             const std::string& protocol) const override {
    std::lock_guard lock(mutex_);
    Op op(db_, "measured_indices");
    auto st = db_.prepare("SELECT DISTINCT s.candidate_index FROM schedules s"
                          " WHERE s.exploration_id = ?1 AND s.candidate_index >= 0"
                          " AND EXISTS (SELECT 1 FROM measurements m"
                          "  WHERE m.schedule_id = s.id AND m.protocol = ?2)"
                          " ORDER BY s.candidate_index");
    st.bind(1, exploration_id).bind(2, protocol);
    std::vector<std::int64_t> out;
    while (st.step())
      out.push_back(st.int64(0));
    return out;
  }

  std::optional<Best> best(const std::string& kernel, const std::string& shape,
                           const std::string& dtype,
                           const std::optional<std::string>& device) const override {
    std::lock_guard lock(mutex_);
    Op op(db_, "best");
    // The fastest `full` measurement if there is one, else the fastest `screen` one.
    for (const char* protocol : {"full", "screen"}) {
      auto st =
          db_.prepare("SELECT s.id, s.exploration_id, e.kernel, s.canonical, s.code_hash,"
                      " COALESCE(md.source, ''), a.source, " +
                      measurement_columns("m") +
                      " FROM measurements m"
                      " JOIN schedules s ON s.id = m.schedule_id"
                      " JOIN explorations e ON e.id = s.exploration_id"
                      " JOIN algorithms a ON a.id = e.algorithm_id"
                      " LEFT JOIN modules md ON md.code_hash = s.code_hash"
                      " WHERE m.shape = ?2 AND m.dtype = ?3 AND m.protocol = ?5 AND m.status = 'ok'"
                      " AND m.time_ms IS NOT NULL AND e.kernel = ?1"
                      " AND (?4 IS NULL OR instr(lower(m.device_name), lower(?4)) > 0)"
                      " ORDER BY m.time_ms, m.id LIMIT 1");
      st.bind(1, kernel).bind(2, shape).bind(3, dtype).bind(4, device).bind(5, protocol);
      if (!st.step()) continue;
      Best b;
      b.schedule_id = st.int64(0);
      b.exploration_id = st.int64(1);
      b.kernel = st.text(2);
      b.canonical = st.text(3);
      b.code_hash = st.text(4);
      b.module_source = st.text(5);
      b.algorithm = st.text(6);
      b.measurement = read_measurement(st, 7);
      return b;
    }
    return std::nullopt;
  }

  std::vector<HistoryEntry> history(const std::string& code_hash) const override {
    std::lock_guard lock(mutex_);
    Op op(db_, "history");
    auto st = db_.prepare("SELECT s.exploration_id, " + measurement_columns("m") +
                          " FROM measurements m JOIN schedules s ON s.id = m.schedule_id"
                          " WHERE m.code_hash = ?1 ORDER BY m.id");
    st.bind(1, code_hash);
    std::vector<HistoryEntry> out;
    while (st.step()) {
      HistoryEntry h;
      h.exploration_id = st.int64(0);
      h.measurement = read_measurement(st, 1);
      out.push_back(std::move(h));
    }
    return out;
  }

  std::optional<RankedSchedule> schedule(std::int64_t schedule_id) const override {
    std::lock_guard lock(mutex_);
    Op op(db_, "schedule");
    auto st = db_.prepare(kScheduleSelect + " WHERE s.id = ?1");
    st.bind(1, schedule_id);
    if (!st.step()) return std::nullopt;
    RankedSchedule r = read_schedule(st);
    {
      auto owner = db_.prepare("SELECT exploration_id FROM schedules WHERE id = ?1");
      owner.bind(1, schedule_id);
      if (owner.step()) r.exploration_id = owner.int64(0);
    }
    if (st.int64(4) == 0) {
      // One more than the ranked schedules of its exploration before it.
      auto before = db_.prepare(
          "SELECT COUNT(*) FROM schedules WHERE exploration_id = (SELECT exploration_id FROM "
          "schedules WHERE id = ?1) AND rank_group = 0 AND (rank_tier, rank_ms, id) < (SELECT "
          "rank_tier, rank_ms, id "
          "FROM schedules WHERE id = ?1)");
      before.bind(1, schedule_id);
      before.step();
      r.rank = static_cast<int>(before.int64(0)) + 1;
    }
    return r;
  }

private:
  /// Runs a write (under the store's mutex), keeping write_health: a failure for a reason
  /// StoreError::unwritable names marks the file unwritable; a write that changed rows marks
  /// it writable again (a refused lease or a renewal that found nothing wrote nothing, and
  /// tells nothing).
  template <class F> auto writing(F&& f) -> decltype(f()) {
    const std::int64_t before = db_.total_changes();
    try {
      if constexpr (std::is_void_v<decltype(f())>) {
        f();
        if (db_.total_changes() != before) wrote();
      } else {
        auto out = f();
        if (db_.total_changes() != before) wrote();
        return out;
      }
    } catch (const StoreError& e) {
      if (e.unwritable()) failed_to_write(e.what());
      throw;
    }
  }

  void wrote() {
    ++writes_;
    std::lock_guard lock(health_mutex_);
    health_ = WriteHealth{};
  }

  void failed_to_write(const std::string& error) {
    std::lock_guard lock(health_mutex_);
    if (health_.ok) health_.since = utc_now();
    health_.ok = false;
    health_.error = error;
  }

  [[noreturn]] void no_exploration(std::int64_t id) const {
    db_.fail("no exploration " + std::to_string(id));
  }

  void require_exploration(std::int64_t id) const {
    auto st = db_.prepare("SELECT 1 FROM explorations WHERE id = ?1");
    st.bind(1, id);
    if (!st.step()) no_exploration(id);
  }

  std::int64_t insert_exploration(const ExplorationSpec& spec) {
    std::int64_t algorithm = text_id("algorithms", "source", spec.algorithm);
    std::int64_t template_id = text_id("templates", "text", spec.template_text);
    auto st = db_.prepare("INSERT INTO explorations (kernel, algorithm_id, template_id, "
                          "template_file, shape, dtype, strategy, settings_json) "
                          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
    st.bind(1, spec.kernel).bind(2, algorithm).bind(3, template_id);
    st.bind(4, spec.template_file).bind(5, spec.shape).bind(6, spec.dtype);
    st.bind(7, spec.strategy).bind(8, spec.settings_json);
    st.run();
    return db_.last_insert_rowid();
  }

  std::optional<Lease> lease_row(std::int64_t exploration_id) const {
    auto st = db_.prepare("SELECT " + kLeaseColumns + " FROM leases l WHERE l.exploration_id = ?1");
    st.bind(1, exploration_id);
    if (!st.step()) return std::nullopt;
    return read_lease(st, 0);
  }

  /// Writes `holder`'s lease, replacing any other (the caller decided it may); a holder renewing
  /// its own keeps its acquisition time.
  void write_lease(std::int64_t exploration_id, const LeaseHolder& holder, double ttl_s) {
    auto st = db_.prepare(
        "INSERT INTO leases (exploration_id, instance, program, host, pid, started, pid_scope,"
        " acquired_at, renewed_at, expires_at)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, " DTX_NOW ", " DTX_NOW
        ", strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?8))"
        " ON CONFLICT (exploration_id) DO UPDATE SET"
        " acquired_at = CASE WHEN leases.instance = excluded.instance THEN leases.acquired_at"
        "  ELSE excluded.acquired_at END,"
        " instance = excluded.instance, program = excluded.program, host = excluded.host,"
        " pid = excluded.pid, started = excluded.started, pid_scope = excluded.pid_scope,"
        " renewed_at = excluded.renewed_at, expires_at = excluded.expires_at");
    st.bind(1, exploration_id).bind(2, holder.instance).bind(3, holder.program);
    st.bind(4, holder.host).bind(5, holder.pid).bind(6, holder.started).bind(7, holder.pid_scope);
    st.bind(8, seconds_ahead(ttl_s)).run();
  }

  /// Marks an exploration updated (throws for an unknown one).
  void touch(std::int64_t id) {
    db_.prepare("UPDATE explorations SET updated_at = " DTX_NOW " WHERE id = ?1").bind(1, id).run();
    if (db_.changes() == 0) no_exploration(id);
  }

  /// The id of a text stored once by its SHA-256 (algorithms, templates).
  std::int64_t text_id(const std::string& table, const std::string& column,
                       const std::string& text) {
    std::string hash = sha256_hex(text);
    db_.prepare("INSERT INTO " + table + " (sha256, " + column +
                ") VALUES (?1, ?2) ON CONFLICT (sha256) DO NOTHING")
        .bind(1, hash)
        .bind(2, text)
        .run();
    auto st = db_.prepare("SELECT id FROM " + table + " WHERE sha256 = ?1");
    st.bind(1, hash);
    if (!st.step()) db_.fail("no " + table + " row for " + hash);
    return st.int64(0);
  }

  std::int64_t insert_measurement(std::optional<std::int64_t> schedule_id,
                                  const MeasurementRecord& m) {
    static const std::string sql = measurement_insert();
    auto st = db_.prepare(sql);
    st.bind(1, schedule_id);
    bind_measurement(st, 2, m);
    st.run();
    return db_.last_insert_rowid();
  }

  /// measured, failed, best_ms and best_baseline_ms.
  void add_summary(Exploration& e) const {
    {
      auto st = db_.prepare(kSummarySql);
      st.bind(1, e.id);
      if (st.step()) {
        e.measured = st.int64(0);
        e.failed = st.int64(1);
        e.best_ms = st.opt_real(2);
        if (e.best_ms) e.best_protocol = st.int64(3) == 0 ? "full" : "screen";
      }
    }
    // The fastest baseline of the best schedule's protocol where there is one (a screening time
    // and a full one are not compared), else the fastest of any protocol.
    auto st = db_.prepare("SELECT m.time_ms, m.protocol FROM baselines b"
                          " JOIN measurements m ON m.id = b.measurement_id"
                          " WHERE b.exploration_id = ?1 AND m.status = 'ok'"
                          " AND m.time_ms IS NOT NULL"
                          " ORDER BY m.protocol = ?2 DESC, m.time_ms LIMIT 1");
    st.bind(1, e.id);
    st.bind(2, e.best_protocol.empty() ? std::string("full") : e.best_protocol);
    if (st.step()) {
      e.best_baseline_ms = st.opt_real(0);
      e.best_baseline_protocol = st.text(1);
    }
  }

  mutable std::mutex mutex_;
  mutable Database db_;
  mutable std::mutex health_mutex_; // apart: health is read while a write waits for the file
  WriteHealth health_;
  std::atomic<std::int64_t> writes_{0};
};

#undef DTX_NOW

} // namespace

std::unique_ptr<Store> Store::open(const std::filesystem::path& path) {
  return std::make_unique<SqliteStore>(path);
}

std::unique_ptr<Store> Store::open_read_only(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw StoreError(detail::error_text(path.string(), "open",
                                        "no such file (give the store with --db or $DTX_DB)"),
                     SQLITE_CANTOPEN);
  for (auto access : {Database::Access::ReadOnly, Database::Access::Immutable}) {
    try {
      auto store = std::make_unique<SqliteStore>(path, access);
      if (store->version() == latest_version()) return store;
      break; // an older schema: open() migrates it, which needs the file writable
    } catch (const StoreError& e) {
      // A WAL file whose index (-shm) does not exist and cannot be created, in a read-only
      // directory or file system: then no process is writing it, and it is read as it is.
      int code = e.sqlite_code() & 0xff;
      if (access == Database::Access::ReadOnly &&
          (code == SQLITE_READONLY || code == SQLITE_CANTOPEN))
        continue;
      throw;
    }
  }
  return open(path);
}

int Store::latest_version() {
  return detail::latest_version();
}

} // namespace dtx::results
