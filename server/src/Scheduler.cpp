// The exploration runner of dtxd (see Scheduler.h).
#include "Scheduler.h"

namespace dtx::server {

Scheduler::Scheduler(results::Store& store, MeasurementBackend& backend, int max_running,
                     std::size_t in_flight_total, Metrics& metrics,
                     std::shared_ptr<spdlog::logger> log)
    : store_(store), backend_(backend), in_flight_total_(std::max<std::size_t>(2, in_flight_total)),
      metrics_(metrics), log_(std::move(log)) {
  for (int i = 0; i < max_running; ++i)
    threads_.emplace_back([this] {
      while (true) {
        std::int64_t id;
        {
          std::unique_lock lock(mutex_);
          work_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
          if (stopping_) return;
          id = queue_.front();
          queue_.pop_front();
          running_[id] = std::make_shared<std::atomic<bool>>(false);
          update_share();
        }
        metrics_.set_queue(queue_depth(), running());
        run_one(id);
        {
          std::lock_guard lock(mutex_);
          running_.erase(id);
          update_share();
        }
        metrics_.set_queue(queue_depth(), running());
      }
    });
}

Scheduler::~Scheduler() {
  shutdown();
}

void Scheduler::enqueue(std::int64_t id) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    queue_.push_back(id);
    events_[id] = Event{};
    events_[id].progress.phase = "queued";
  }
  work_.notify_one();
  metrics_.set_queue(queue_depth(), running());
}

bool Scheduler::cancel(std::int64_t id) {
  std::unique_lock lock(mutex_);
  for (auto it = queue_.begin(); it != queue_.end(); ++it)
    if (*it == id) {
      queue_.erase(it);
      lock.unlock();
      store_.set_state(id, results::State::Cancelled, "cancelled before it started");
      publish(id, {}, true);
      metrics_.set_queue(queue_depth(), running());
      return true;
    }
  auto r = running_.find(id);
  if (r == running_.end()) return false;
  user_cancelled_[id] = true;
  r->second->store(true);
  return true;
}

void Scheduler::run_one(std::int64_t id) {
  auto x = store_.exploration(id);
  if (!x) return;
  std::shared_ptr<std::atomic<bool>> flag;
  {
    std::lock_guard lock(mutex_);
    flag = running_.at(id);
  }
  ExploreJob job = job_of(*x);
  job.settings.in_flight_share = &share_;
  log_->info("exploration {} ({} at {}, {}) starts", id, x->spec.kernel, x->spec.shape,
             x->spec.strategy);
  std::uint64_t seen_done = 0, seen_failed = 0;
  ExploreProgress last; // what a failure publishes: the counts so far
  auto progress = [&](const ExploreProgress& p) {
    last = p;
    if (p.done > seen_done) {
      std::uint64_t failed = p.failed - std::min(p.failed, seen_failed);
      std::uint64_t all = p.done - seen_done;
      metrics_.add_measurements(all - std::min(all, failed), failed);
      seen_done = p.done;
      seen_failed = p.failed;
    }
    publish(id, p, false);
  };
  try {
    ExploreControl control;
    control.cancel = flag.get();
    control.holder = results::LeaseHolder::this_process("dtxd");
    ExploreSummary s = explore(job, backend_, store_, progress, control);
    bool by_user = false;
    {
      std::lock_guard lock(mutex_);
      by_user = user_cancelled_.count(id) > 0;
      user_cancelled_.erase(id);
    }
    if (s.state == results::State::Cancelled && !by_user) {
      // Interrupted by a shutdown: checkpointed, resumed by the next start.
      store_.set_state(id, results::State::Queued, "interrupted by a shutdown; resumes on restart");
      log_->info("exploration {} interrupted after {} measurements; it resumes on restart", id,
                 s.progress.done);
    } else {
      log_->info("exploration {} {}: {} measured, best {} ms", id, results::state_name(s.state),
                 s.progress.done, s.progress.best_ms ? std::to_string(*s.progress.best_ms) : "-");
    }
    metrics_.exploration_finished(results::state_name(s.state));
    publish(id, s.progress, true);
  } catch (const std::exception& e) {
    log_->error("exploration {} failed: {}", id, e.what());
    metrics_.exploration_finished("failed");
    last.phase = "failed";
    publish(id, last, true);
  }
}

void Scheduler::update_share() {
  share_ = std::max<std::size_t>(1, in_flight_total_ / std::max<std::size_t>(1, running_.size()));
}

void Scheduler::publish(std::int64_t id, const ExploreProgress& p, bool finished) {
  {
    std::lock_guard lock(mutex_);
    Event& e = events_[id];
    ++e.seq;
    e.progress = p;
    e.finished = finished;
  }
  events_cv_.notify_all();
}

std::optional<Scheduler::Event> Scheduler::latest(std::int64_t id) const {
  std::lock_guard lock(mutex_);
  auto it = events_.find(id);
  if (it == events_.end()) return std::nullopt;
  return it->second;
}

std::optional<Scheduler::Event> Scheduler::wait(std::int64_t id, std::uint64_t after,
                                                double timeout_s) const {
  std::unique_lock lock(mutex_);
  events_cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] {
    auto it = events_.find(id);
    return stopping_ || (it != events_.end() && it->second.seq > after);
  });
  auto it = events_.find(id);
  if (it == events_.end()) return std::nullopt;
  return it->second;
}

std::size_t Scheduler::queue_depth() const {
  std::lock_guard lock(mutex_);
  return queue_.size();
}

std::size_t Scheduler::running() const {
  std::lock_guard lock(mutex_);
  return running_.size();
}

void Scheduler::shutdown() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
    for (auto& [id, flag] : running_)
      flag->store(true);
  }
  work_.notify_all();
  events_cv_.notify_all();
  for (std::thread& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

} // namespace dtx::server
