#pragma once
// Runs explorations for dtxd: a queue, up to `max_running` explorations measured at once on one
// shared backend (each gets an equal share of the pool's requests in flight), their progress for
// GET and server-sent events, cancel, and a shutdown that leaves running explorations queued in
// the store so that the next start resumes them.
//
// Several processes may share one store (another dtxd, `dtx explore --resume`): a process runs
// an exploration only while it holds its lease (results::Store::acquire_lease). An exploration
// another process runs is watched, never run here: this process takes it up when that lease
// ends (released with the exploration unfinished, expired, or its holder gone).
//
// What it holds in memory follows the store: an exploration whose run ended without the store
// recording how (a write failed: a full disk, a read-only file) is paused, still this process's
// and still cancellable, and resumed as soon as the store can be written again.
#include "Metrics.h"

#include "dtx/Explore.h"

#include <spdlog/logger.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace dtx::server {

class Scheduler {
public:
  /// `lease_s`: the lease on each exploration it runs (renewed every sixth of it).
  Scheduler(results::Store& store, MeasurementBackend& backend, int max_running,
            std::size_t in_flight_total, double lease_s, Metrics& metrics,
            std::shared_ptr<spdlog::logger> log);
  ~Scheduler();

  /// Queues a stored exploration (state `queued`), unless it is queued or running here already.
  void enqueue(std::int64_t id);
  /// Takes up an exploration found unfinished in the store (on start): queues it unless another
  /// process runs it, which it then watches.
  void adopt(const results::Exploration& x);

  enum class Cancel {
    Cancelled,  // queued, or left by its runner: stored `cancelled` now
    Cancelling, // running here: it stops, then is stored `cancelled`
    NotActive,  // done, failed or cancelled already
    Elsewhere,  // another process runs it (`holder` says which)
  };
  struct CancelResult {
    Cancel outcome = Cancel::NotActive;
    std::optional<results::Lease> holder;
  };
  CancelResult cancel(std::int64_t id);

  struct Event {
    std::uint64_t seq = 0;
    ExploreProgress progress;
    bool finished = false;
  };
  /// The latest progress of an exploration this process ran or runs (none while another
  /// process runs it).
  std::optional<Event> latest(std::int64_t id) const;
  /// Waits up to `timeout_s` for an event newer than `after`; the latest event either way.
  std::optional<Event> wait(std::int64_t id, std::uint64_t after, double timeout_s) const;

  /// This process, as the leases it holds name it.
  const results::LeaseHolder& holder() const { return holder_; }
  /// Why an exploration is paused (the store could not record its progress), if it is.
  std::optional<std::string> paused(std::int64_t id) const;
  std::size_t paused_count() const;
  /// Whether the store can be written: a probe write, at most once a second (in between, what
  /// the latest write found).
  results::WriteHealth store_health();
  std::size_t queue_depth() const;
  std::size_t running() const;
  /// Unfinished explorations of the store that another process runs, watched by this one.
  std::size_t elsewhere() const;
  /// Stops taking work and interrupts running explorations, which stay `queued` in the store.
  void shutdown();

private:
  struct Run {
    std::atomic<bool> cancel{false};    // by a user: stored `cancelled`
    std::atomic<bool> interrupt{false}; // by shutdown: stored `queued`, resumed on restart
  };
  void run_one(std::int64_t id);
  void run_exploration(std::int64_t id, Run& run, ExploreProgress& last);
  /// A run that ended with an error the exploration did not store: stored `failed` now (under
  /// its lease), or paused when the store cannot take that either.
  void run_failed(std::int64_t id, const std::string& why, Run& run, ExploreProgress last);
  /// Pauses an exploration whose progress the store could not record; the monitor resumes it
  /// (or stores the cancel asked meanwhile) once the store takes writes again.
  void pause(std::int64_t id, const std::string& why, const std::atomic<bool>* cancel,
             ExploreProgress last);
  /// Stores a cancel under the exploration's lease; false when another process holds that lease
  /// (`holder` then says which). Throws StoreError when the store cannot be written.
  bool store_cancel(std::int64_t id, results::State state, std::optional<results::Lease>& holder);
  void publish(std::int64_t id, const ExploreProgress& p, bool finished);
  /// Queues an exploration that no live lease keeps: under a lease of this process its state is
  /// set `queued` (so that nothing another process did meanwhile is overwritten), then it is
  /// queued here. False when another process holds it: then it is watched.
  bool take_up(std::int64_t id, const std::string& why);
  /// Watches an exploration another process runs.
  void watch(std::int64_t id, const results::Lease& lease);
  /// Every poll: explorations other processes ran that ended are dropped; those whose lease
  /// ended with the exploration unfinished are taken up; paused ones are resumed (or their
  /// cancel stored) when the store can be written.
  void monitor();
  void check_elsewhere(std::int64_t id);
  void retry_paused(std::int64_t id);

  results::Store& store_;
  MeasurementBackend& backend_;
  std::size_t in_flight_total_;
  double lease_s_;
  const results::LeaseHolder holder_ = results::LeaseHolder::this_process("dtxd");
  /// Each running exploration's share of the requests in flight: the total over the number
  /// running, so that requests of all of them alternate in the pool's queues.
  std::atomic<std::size_t> share_{2};
  void update_share();
  Metrics& metrics_;
  std::shared_ptr<spdlog::logger> log_;
  mutable std::mutex mutex_;
  std::condition_variable work_;
  mutable std::condition_variable events_cv_;
  std::condition_variable monitor_cv_;
  std::deque<std::int64_t> queue_;
  std::map<std::int64_t, std::shared_ptr<Run>> running_;
  std::map<std::int64_t, results::Lease> elsewhere_; // run by other processes: watched
  struct Paused {
    std::string why;
    bool cancel = false; // a cancel was asked before the run stopped: stored when it can be
  };
  std::map<std::int64_t, Paused> paused_;
  std::mutex probe_mutex_;
  std::chrono::steady_clock::time_point probed_{};
  std::map<std::int64_t, Event> events_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
  std::thread monitor_;
};

} // namespace dtx::server
