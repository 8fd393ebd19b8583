#pragma once
// The local measurement backend: Python worker processes (src/dtx/worker.py) driven
// over JSON lines (docs/worker-protocol.md), placed and handled by the measurement scheduler
// (src/MeasurementScheduler.h, the Ray backend's too) on one node, this machine.
//
// - N compile workers share one queue; one timing worker per GPU (CUDA_VISIBLE_DEVICES set to
//   that GPU), or one on the Triton interpreter when there is no GPU. A Measure request goes to
//   a compile worker first and then to a timing worker, so the process that owns a GPU never
//   compiles: every worker of a pool shares one TRITON_CACHE_DIR.
// - Bounded: at most `capacity` requests are in the pool at once; submit blocks beyond that.
// - A request that gets no reply within its timeout kills its worker (`timeout`); a worker that
//   dies during a request costs that request only (`crashed`); either way a new worker is
//   started for the requests queued behind. A worker that reports a CUDA error is replaced.
// - No orphans: each worker runs in its own process group with PR_SET_PDEATHSIG=SIGKILL (it dies
//   with the pool thread that started it, hence with the parent process even under SIGKILL),
//   and shutdown kills every group.
#include "dtx/Measurement.h"

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace dtx {

struct PoolOptions {
  std::filesystem::path python;        // default: default_worker_python()
  std::filesystem::path worker_script; // default: default_worker_script()
  std::vector<std::string> extra_args; // appended to the worker's command line
  int compile_workers = 1;             // 0: Measure requests go straight to a timing worker
  /// GPU indices, one timing worker each; empty: one timing worker without a GPU (interpreter).
  std::vector<int> gpus;
  std::filesystem::path triton_cache_dir; // empty: a fresh directory, removed on shutdown
  std::size_t capacity = 64;              // requests in the pool at once
  double startup_timeout_s = 300;         // a worker must say hello within this time
  bool eager_start = true;                // start the workers with the pool, not on demand
  /// A timing worker's request carries the next queued one as `prefetch`, which the worker
  /// readies (import, kernel binaries) while the GPU works through this one's timed calls.
  bool prefetch = true;
  std::size_t stderr_tail_bytes = 4096;
  /// Receives each line a worker writes on standard error and the pool's own events
  /// ("worker started", restarts). Called from pool threads.
  std::function<void(const std::string& worker, const std::string& line)> log;
};

/// The project's `.venv/bin/python` (or $DTX_WORKER_PYTHON).
std::filesystem::path default_worker_python();
/// The worker of the dtx package installed for default_worker_python() (the module dtx.worker,
/// asked once), else src/dtx/worker.py under files_root(); $DTX_WORKER_SCRIPT overrides both.
std::filesystem::path default_worker_script();
/// Where `python` finds the module dtx.worker, or empty when it finds none.
std::filesystem::path package_worker_script(const std::filesystem::path& python);
/// `program` itself when it names a directory, else the first executable of that name on PATH
/// (as a shell would find it), else `program` unchanged.
std::filesystem::path find_program(const std::filesystem::path& program);
/// The GPUs visible to this process: $CUDA_VISIBLE_DEVICES if set (an empty value: none),
/// otherwise the /dev/nvidiaN device files.
std::vector<int> visible_gpus();
/// The GPUs a user names (`--gpus`, dtxd's `gpus`): indices separated by commas (`0,1`), each
/// once, or `none`: no GPU, one timing worker on the Triton interpreter (an empty list).
/// Throws std::invalid_argument saying what is wrong.
std::vector<int> parse_gpus(const std::string& text);
/// "" when `program` (a path, or a name looked up on PATH as find_program does) is an
/// executable file, else what is wrong: for `--python`, `--worker` and their settings.
std::string program_problem(const std::filesystem::path& program);

class WorkerPool final : public MeasurementBackend {
public:
  explicit WorkerPool(PoolOptions options);
  ~WorkerPool() override;
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  std::future<Result> submit(Request request, ResultCallback callback = {}) override;
  std::optional<std::future<Result>> try_submit(Request request,
                                                ResultCallback callback = {}) override;
  std::size_t withdraw(std::uint64_t owner) override;
  void shutdown() override;
  std::vector<WorkerInfo> timing_workers() const override;

  /// Process ids of the live workers (for tests and diagnostics).
  std::vector<long> worker_pids() const;
  /// Requests in the pool (queued or running).
  std::size_t in_flight() const;

  struct Impl;

private:
  std::unique_ptr<Impl> impl_;
};

} // namespace dtx
