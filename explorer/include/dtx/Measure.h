#pragma once
// `dtx measure` as a library: compile each schedule of a DT program with dtc, measure the
// kernels and the baselines through a MeasurementBackend, aggregate rounds, rank.
#include "dtx/Measurement.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dtx {

struct MeasureConfig {
  std::string source;                // the DT program
  std::string file_name = "<input>"; // for diagnostics
  /// Replacement schedules; empty: the file's own (unless `modules` are given).
  std::vector<std::string> schedules;
  /// Generated modules measured as they are (label, source): an edited module, say.
  std::vector<std::pair<std::string, std::string>> modules;
  std::vector<BaselineSpec> baselines;
  std::string func; // the compiled Func to measure; empty: the module's first
  std::map<std::string, std::int64_t> sizes;
  std::string dtype = "float16";
  int seed = 0;
  TimesSpec times;               // which times to take (at least one)
  std::string rank_by = "bench"; // bench, gpu or host
  int rounds = 1;                // each round times every candidate and baseline once
  bool shuffle = false;          // a fresh random order in every round
  unsigned order_seed = 0;       // the shuffles' seed
  double timeout_s = 300;        // per request and stage
  std::string device;            // a GPU model (Request::device); empty: any
  std::uint64_t owner = 0;       // Request::owner of every request
  /// Asked while results are awaited: once true, the requests not answered yet are abandoned
  /// (their results are dropped when they come) and run_measure returns what it has.
  std::function<bool()> stop;
};

/// The thesis' protocol (chapter 4.2): do_bench with 25 ms warm-up and 100 ms of repetitions,
/// several rounds, each in a fresh random order; the reported time is the mean of the rounds'
/// medians.
void apply_thesis_protocol(MeasureConfig& config);
constexpr int kThesisRounds = 5;

/// The rounds' medians of one time, and their mean and spread.
struct Aggregate {
  std::vector<double> values; // one per round (ms for bench and gpu, µs for host)
  double mean = 0, stdev = 0, min = 0, max = 0;
};
Aggregate aggregate(std::vector<double> values);

struct Entry {
  std::string label; // the schedule as given, or the baseline's name
  bool baseline = false;
  std::string schedule; // the canonical schedule (candidates)
  std::string status;   // a Status name, or "rejected" (dtc refused the schedule)
  std::string message;  // the first failure's message, or dtc's diagnostics
  std::optional<Check> check;
  std::map<std::string, Aggregate> times; // "bench", "gpu" (ms), "host" (µs per call)
  std::vector<Result> results;            // every round's result
  std::optional<double> speedup;          // best baseline's time / this time (> 1: faster)
  int rank = 0;                           // 1 = fastest; 0: not ranked (not ok)
};

struct Report {
  std::string func;
  std::vector<Entry> entries; // ranked: ok entries fastest first, then the rest
  std::vector<WorkerInfo> devices;
  bool comparable = false; // false: measured under the interpreter; times are not GPU times
  std::string rank_by;
  int rounds = 1;
  double wall_s = 0;
  /// Seconds from the start to the first result: worker start-up and the first compile, which
  /// steady-state throughput leaves out.
  double first_result_s = 0;
  double first_timed_s = 0; // the first result's timed_s
  double last_result_s = 0; // seconds from the start to the last ok result
};

/// Progress: called after each result (`done` of `total` requests so far).
using ProgressFn = std::function<void(std::size_t done, std::size_t total, const Entry& entry,
                                      const Result& result)>;

/// Compiles and measures. Throws std::runtime_error when the program itself does not compile
/// (no schedule can be measured) or names no Func to measure.
Report run_measure(const MeasureConfig& config, MeasurementBackend& backend,
                   const ProgressFn& progress = {});

std::string format_table(const Report& report);
nlohmann::json to_json(const Report& report);

/// How a report labels a baseline: `reference`, `FILE.py:FUNC`, `torch.compile(FILE.py:FUNC)`.
std::string baseline_label(const BaselineSpec& baseline);

/// The compiled Funcs of a generated module (its `COMPILED` tuple).
std::vector<std::string> compiled_funcs(const std::string& module_source);

} // namespace dtx
