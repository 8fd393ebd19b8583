#pragma once
// The Ray backend: measurement workers on a Ray cluster (docs/ray.md).
//
// The measurement scheduler of the local pool (src/MeasurementScheduler.h) places the requests,
// with the cluster's nodes for slots: per node a timing slot per GPU and compile slots, each a
// Ray actor hosting the same worker (src/dtx/worker.py) as the local pool. One
// Python driver process (explorer/ray/dtx_ray_pool.py), which this class starts and speaks to
// over JSON lines, many commands in flight, starts and calls the actors for it and holds no rule
// of its own; results carry the node and GPU that measured them.
//
// - Bounded as the local pool: at most `capacity` requests at once; submit blocks beyond that.
// - The local pool's timeouts and fault rules, per node. An actor or node lost mid-run costs
//   nothing: its requests are sent again. If the driver itself exits, its requests fail
//   (`crashed`, with its standard error's end) and the next request starts a new one.
// - The constructor throws std::runtime_error with the explanation when the cluster cannot be
//   reached or has nothing to time on.
#include "dtx/Measurement.h"

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dtx {

struct RayOptions {
  /// The cluster: the head's HOST:PORT (as `ray start --head` prints it), `auto` (the cluster
  /// this machine belongs to), ray://HOST:PORT (Ray Client), or `local` (a Ray instance started
  /// by the driver on this machine).
  std::string address;
  std::filesystem::path python;        // default: default_worker_python()
  std::filesystem::path driver_script; // default: default_ray_driver()
  std::filesystem::path worker_script; // default: default_worker_script()
  /// Time on this many CPU actors with the Triton interpreter instead of on GPUs (testing).
  int interpreter_workers = 0;
  std::optional<int> compile_per_node;    // default: one per timing actor, at most the CPUs
  std::filesystem::path triton_cache_dir; // on every node; empty: one per run, removed after
  std::size_t capacity = 64;
  double startup_timeout_s = 300; // each actor's worker must say hello within this time
  double connect_timeout_s = 180; // the driver must connect and say hello within this time
  /// The end of the driver's and of each worker's standard error kept for a failure.
  std::size_t stderr_tail_bytes = 8192;
  /// Receives the driver's standard error lines and the backend's own events.
  std::function<void(const std::string& who, const std::string& line)> log;
};

/// explorer/ray/dtx_ray_pool.py of the source tree (or $DTX_RAY_DRIVER).
std::filesystem::path default_ray_driver();

class RayBackend final : public MeasurementBackend {
public:
  explicit RayBackend(RayOptions options);
  ~RayBackend() override;
  RayBackend(const RayBackend&) = delete;
  RayBackend& operator=(const RayBackend&) = delete;

  std::future<Result> submit(Request request, ResultCallback callback = {}) override;
  std::optional<std::future<Result>> try_submit(Request request,
                                                ResultCallback callback = {}) override;
  std::size_t withdraw(std::uint64_t owner) override;
  void shutdown() override;
  /// The timing actors' workers that are ready now (one per GPU of the cluster), each hello with
  /// its `node`, `host` and `gpu`.
  std::vector<WorkerInfo> timing_workers() const override;

  /// The driver's hello: the cluster's nodes, GPUs and CPUs, and the actors started on them
  /// (`timing_workers`, `compile_workers`).
  nlohmann::json cluster() const;
  /// Requests in the backend (queued or running).
  std::size_t in_flight() const;

  struct Impl;

private:
  std::unique_ptr<Impl> impl_;
};

} // namespace dtx
