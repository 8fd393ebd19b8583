// The exploration runner of dtxd (see Scheduler.h).
#include "Scheduler.h"

#include <algorithm>
#include <chrono>

namespace dtx::server {

namespace {

bool finished_state(results::State s) {
  return s == results::State::Done || s == results::State::Failed || s == results::State::Cancelled;
}

} // namespace

Scheduler::Scheduler(results::Store& store, MeasurementBackend& backend, int max_running,
                     std::size_t in_flight_total, double lease_s, Metrics& metrics,
                     std::shared_ptr<spdlog::logger> log)
    : store_(store), backend_(backend), in_flight_total_(std::max<std::size_t>(2, in_flight_total)),
      lease_s_(lease_s), metrics_(metrics), log_(std::move(log)) {
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
          running_[id] = std::make_shared<Run>();
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
  monitor_ = std::thread([this] { monitor(); });
}

Scheduler::~Scheduler() {
  shutdown();
}

void Scheduler::enqueue(std::int64_t id) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    if (running_.count(id) || std::find(queue_.begin(), queue_.end(), id) != queue_.end())
      return; // one run per process: its lease would let a second one in
    elsewhere_.erase(id);
    paused_.erase(id);
    queue_.push_back(id);
    // A run again (resumed): its sequence goes on, so that event streams follow it.
    auto [it, fresh] = events_.try_emplace(id);
    Event& e = it->second;
    if (!fresh) ++e.seq;
    e.progress = ExploreProgress{};
    e.progress.phase = "queued";
    e.finished = false;
  }
  work_.notify_one();
  events_cv_.notify_all();
  metrics_.set_queue(queue_depth(), running());
}

void Scheduler::adopt(const results::Exploration& x) {
  if (x.lease && x.lease->live() && x.lease->holder.instance != holder_.instance) {
    log_->info("exploration {} ({} at {}) is run by {}; leaving it to that process", x.id,
               x.spec.kernel, x.spec.shape, x.lease->holder.describe());
    watch(x.id, *x.lease);
    return;
  }
  try {
    if (take_up(x.id, "resumed after a restart"))
      log_->info("exploration {} ({} at {}) resumes", x.id, x.spec.kernel, x.spec.shape);
  } catch (const results::StoreError& e) {
    pause(x.id, e.what(), nullptr, {});
  }
}

bool Scheduler::take_up(std::int64_t id, const std::string& why) {
  results::LeaseAttempt attempt = store_.acquire_lease(id, holder_, lease_s_);
  if (!attempt.acquired) {
    watch(id, attempt.lease);
    return false;
  }
  bool unfinished = false;
  try {
    auto x = store_.exploration(id);
    unfinished = x && !finished_state(x->state);
    if (x && x->state == results::State::Running) store_.set_state(id, results::State::Queued, why);
  } catch (...) {
    try {
      store_.release_lease(id, holder_.instance);
    } catch (const std::exception&) {
    }
    throw;
  }
  store_.release_lease(id, holder_.instance); // the runner takes it again for the run
  if (attempt.replaced)
    log_->info("exploration {}: {} stopped running it ({}); taking it up", id,
               attempt.replaced->holder.describe(),
               attempt.replaced->holder_gone ? "the process has ended" : "its lease expired");
  if (!unfinished) {
    {
      std::lock_guard lock(mutex_);
      elsewhere_.erase(id);
      paused_.erase(id);
    }
    publish(id, {}, true);
    return false;
  }
  enqueue(id);
  return true;
}

void Scheduler::watch(std::int64_t id, const results::Lease& lease) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    elsewhere_[id] = lease;
    paused_.erase(id);
  }
}

void Scheduler::monitor() {
  const auto poll = std::chrono::duration<double>(std::clamp(lease_s_ / 6, 0.2, 1.0));
  std::unique_lock lock(mutex_);
  while (!monitor_cv_.wait_for(lock, poll, [&] { return stopping_; })) {
    std::vector<std::int64_t> watched, paused;
    for (const auto& [id, lease] : elsewhere_)
      watched.push_back(id);
    for (const auto& [id, p] : paused_)
      paused.push_back(id);
    lock.unlock();
    for (std::int64_t id : watched)
      check_elsewhere(id);
    for (std::int64_t id : paused)
      retry_paused(id);
    lock.lock();
  }
}

void Scheduler::check_elsewhere(std::int64_t id) {
  try {
    auto x = store_.exploration(id);
    if (!x || finished_state(x->state)) {
      {
        std::lock_guard lock(mutex_);
        elsewhere_.erase(id);
      }
      publish(id, {}, true); // for its event streams: it ended
      return;
    }
    if (x->lease && x->lease->live()) {
      std::lock_guard lock(mutex_);
      if (elsewhere_.count(id)) elsewhere_[id] = *x->lease;
      return;
    }
    take_up(id, "taken up: its runner stopped");
  } catch (const std::exception& e) {
    log_->warn("exploration {}: cannot check on its runner: {}", id, e.what());
  }
}

void Scheduler::retry_paused(std::int64_t id) {
  bool cancel = false;
  {
    std::lock_guard lock(mutex_);
    auto p = paused_.find(id);
    if (p == paused_.end() || stopping_) return;
    cancel = p->second.cancel;
  }
  try {
    if (cancel) {
      std::optional<results::Lease> holder;
      if (!store_cancel(id, results::State::Cancelled, holder)) return; // now watched
      {
        std::lock_guard lock(mutex_);
        paused_.erase(id);
      }
      log_->info("exploration {} cancelled (the results store can be written again)", id);
      metrics_.exploration_finished("cancelled");
      publish(id, {}, true);
    } else if (take_up(id, "resumed: the results store can be written again")) {
      log_->info("exploration {} resumes: the results store can be written again", id);
    }
  } catch (const std::exception& e) {
    log_->debug("exploration {} stays paused: {}", id, e.what());
  }
}

Scheduler::CancelResult Scheduler::cancel(std::int64_t id) {
  CancelResult result;
  bool was_queued = false;
  {
    std::unique_lock lock(mutex_);
    if (auto r = running_.find(id); r != running_.end()) {
      r->second->cancel = true;
      // A run that has just been paused stores the cancel once the store takes it.
      if (auto p = paused_.find(id); p != paused_.end()) p->second.cancel = true;
      result.outcome = Cancel::Cancelling;
      return result;
    }
    if (auto q = std::find(queue_.begin(), queue_.end(), id); q != queue_.end()) {
      queue_.erase(q); // so that no runner starts it while the cancel is stored
      was_queued = true;
    }
  }
  // Queued here, paused, watched, or left by a runner that ended: stored `cancelled` under its
  // lease, unless another process holds that lease (then it is that process's to cancel).
  try {
    auto x = store_.exploration(id);
    if (!x || finished_state(x->state)) {
      result.outcome = Cancel::NotActive;
      return result;
    }
    if (!store_cancel(id, x->state, result.holder)) {
      result.outcome = Cancel::Elsewhere;
      return result;
    }
  } catch (...) {
    // Not stored: it stays as it was, queued here if it was.
    std::lock_guard lock(mutex_);
    if (was_queued && !stopping_) queue_.push_front(id);
    throw;
  }
  {
    std::lock_guard lock(mutex_);
    elsewhere_.erase(id);
    paused_.erase(id);
  }
  publish(id, {}, true);
  metrics_.set_queue(queue_depth(), running());
  result.outcome = Cancel::Cancelled;
  return result;
}

bool Scheduler::store_cancel(std::int64_t id, results::State state,
                             std::optional<results::Lease>& holder) {
  results::LeaseAttempt attempt = store_.acquire_lease(id, holder_, lease_s_);
  if (!attempt.acquired) {
    watch(id, attempt.lease);
    holder = attempt.lease;
    return false;
  }
  try {
    store_.set_state(id, results::State::Cancelled,
                     state == results::State::Queued ? "cancelled before it started" : "cancelled");
  } catch (...) {
    try {
      store_.release_lease(id, holder_.instance);
    } catch (const std::exception&) {
    }
    throw;
  }
  store_.release_lease(id, holder_.instance);
  return true;
}

void Scheduler::run_one(std::int64_t id) {
  std::shared_ptr<Run> run;
  {
    std::lock_guard lock(mutex_);
    run = running_.at(id);
  }
  ExploreProgress last; // what a failure publishes: the counts so far
  try {
    run_exploration(id, *run, last);
  } catch (const LeaseHeld& e) {
    log_->info("{}; leaving it to that process", e.what());
    watch(id, e.lease);
  } catch (const LeaseLost& e) {
    log_->warn("{}", e.what());
    watch(id, results::Lease{}); // the monitor reads the new holder
  } catch (const results::StoreError& e) {
    // The store did not record how the run ended: it is paused, not failed.
    pause(id, e.what(), &run->cancel, last);
  } catch (const std::exception& e) {
    run_failed(id, e.what(), *run, last);
  }
}

void Scheduler::run_exploration(std::int64_t id, Run& run, ExploreProgress& last) {
  auto x = store_.exploration(id);
  if (!x) return;
  if (finished_state(x->state)) { // finished meanwhile (by another process, or cancelled)
    publish(id, {}, true);
    return;
  }
  ExploreJob job = job_of(*x);
  job.settings.in_flight_share = &share_;
  ExploreControl control;
  control.cancel = &run.cancel;
  control.interrupt = &run.interrupt;
  control.interrupt_message = "interrupted by a shutdown; resumes on restart";
  control.holder = holder_;
  control.lease_s = lease_s_;
  control.renew_s = lease_s_ / 6;
  control.took_over = [&](const results::Lease& replaced) {
    log_->info("exploration {}: taking it over from {} ({})", id, replaced.holder.describe(),
               replaced.holder_gone ? "the process has ended" : "its lease expired");
  };
  log_->info("exploration {} ({} at {}, {}) starts", id, x->spec.kernel, x->spec.shape,
             x->spec.strategy);
  std::uint64_t seen_done = 0, seen_failed = 0;
  std::string phase;
  const auto started = std::chrono::steady_clock::now();
  auto progress = [&](const ExploreProgress& p) {
    last = p;
    if (p.phase != phase) { // each phase's start in the log: where a long exploration spent it
      phase = p.phase;
      log_->info("exploration {}: {} phase at {:.1f} s", id, phase,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    }
    if (p.done > seen_done) {
      std::uint64_t failed = p.failed - std::min(p.failed, seen_failed);
      std::uint64_t all = p.done - seen_done;
      metrics_.add_measurements(all - std::min(all, failed), failed);
      seen_done = p.done;
      seen_failed = p.failed;
    }
    publish(id, p, false);
  };
  ExploreSummary s = explore(job, backend_, store_, progress, control);
  if (s.withdrawn > 0)
    log_->info("exploration {}: {} queued requests withdrawn from the workers", id, s.withdrawn);
  if (s.state == results::State::Queued) {
    // Interrupted by a shutdown: checkpointed, resumed by the next start.
    log_->info("exploration {} interrupted after {} measurements; it resumes on restart", id,
               s.progress.done);
  } else {
    log_->info("exploration {} {}: {} measured, best {} ms", id, results::state_name(s.state),
               s.progress.done, s.progress.best_ms ? std::to_string(*s.progress.best_ms) : "-");
  }
  metrics_.exploration_finished(results::state_name(s.state));
  publish(id, s.progress, true);
}

void Scheduler::run_failed(std::int64_t id, const std::string& why, Run& run,
                           ExploreProgress last) {
  log_->error("exploration {} failed: {}", id, why);
  try {
    // explore() stores the failures it knows of; anything else is stored here, so that the
    // store does not say `running` about an exploration no one runs.
    auto x = store_.exploration(id);
    if (x && !finished_state(x->state)) {
      results::LeaseAttempt attempt = store_.acquire_lease(id, holder_, lease_s_);
      if (!attempt.acquired) {
        watch(id, attempt.lease);
        return;
      }
      store_.set_state(id, results::State::Failed, why);
      store_.release_lease(id, holder_.instance);
    }
  } catch (const results::StoreError& e) {
    pause(id, e.what(), &run.cancel, last);
    return;
  }
  metrics_.exploration_finished("failed");
  last.phase = "failed";
  publish(id, last, true);
}

void Scheduler::pause(std::int64_t id, const std::string& why, const std::atomic<bool>* cancel,
                      ExploreProgress last) {
  {
    std::lock_guard lock(mutex_); // the cancel flag is read under the lock cancel() sets it in
    if (stopping_) return;        // what the store holds is what the next start finds
    Paused& p = paused_[id];
    p.why = why;
    p.cancel = p.cancel || (cancel && cancel->load());
  }
  log_->warn("exploration {} paused: the results store cannot be written ({}); it resumes "
             "when it can",
             id, why);
  last.phase = "waiting for the store";
  publish(id, last, false);
}

std::optional<std::string> Scheduler::paused(std::int64_t id) const {
  std::lock_guard lock(mutex_);
  auto p = paused_.find(id);
  if (p == paused_.end()) return std::nullopt;
  return "the results store cannot be written (" + p->second.why +
         "); this daemon resumes it when it can";
}

std::size_t Scheduler::paused_count() const {
  std::lock_guard lock(mutex_);
  return paused_.size();
}

results::WriteHealth Scheduler::store_health() {
  std::lock_guard lock(probe_mutex_);
  auto now = std::chrono::steady_clock::now();
  if (now - probed_ < std::chrono::seconds(1)) return store_.write_health();
  probed_ = now;
  return store_.probe_write();
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
  if (elsewhere_.count(id)) return std::nullopt; // its progress is another process's
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

std::size_t Scheduler::elsewhere() const {
  std::lock_guard lock(mutex_);
  return elsewhere_.size();
}

void Scheduler::shutdown() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
    for (auto& [id, run] : running_)
      run->interrupt = true;
  }
  work_.notify_all();
  events_cv_.notify_all();
  monitor_cv_.notify_all();
  for (std::thread& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
  if (monitor_.joinable()) monitor_.join();
}

} // namespace dtx::server
