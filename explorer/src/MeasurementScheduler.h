#pragma once
// The one measurement scheduler: where each request runs and what a fault costs, for every
// backend. The local pool (WorkerPool) and the Ray backend (RayBackend) differ only in their
// Placement: where a slot lives and how its worker is reached.
//
// - Slots: one worker each, compile or timing, on a node (this machine; a Ray node). A request
//   goes to the least loaded node with a timing slot of the request's device model (any model
//   when it names none): loaded = requests queued there and timing slots busy, per timing slot
//   of that model. A Measure request is compiled by a compile slot of that node, then timed by
//   a timing slot of the same node, which finds the kernels in the node's Triton cache. While a
//   node's compile slots start, requests wait for them; a node without any has its timing slots
//   compile. Baselines go straight to timing; a Compile request ends at the compile slot.
// - Prefetch: a timing slot's request carries the next Measure request that a compile slot has
//   passed on its node, reserved for that slot from then on, and more time for readying it.
// - Back-pressure: at most `capacity` requests in the scheduler; submit blocks beyond that.
// - Faults a request pays for: no reply within its time kills the worker (`timeout`); a worker
//   that dies during a request costs it (`crashed`). A worker found dead before it read a
//   request, or dying just after a CUDA error of the request before, costs nothing; one that
//   reports a CUDA error is replaced; one that cannot start fails the request it was started
//   for. Faults it does not pay for: a slot that is lost (a Ray actor or its node died) costs
//   nothing: its request and the one it was readying go back to the queue of a node that still
//   has timing slots, at most `max_resends` times each; the slot is opened again while its node
//   is alive, at most `max_restarts` times. Requests wait while no slot can take them and some
//   are starting; when none can, they fail with the reason. When the placement loses every slot
//   at once (the Ray driver died) the requests in the scheduler fail with its reason and the
//   next request plans the slots again.
#include "dtx/Measurement.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace dtx::detail {

using Clock = std::chrono::steady_clock;
using StopFn = std::function<bool()>;
using LogFn = std::function<void(const std::string& who, const std::string& line)>;

/// The worker process a slot reaches, at most one at a time: a child of this process, or the one
/// a Ray actor hosts. Used by the slot's thread only.
class WorkerLink {
public:
  enum class Io {
    Done,    // the operation completed
    Unsent,  // exchange: the worker was gone before it read the request
    Timeout, // exchange: no result by the deadline; the worker is still running
    Closed,  // start: the worker did not start; exchange: it ended during the request
    Stopped, // the scheduler is shutting down
    Lost,    // the slot itself is gone (a Ray actor died): lost_reason() says why
  };
  virtual ~WorkerLink() = default;
  /// Starts a worker and waits for its hello until `deadline`. Closed: `error` says why.
  virtual Io start(Clock::time_point deadline, const StopFn& stop, std::string& error) = 0;
  /// A worker was started and not yet killed or found dead.
  virtual bool has_worker() const = 0;
  /// It is still running, as far as the link can tell without asking.
  virtual bool running() = 0;
  /// Writes `request` and reads until the result with the request's id, into `reply`.
  virtual Io exchange(const nlohmann::json& request, Clock::time_point deadline, const StopFn& stop,
                      nlohmann::json& reply) = 0;
  /// Kills the worker (its process group).
  virtual void kill() = 0;
  /// After the worker closed its output: how it ended. The link has no worker afterwards.
  virtual std::string reap() = 0;
  /// The end of what the latest worker wrote on standard error since the latest request.
  virtual std::string stderr_tail() const = 0;
  /// The latest worker's hello and process id (kept after it ended).
  virtual const WorkerInfo& info() const = 0;
  virtual long pid() const = 0;
  /// Called while the slot waits for work (the local link logs the worker's standard error).
  virtual void idle() {}
  virtual std::string lost_reason() const { return "the slot was lost"; }
};

struct SlotSpec {
  std::string name; // "compile-0", "timing-gpu1", "timing-1a2b3c4d-0"
  std::string node; // the node it lives on
  bool timing = false;
  nlohmann::json options = nlohmann::json::object(); // how the placement makes it
};

/// Where slots live.
class Placement {
public:
  virtual ~Placement() = default;
  /// The slots to open: at the start, and again after the placement lost them all. Throws
  /// std::runtime_error saying why none can be placed.
  virtual std::vector<SlotSpec> plan() = 0;
  /// Opens a slot (the `restarts`-th time it is opened again), its worker not started. Nullptr
  /// with `error` when it cannot be placed. Called on the slot's thread, which lives as long as
  /// the link.
  virtual std::unique_ptr<WorkerLink> open(const SlotSpec& spec, int restarts, const StopFn& stop,
                                           std::string& error) = 0;
  /// Whether a lost slot of `node` may be opened there again.
  virtual bool node_alive(const std::string& node) = 0;
};

struct SchedulerOptions {
  std::size_t capacity = 64;
  double startup_timeout_s = 300; // a worker must say hello within this time
  bool eager_start = true;        // start each slot's worker when it opens, not on demand
  bool prefetch = true;
  int max_resends = 3;
  int max_restarts = 5;
  /// Who the scheduler's own events are logged as ("pool", "ray"); slots log as their name.
  std::string name = "pool";
  LogFn log;
};

class MeasurementScheduler {
public:
  MeasurementScheduler(Placement& placement, SchedulerOptions options);
  ~MeasurementScheduler(); // shuts down
  MeasurementScheduler(const MeasurementScheduler&) = delete;
  MeasurementScheduler& operator=(const MeasurementScheduler&) = delete;

  /// Plans and opens the slots. Throws what Placement::plan throws.
  void start();
  std::future<Result> submit(Request request, ResultCallback callback = {});
  std::optional<std::future<Result>> try_submit(Request request, ResultCallback callback = {});
  /// Fails the queued requests and the running ones (`crashed`, "the pool shut down") and ends
  /// every slot. Idempotent.
  /// MeasurementBackend::withdraw.
  std::size_t withdraw(std::uint64_t owner);
  void shutdown();
  /// The placement lost every slot at once: each request in the scheduler fails (`crashed`,
  /// `message`), the slots are dropped, and the next request plans them again.
  void placement_lost(const std::string& message, const std::string& tail);

  /// The hellos of the timing slots that are up.
  std::vector<WorkerInfo> timing_workers() const;
  std::vector<long> worker_pids() const;
  std::size_t in_flight() const;
  /// The slots of the latest plan.
  std::vector<SlotSpec> slots() const;

  struct Impl;

private:
  std::unique_ptr<Impl> impl_;
};

} // namespace dtx::detail
