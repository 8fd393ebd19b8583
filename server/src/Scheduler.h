#pragma once
// Runs explorations for dtxd: a queue, up to `max_running` explorations measured at once on one
// shared backend (each gets an equal share of the pool's requests in flight), their progress for
// GET and server-sent events, cancel, and a shutdown that leaves running explorations queued in
// the store so that the next start resumes them.
#include "Metrics.h"

#include "dtx/Explore.h"

#include <spdlog/logger.h>

#include <atomic>
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
  Scheduler(results::Store& store, MeasurementBackend& backend, int max_running,
            std::size_t in_flight_total, Metrics& metrics, std::shared_ptr<spdlog::logger> log);
  ~Scheduler();

  /// Queues a stored exploration (state `queued`).
  void enqueue(std::int64_t id);
  /// Cancels a queued or running exploration; false when it is neither.
  bool cancel(std::int64_t id);

  struct Event {
    std::uint64_t seq = 0;
    ExploreProgress progress;
    bool finished = false;
  };
  /// The latest progress of an exploration this process ran or runs.
  std::optional<Event> latest(std::int64_t id) const;
  /// Waits up to `timeout_s` for an event newer than `after`; the latest event either way.
  std::optional<Event> wait(std::int64_t id, std::uint64_t after, double timeout_s) const;

  std::size_t queue_depth() const;
  std::size_t running() const;
  /// Stops taking work and interrupts running explorations, which stay `queued` in the store.
  void shutdown();

private:
  void run_one(std::int64_t id);
  void publish(std::int64_t id, const ExploreProgress& p, bool finished);

  results::Store& store_;
  MeasurementBackend& backend_;
  std::size_t in_flight_total_;
  /// Each running exploration's share of the requests in flight: the total over the number
  /// running, so that requests of all of them alternate in the pool's queues.
  std::atomic<std::size_t> share_{2};
  void update_share();
  Metrics& metrics_;
  std::shared_ptr<spdlog::logger> log_;
  mutable std::mutex mutex_;
  std::condition_variable work_;
  mutable std::condition_variable events_cv_;
  std::deque<std::int64_t> queue_;
  std::map<std::int64_t, std::shared_ptr<std::atomic<bool>>> running_; // id -> cancel flag
  std::map<std::int64_t, bool> user_cancelled_;
  std::map<std::int64_t, Event> events_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

} // namespace dtx::server
