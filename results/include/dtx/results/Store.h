#pragma once
// The results store: every exploration, schedule, generated module, measurement and baseline
// time, in one SQLite file (WAL mode, versioned schema with migrations). Used by the explorer
// and the server; knows neither (no compiler, no measurement types: plain rows).
//
// Thread-safe: one Store may be shared by threads (it serializes its own statements). Several
// processes may open the same file; SQLite's locking keeps them consistent. Every write is one
// statement or one transaction, so a process killed mid-write loses only that write.
//
// Errors: SQLite failures, and ids that name no row in the writing calls (set_*, add_*), throw
// StoreError; the reading calls answer nullopt or an empty list for an unknown id. Paging:
// `limit` < 0 means no limit. The schema and the rules below: docs/results-store.md.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace dtx::results {

/// A store that cannot be opened, migrated or written (message names the file and the cause).
class StoreError : public std::runtime_error {
public:
  /// `sqlite_code`: SQLite's result code when SQLite failed (extended codes kept), 0 for a cause
  /// of the store's own (an unknown id, a file of another program).
  explicit StoreError(const std::string& message, int sqlite_code = 0)
      : std::runtime_error(message), sqlite_code_(sqlite_code) {}
  int sqlite_code() const { return sqlite_code_; }
  /// Whether the file could not be written for a reason outside the program: the disk is full,
  /// the file or its directory is read-only or not permitted, an I/O error. Such a write may
  /// succeed later, once the cause is gone; every other StoreError would fail again.
  bool unwritable() const;

private:
  int sqlite_code_;
};

/// Sizes of a shape keyed by label; printed canonically as `x=16,y=32` (labels sorted).
using Shape = std::map<std::string, std::int64_t>;
std::string shape_key(const Shape& shape);
/// Parses `x=16,y=32` (spaces allowed); throws std::invalid_argument naming the bad part.
Shape parse_shape(const std::string& text);

/// Where a measurement was taken: its identity for reuse is (device_name, device_kind, driver,
/// cuda, torch, triton).
struct Environment {
  std::string device_name; // "NVIDIA H100 80GB HBM3", or "cpu-interpreter"
  std::string device_kind; // "cuda" or "cpu-interpreter"
  std::string driver, cuda, torch, triton;
  std::string host; // the machine (not part of the identity)
  std::string node; // the cluster node, a Ray node id; empty for the local pool (not identity)
  std::optional<std::int64_t> gpu; // the GPU's index on its machine; none on the interpreter
};

struct TimeQuantiles { // milliseconds
  double median_ms = 0, q20_ms = 0, q80_ms = 0, min_ms = 0, max_ms = 0;
  std::int64_t samples = 0;
};

/// One check-and-time of one generated module (or one baseline) at one shape and dtype.
struct MeasurementRecord {
  std::int64_t id = 0;   // set by the store
  std::string code_hash; // SHA-256 of the generated module (empty for a baseline)
  std::string shape;     // shape_key
  std::string dtype;
  /// What was asked: e.g. `screen` (do_bench 5/20), `full` (thesis protocol). Part of the reuse
  /// key: a screening result never stands in for a full one.
  std::string protocol;
  std::string status; // ok, compile_error, out_of_resources, runtime_error, wrong_result,
                      // timeout, crashed
  std::string message;
  std::optional<TimeQuantiles> bench, gpu; // gpu: CUDA-graph time
  std::optional<double> host_us;           // host cost per call, back to back
  /// The ranking time in ms (the mean of the rounds' medians of the ranking clock), when ok.
  std::optional<double> time_ms;
  std::optional<double> time_stdev_ms;
  int rounds = 0;
  std::optional<double> rel_l2, max_abs; // error against the reference
  double compile_s = 0;
  Environment env;
  std::string created_at; // ISO 8601 UTC, set by the store
};

struct ExplorationSpec {
  std::string kernel;        // name used by best() and the UI
  std::string algorithm;     // the DT source
  std::string template_text; // the schedule template
  std::string template_file; // where it came from ("" when sent inline)
  std::string shape;         // shape_key
  std::string dtype;
  std::string strategy;      // exhaustive, random, evolution, local, tpe
  std::string settings_json; // everything else (budget, seed, protocol, baselines...) as JSON
};

enum class State { Queued, Running, Done, Failed, Cancelled };
std::string state_name(State state);
std::optional<State> parse_state(const std::string& name);

/// A process that runs explorations, named so that people can find it and so that a process on
/// the same machine can tell whether it is still alive (its pid and start time).
struct LeaseHolder {
  std::string instance;     // drawn once per process: what renews and releases a lease
  std::string program;      // "dtxd", "dtx explore"
  std::string host;         // the machine's name
  std::int64_t pid = 0;     // the process, in pid_scope
  std::int64_t started = 0; // its start time in clock ticks after boot (/proc/PID/stat)
  std::string pid_scope;    // the boot and PID namespace in which pid and started name it

  /// This process, under the given program name (the instance is the same for every call).
  static LeaseHolder this_process(const std::string& program);
  /// Whether this holder is a process of this machine's boot and PID namespace that has ended
  /// (no process with its pid, or one started at another time). False when that cannot be told
  /// (another machine): then only the lease's expiry frees it.
  bool gone() const;
  /// `dtxd (pid 4242 on host gpu-1)`.
  std::string describe() const;
};

/// An exploration's lease: the one process allowed to run it until `expires_at`, which it moves
/// on while it runs (docs/results-store.md, "Leases").
struct Lease {
  std::int64_t exploration_id = 0;
  LeaseHolder holder;
  std::string acquired_at, renewed_at, expires_at; // ISO 8601 UTC, the store's clock
  bool expired = false;                            // when read: expires_at had passed
  bool holder_gone = false; // when read: the holder's process had ended (LeaseHolder::gone)
  /// Whether it still keeps others out: neither expired nor held by an ended process.
  bool live() const { return !expired && !holder_gone; }
};

struct LeaseAttempt {
  bool acquired = false;
  /// The lease in force after the attempt: the caller's when acquired, else the holder's.
  Lease lease;
  /// When acquired: the lease it replaced (expired, or its holder had ended), if any.
  std::optional<Lease> replaced;
};

/// Whether the store's file can be written, as the latest write (or probe) found: a write that
/// failed for a reason StoreError::unwritable names makes it not ok until a write succeeds.
struct WriteHealth {
  bool ok = true;
  std::string error; // the failed write's message (StoreError::what)
  std::string since; // ISO 8601 UTC: when writes began to fail
};

/// measured, failed, best_ms and best_baseline_ms are computed from the rows when read. A
/// schedule's ranking measurement is its latest `full` one, else its latest `screen` one.
struct Exploration {
  std::int64_t id = 0;
  ExplorationSpec spec;
  State state = State::Queued;
  std::string message;           // why it failed or was cancelled
  std::int64_t space_size = 0;   // schedules before pruning
  std::int64_t candidates = 0;   // distinct valid schedules considered
  std::int64_t measured = 0;     // candidates with a stored result (any status, any protocol)
  std::int64_t failed = 0;       // of those, whose ranking measurement is not ok
  std::optional<double> best_ms; // fastest ok candidate's ranking time
  std::string best_protocol;     // best_ms's protocol: `full` or `screen`
  /// The fastest ok baseline's time_ms under best_protocol where there is one, else under any.
  std::optional<double> best_baseline_ms;
  std::string best_baseline_protocol;
  std::string device_name;
  std::string created_at, updated_at; // updated_at: last set_*, measurement or baseline
  std::optional<Lease> lease;         // who runs it, or ran it last without releasing it
};

/// A schedule of an exploration with its latest measurement per protocol.
struct RankedSchedule {
  std::int64_t schedule_id = 0;
  std::int64_t exploration_id = 0; // the exploration the schedule row belongs to
  std::string canonical;           // the canonical schedule text
  std::string code_hash;
  std::int64_t candidate_index = -1;       // its index in the exploration's space (-1: unknown)
  std::optional<MeasurementRecord> screen; // latest `screen` measurement, if any
  std::optional<MeasurementRecord> full;   // latest `full` measurement, if any
  int rank = 0; // 1 = fastest ok in the exploration; 0 = not ranked (failed or not measured)
};

/// The times of one protocol's latest measurement of a schedule (what a page plots).
struct ProtocolTimes {
  std::int64_t measurement_id = 0;
  std::string status;
  std::string message;                                                       // "" when ok
  std::optional<double> time_ms, median_ms, q20_ms, q80_ms, gpu_ms, host_us; // when ok
};

/// A schedule with the times of its latest `screen` and `full` measurements, in rank order.
struct ScheduleTimes {
  std::int64_t schedule_id = 0;
  std::string canonical;
  std::int64_t candidate_index = -1;
  int rank = 0; // as in RankedSchedule
  std::optional<ProtocolTimes> screen, full;
};

struct BaselineRecord {
  std::int64_t id = 0;
  std::int64_t exploration_id = 0;
  std::string name; // "torch", "torch.compile", "baselines.py:torch_geglu"...
  MeasurementRecord measurement;
};

/// The best correct schedule known for (kernel, shape, dtype, device).
struct Best {
  std::int64_t schedule_id = 0;
  std::int64_t exploration_id = 0;
  std::string kernel, canonical, code_hash, module_source, algorithm;
  MeasurementRecord measurement;
};

/// One measurement of a schedule in the history of its kernel text (across explorations,
/// devices and software versions).
struct HistoryEntry {
  std::int64_t exploration_id = 0;
  MeasurementRecord measurement;
};

struct RankedQuery {
  /// Only schedules whose ranking measurement (full, else screen) has this status (`ok`, ...);
  /// nullopt: all, unmeasured ones included. Applied after ranking: ranks stay the same.
  std::optional<std::string> status;
  std::int64_t offset = 0, limit = 100;
};

struct ExplorationQuery {
  std::optional<std::string> kernel;          // this name exactly
  std::optional<std::string> kernel_contains; // names holding this text, in any case
  std::optional<State> state;
  std::int64_t offset = 0, limit = 50; // newest first
};

class Store {
public:
  /// Opens (creating if needed) and migrates the database at `path` (":memory:" for tests).
  /// Throws StoreError for a file that is not a dtx store or is newer than this program.
  static std::unique_ptr<Store> open(const std::filesystem::path& path);
  /// Opens an existing store to read it only (`dtx results`, `dtx best`): nothing is written,
  /// so a read-only file, directory or file system will do. The writing calls then throw
  /// StoreError. A store of an older schema is opened with open(), which migrates it (and so
  /// needs it writable). Throws StoreError for a file that does not exist too.
  static std::unique_ptr<Store> open_read_only(const std::filesystem::path& path);
  virtual ~Store() = default;

  /// The schema version this program writes, and the one in the file.
  static int latest_version();
  virtual int version() const = 0;

  // --- explorations
  virtual std::int64_t create_exploration(const ExplorationSpec& spec) = 0;
  /// Several explorations in one transaction: all of them are stored, or none.
  virtual std::vector<std::int64_t>
  create_explorations(const std::vector<ExplorationSpec>& specs) = 0;
  /// A new exploration already leased to `holder`, in one transaction (so that no other process
  /// can take it up between its creation and its lease).
  virtual std::int64_t create_leased_exploration(const ExplorationSpec& spec,
                                                 const LeaseHolder& holder, double ttl_s) = 0;
  virtual std::optional<Exploration> exploration(std::int64_t id) const = 0;
  virtual std::vector<Exploration> explorations(const ExplorationQuery& query = {}) const = 0;
  /// Sets the state and replaces the message ("" clears it).
  virtual void set_state(std::int64_t id, State state, const std::string& message = "") = 0;
  virtual void set_space(std::int64_t id, std::int64_t space_size, std::int64_t candidates) = 0;
  virtual void set_device(std::int64_t id, const std::string& device_name) = 0;
  /// Pruned schedules of an exploration by reason code (replaces the previous counts).
  virtual void set_rejections(std::int64_t id,
                              const std::map<std::string, std::int64_t>& by_reason) = 0;
  virtual std::map<std::string, std::int64_t> rejections(std::int64_t id) const = 0;
  /// Explorations left `queued` or `running` (to resume after a restart), oldest first.
  virtual std::vector<Exploration> unfinished() const = 0;

  // --- leases: one process runs an exploration at a time
  /// Leases the exploration to `holder` for `ttl_s` seconds, in one write transaction, when no
  /// one holds it, when `holder` (its instance) holds it already (then it is renewed), when the
  /// lease expired, or when its holder's process has ended (LeaseHolder::gone). Otherwise it is
  /// refused and the attempt names the holder. StoreError for an unknown exploration.
  virtual LeaseAttempt acquire_lease(std::int64_t exploration_id, const LeaseHolder& holder,
                                     double ttl_s) = 0;
  /// Moves the lease's expiry to `ttl_s` seconds from now while `instance` holds it (expired or
  /// not: no one took it over); false when it does not hold it (taken over, or released).
  virtual bool renew_lease(std::int64_t exploration_id, const std::string& instance,
                           double ttl_s) = 0;
  /// Gives up the lease if `instance` holds it (otherwise changes nothing).
  virtual void release_lease(std::int64_t exploration_id, const std::string& instance) = 0;
  virtual std::optional<Lease> lease(std::int64_t exploration_id) const = 0;

  // --- health
  /// Whether the latest write to the file succeeded (writes of every call, probes included).
  virtual WriteHealth write_health() const = 0;
  /// Writes through this object that changed rows, since it opened: an answer read from the
  /// store while the count was N is current while it still is N (but for other processes'
  /// writes).
  virtual std::int64_t writes() const = 0;
  /// Writes a little (a row of its own, rewritten each time, with a 16 KiB blob) to find out
  /// whether the file can be written now; waits at most a second for another writer.
  virtual WriteHealth probe_write() = 0;
  /// What SQLite's `PRAGMA quick_check` finds wrong in the file (its first findings, one per
  /// line), or "" when nothing: damaged pages, which the queries that read them would fail on.
  /// Reads every page of the file.
  virtual std::string damage() const = 0;

  // --- schedules and generated modules
  /// The schedule's id, inserting it (and its module, stored once per code hash) if new.
  /// Idempotent: the same (exploration, canonical) pair always maps to one row; a repeated call
  /// changes that row only to fill a candidate index (-1) or a code hash ("") it lacked. An
  /// empty code hash (e.g. the schedule did not compile) stores no module.
  virtual std::int64_t add_schedule(std::int64_t exploration_id, const std::string& canonical,
                                    std::int64_t candidate_index, const std::string& code_hash,
                                    const std::string& module_source) = 0;
  virtual std::optional<std::string> module_source(const std::string& code_hash) const = 0;

  // --- measurements
  /// Stores a measurement of a schedule of an exploration; returns its id. The measurement is
  /// also found by find_measurement for every later exploration. `m.id` and `m.created_at` are
  /// ignored (the store sets them); an empty `m.code_hash` takes the schedule's, a different one
  /// is a StoreError.
  virtual std::int64_t add_measurement(std::int64_t schedule_id, MeasurementRecord m) = 0;
  /// Reuse: the latest measurement of this exact kernel (code hash) at this shape, dtype and
  /// protocol in this environment (device name and kind, driver, CUDA, torch, triton; not the
  /// host), if any. Measurements with status `timeout` or `crashed` are never returned: those
  /// depend on the machine's state, so the kernel is measured again (an earlier reusable
  /// measurement is returned instead, if there is one). Every other status is a property of the
  /// code and is reused. Baselines are never returned.
  virtual std::optional<MeasurementRecord>
  find_measurement(const std::string& code_hash, const std::string& shape, const std::string& dtype,
                   const std::string& protocol, const Environment& env) const = 0;
  /// Stores a baseline time of an exploration; returns the baseline's id.
  virtual std::int64_t add_baseline(std::int64_t exploration_id, const std::string& name,
                                    MeasurementRecord m) = 0;
  /// In the order they were added.
  virtual std::vector<BaselineRecord> baselines(std::int64_t exploration_id) const = 0;

  // --- queries
  /// An exploration's schedules, ok ones first by ranking time (the `full` time where there is
  /// one, else the `screen` time), then the failures, then those not measured yet (ties and
  /// the unranked in schedule id order). Paging applies after ranking.
  virtual std::vector<RankedSchedule> ranked(std::int64_t exploration_id,
                                             const RankedQuery& query = {}) const = 0;
  /// Every schedule of an exploration in the order of ranked(), with only its times: what
  /// ranked() gives, read at a fraction of the cost for tens of thousands of schedules.
  virtual std::vector<ScheduleTimes> schedule_times(std::int64_t exploration_id) const = 0;
  /// Candidate indices of an exploration that already have a measurement under `protocol`
  /// (for resuming without measuring twice).
  virtual std::vector<std::int64_t> measured_indices(std::int64_t exploration_id,
                                                     const std::string& protocol) const = 0;
  /// The best `ok` schedule for a kernel at a shape and dtype (full protocol preferred over
  /// screening), optionally on one device (substring of the device name, case-insensitive).
  /// Searches every exploration of the kernel and every measurement at that shape and dtype:
  /// the fastest `full` one if any, else the fastest `screen` one (other protocols: never).
  virtual std::optional<Best> best(const std::string& kernel, const std::string& shape,
                                   const std::string& dtype,
                                   const std::optional<std::string>& device = {}) const = 0;
  /// Every measurement of a generated module, oldest first.
  virtual std::vector<HistoryEntry> history(const std::string& code_hash) const = 0;
  /// One schedule with its latest measurements and its rank in its exploration.
  virtual std::optional<RankedSchedule> schedule(std::int64_t schedule_id) const = 0;
};

} // namespace dtx::results
