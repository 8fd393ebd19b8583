#pragma once
// The Ray backend: measurement workers on a Ray cluster (docs/ray.md).
//
// One Python driver process (explorer/ray/dtx_ray_pool.py) connects to the cluster, starts a
// timing actor per GPU and compile actors on each node, each hosting the same worker
// (explorer/worker/dtx_worker.py) as the local pool, and routes requests to them. This class
// starts the driver and speaks to it over JSON lines, many requests in flight, as the local pool
// speaks to one worker; results carry the node and GPU that measured them.
//
// - Bounded as the local pool: at most `capacity` requests at once; submit blocks beyond that.
// - The driver enforces each request's timeout on its worker and re-sends the requests of an
//   actor or node lost mid-run. If the driver itself exits, its requests fail (`crashed`, with
//   its standard error's end) and the next request starts a new one.
// - The constructor throws std::runtime_error with the driver's explanation when the cluster
//   cannot be reached or has nothing to time on.
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
  void shutdown() override;
  /// The timing actors' workers that are ready now (one per GPU of the cluster), each hello with
  /// its `node`, `host` and `gpu`.
  std::vector<WorkerInfo> timing_workers() const override;

  /// The driver's hello: the cluster's nodes, GPUs and CPUs, the actors it starts.
  nlohmann::json cluster() const;
  /// Requests in the backend (queued or running).
  std::size_t in_flight() const;

  struct Impl;

private:
  std::unique_ptr<Impl> impl_;
};

} // namespace dtx
