#pragma once
// Measurement requests and results, and the interface of anything that can measure them
// (`MeasurementBackend`): the local process pool (`WorkerPool`) today, a distributed backend
// later. The wire format is docs/worker-protocol.md; these types mirror it.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dtx {

/// A request's outcome. The first five come from a worker, `Timeout` and `Crashed` from the pool.
enum class Status { Ok, CompileError, OutOfResources, RuntimeError, WrongResult, Timeout, Crashed };

std::string_view status_name(Status status);
std::optional<Status> parse_status(std::string_view name);

enum class RequestKind {
  Measure,  // check, then time, a compiled Func of a generated module
  Baseline, // time a Python function (or the module's reference) on the same inputs
  Compile,  // compile the module's kernels for the real argument signature, time nothing
};

struct BenchSettings {
  double warmup_ms = 25; // triton.testing.do_bench defaults, as in the thesis
  double rep_ms = 100;
};
struct GpuSettings {
  double rep_ms = 100;
};
struct HostSettings {
  int calls = 1000;
};
/// Which times to take; each one is optional.
struct TimesSpec {
  std::optional<BenchSettings> bench;
  std::optional<GpuSettings> gpu;
  std::optional<HostSettings> host;
};

struct BaselineSpec {
  bool reference = false; // the module's own reference_<func>
  std::string file;       // absolute path of a Python file...
  std::string function;   // ...and the function in it
  bool torch_compile = false;
};

struct Request {
  RequestKind kind = RequestKind::Measure;
  std::string module_source; // the generated module's text; the pool computes its SHA-256
  std::string func;          // a name in the module's COMPILED
  std::map<std::string, std::int64_t> sizes; // keyed by DT label
  std::string dtype = "float16";
  int seed = 0;
  bool check = true;
  TimesSpec times;
  std::optional<BaselineSpec> baseline; // for RequestKind::Baseline
  double timeout_s = 300;               // per stage: no reply within this time kills the worker
  /// A Measure request goes to a compile worker (a `compile` request) first, so that the timing
  /// worker finds its kernels in the shared Triton cache. Off for a module already compiled.
  bool compile_first = true;
  /// A GPU model (a worker's `device.name`): only timing workers of that model take the
  /// request. Empty: any. A backend with none of that model fails the request.
  std::string device;
  /// Who asked (an exploration's id; 0: nobody in particular): MeasurementBackend::withdraw
  /// takes back what that owner still has queued.
  std::uint64_t owner = 0;
};

struct Check {
  double max_abs = 0, max_rel = 0, rel_l2 = 0;
  std::int64_t mismatched = 0, unwritten = 0;
  double rtol = 0, atol = 0;
  std::int64_t outside = 0; // elements written outside the output (its guard zones)
};

struct TimeStats { // one `bench` or `gpu` time, in milliseconds
  double median_ms = 0, q20_ms = 0, q80_ms = 0, min_ms = 0, max_ms = 0;
  std::int64_t samples = 0;
};
struct HostTime {
  double per_call_us = 0;
  std::int64_t calls = 0;
};

/// What a worker said about itself in its hello line.
struct WorkerInfo {
  std::string role; // "compile" or "timing"
  long pid = 0;
  int protocol = 0;
  std::string python, torch, triton;
  std::string device_kind; // "cuda" or "cpu-interpreter"
  std::string device_name;
  bool comparable = false; // false: interpreter times, never compared with GPU times
  nlohmann::json raw;
};

struct Result {
  std::string id;
  Status status = Status::Crashed;
  std::string message;
  std::optional<Check> check;
  std::optional<TimeStats> bench, gpu;
  std::optional<HostTime> host;
  double compile_s = 0, import_s = 0, wall_s = 0;
  /// Seconds the worker spent taking the times (do_bench and the rest): the device's busy time.
  double timed_s = 0;
  /// Seconds the timing worker spent readying this request while it timed the one before
  /// (`prefetched` in the protocol), when it did.
  std::optional<double> prefetch_s;
  /// The compile stage's `compile_s` when the request went through a compile worker first.
  std::optional<double> ahead_compile_s;
  /// The worker that answered (the timing worker for a Measure request that reached it).
  std::optional<WorkerInfo> worker;
  /// Seconds from the start of the measurement to this result's arrival (set by dtx measure).
  std::optional<double> arrived_s;
  /// For `timeout` and `crashed`: the end of the worker's standard error.
  std::string stderr_tail;
  nlohmann::json raw; // the worker's message as received (empty for pool statuses)
};

using ResultCallback = std::function<void(const Result&)>;

/// Anything that checks and times requests. Implementations are thread-safe.
class MeasurementBackend {
public:
  virtual ~MeasurementBackend() = default;
  /// Queues a request; blocks while the backend is full (back-pressure). The callback, if any,
  /// runs on a backend thread before the future becomes ready; it must not block for long.
  virtual std::future<Result> submit(Request request, ResultCallback callback = {}) = 0;
  /// As submit, but returns nothing instead of blocking when the backend is full (a backend
  /// that has shut down fails the request at once, as submit does).
  virtual std::optional<std::future<Result>> try_submit(Request request,
                                                        ResultCallback callback = {}) = 0;
  /// The requests of `owner` (Request::owner) that no worker has started are failed at once
  /// (`crashed`, "withdrawn"), and those running go no further (a Measure request's timing
  /// after its compile), so that a stopped exploration frees the workers and the room it
  /// held. Returns how many were failed at once.
  virtual std::size_t withdraw(std::uint64_t owner) = 0;
  /// Stops accepting requests, fails the queued ones (`crashed`, "shut down") and stops every
  /// worker. Idempotent; the destructor calls it.
  virtual void shutdown() = 0;
  /// The timing workers' hello messages seen so far (one per device).
  virtual std::vector<WorkerInfo> timing_workers() const = 0;
};

/// As MeasurementBackend::submit, but while the backend is full it asks `stop` every 20 ms and
/// gives up (nothing) once it says true: an exploration that stops does not wait for room.
std::optional<std::future<Result>> submit_unless(MeasurementBackend& backend, Request request,
                                                 ResultCallback callback,
                                                 const std::function<bool()>& stop);

} // namespace dtx
