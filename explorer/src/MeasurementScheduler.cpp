#include "MeasurementScheduler.h"

#include "dtx/Protocol.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <csignal>
#include <deque>
#include <mutex>
#include <set>
#include <thread>

#include <pthread.h>

namespace dtx::detail {

namespace {

using Io = WorkerLink::Io;

Clock::time_point after(double seconds) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

Result made_result(Status status, std::string message, std::string tail = {}) {
  Result r;
  r.status = status;
  r.message = std::move(message);
  r.stderr_tail = std::move(tail);
  return r;
}

std::string field(const std::optional<WorkerInfo>& info, const char* key) {
  if (!info || !info->raw.is_object()) return "?";
  auto it = info->raw.find(key);
  if (it == info->raw.end()) return "?";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

struct Slot;

struct Job {
  std::string id;
  Request request;
  std::promise<Result> promise;
  ResultCallback callback;
  /// The compile stage's compile_s once a compile slot passed it on.
  std::optional<double> ahead_compile_s;
  /// The timing slot that was told to ready this job (`prefetch`) and so takes it.
  const Slot* reserved_for = nullptr;
  int resends = 0;
  std::vector<std::string> lost; // the slots lost under it, for the message if it gives up
  bool done = false;             // finished (exactly once)
  bool withdrawn = false;        // its owner withdrew it while it ran: it goes no further
};
using JobPtr = std::shared_ptr<Job>;
using Doomed = std::vector<std::pair<JobPtr, Result>>;

struct Node {
  std::string id;
  std::deque<JobPtr> compile_queue, timing_queue;
  std::vector<Slot*> slots; // of every plan
};

struct Slot {
  enum class State { Opening, Up, Down };
  SlotSpec spec;
  Node* node = nullptr;
  std::uint64_t generation = 0; // the plan it belongs to
  State state = State::Opening;
  bool was_up = false; // opened once: a compile slot opened again holds no request back
  bool busy = false;
  int restarts = 0;
  std::optional<WorkerInfo> info;
  std::atomic<long> pid{0};
  std::thread thread;
};

} // namespace

struct MeasurementScheduler::Impl {
  Placement& placement;
  SchedulerOptions options;

  mutable std::mutex mutex;
  std::condition_variable work_cv, space_cv;
  std::vector<std::unique_ptr<Node>> nodes;
  std::vector<std::unique_ptr<Slot>> slots;
  std::deque<JobPtr> parked; // no slot can take them yet
  std::set<JobPtr> active;   // every job not finished: queued, parked or running
  std::size_t in_flight = 0;
  bool stopping = false, joined = false;
  std::atomic<bool> stop_flag{false};
  std::uint64_t generation = 0;
  bool planned = false, planning = false;
  std::string plan_error;
  std::vector<SlotSpec> plan_specs;
  std::vector<std::string> start_errors;
  std::vector<std::thread> planners;
  std::atomic<std::uint64_t> next_id{1};

  Impl(Placement& p, SchedulerOptions o) : placement(p), options(std::move(o)) {}

  void log(const std::string& who, const std::string& line) const {
    if (options.log) options.log(who, line);
  }

  // --- jobs

  void finish(const JobPtr& job, Result result) {
    {
      std::lock_guard lock(mutex);
      if (job->done) return;
      job->done = true;
      active.erase(job);
    }
    result.id = job->id;
    if (job->ahead_compile_s && !result.ahead_compile_s)
      result.ahead_compile_s = job->ahead_compile_s;
    if (job->callback) {
      try {
        job->callback(result);
      } catch (...) {
      }
    }
    {
      std::lock_guard lock(mutex);
      --in_flight;
      space_cv.notify_all();
    }
    job->promise.set_value(std::move(result));
  }

  void finish_all(Doomed& doomed) {
    for (auto& [job, result] : doomed)
      finish(job, std::move(result));
    doomed.clear();
  }

  // --- the rules, under the mutex

  bool same_plan(const Slot& s) const { return s.generation == generation; }
  bool current(const Slot& s) const { return same_plan(s) && !stopping; }

  static bool matches(const Slot& s, const std::string& device) {
    return device.empty() || (s.info && s.info->device_name == device);
  }

  std::size_t timing_up(const Node& node, const std::string& device) const {
    std::size_t n = 0;
    for (const Slot* s : node.slots)
      if (s->spec.timing && s->state == Slot::State::Up && current(*s) && matches(*s, device)) ++n;
    return n;
  }

  // Compile slots up, or opening for the first time: requests wait for them rather than have
  // the timing slots compile (their GPU would idle while they do).
  bool compiles(const Node& node) const {
    for (const Slot* s : node.slots)
      if (!s->spec.timing && current(*s) &&
          (s->state == Slot::State::Up || (s->state == Slot::State::Opening && !s->was_up)))
        return true;
    return false;
  }

  bool starting() const {
    if (planning) return true;
    for (const auto& s : slots)
      if (s->state == Slot::State::Opening && current(*s)) return true;
    return false;
  }

  // Queued and running requests per timing slot of the model.
  double load(const Node& node, const std::string& device) const {
    std::size_t queued = node.compile_queue.size() + node.timing_queue.size();
    for (const Slot* s : node.slots)
      if (s->spec.timing && s->busy && current(*s)) ++queued;
    return static_cast<double>(queued) / static_cast<double>(timing_up(node, device));
  }

  // The least loaded node with a timing slot of the job's model; parked when there is none.
  void route(const JobPtr& job) {
    if (job->done) return;
    const std::string& device = job->request.device;
    Node* best = nullptr;
    double best_load = 0;
    for (const auto& n : nodes) {
      if (timing_up(*n, device) == 0) continue;
      double l = load(*n, device);
      if (!best || l < best_load) {
        best = n.get();
        best_load = l;
      }
    }
    if (!best) {
      parked.push_back(job);
      return;
    }
    const Request& r = job->request;
    bool to_compile = compiles(*best) && (r.kind == RequestKind::Compile ||
                                          (r.kind == RequestKind::Measure && r.compile_first));
    (to_compile ? best->compile_queue : best->timing_queue).push_back(job);
    work_cv.notify_all();
  }

  // Routes the parked jobs that a slot can take now, and fails those none ever will.
  Doomed settle() {
    Doomed doomed;
    if (parked.empty()) return doomed;
    std::deque<JobPtr> waiting;
    waiting.swap(parked);
    for (const JobPtr& job : waiting)
      route(job);
    if (parked.empty() || stopping || starting()) return doomed;
    std::vector<std::string> models;
    for (const auto& s : slots)
      if (s->spec.timing && s->state == Slot::State::Up && current(*s) && s->info &&
          std::find(models.begin(), models.end(), s->info->device_name) == models.end())
        models.push_back(s->info->device_name);
    std::sort(models.begin(), models.end());
    std::string have;
    for (const std::string& m : models)
      have += (have.empty() ? "" : ", ") + m;
    for (const JobPtr& job : parked) {
      const std::string& device = job->request.device;
      if (!planned) {
        doomed.push_back({job, made_result(Status::Crashed, plan_error)});
      } else if (!device.empty() && !models.empty()) {
        doomed.push_back({job, made_result(Status::RuntimeError,
                                           "no timing worker of the device model `" + device +
                                               "` (the backend has: " + have + ")")});
      } else {
        std::string why = "no timing worker is left";
        if (!job->lost.empty()) {
          std::string lost;
          for (const std::string& l : job->lost)
            lost += (lost.empty() ? "" : "; ") + l;
          why += " (lost under this request: " + lost + ")";
        }
        if (!start_errors.empty()) why += "; last start failure: " + start_errors.back();
        doomed.push_back({job, made_result(Status::Crashed, why)});
      }
    }
    parked.clear();
    return doomed;
  }

  // The job `slot` takes next from its node: the one it was told to ready, else the first
  // nobody was told to ready (of its model, for a timing slot).
  std::deque<JobPtr>::iterator takeable(Slot& slot) {
    auto& queue = slot.spec.timing ? slot.node->timing_queue : slot.node->compile_queue;
    auto mine = std::find_if(queue.begin(), queue.end(),
                             [&](const JobPtr& j) { return j->reserved_for == &slot; });
    if (mine != queue.end()) return mine;
    return std::find_if(queue.begin(), queue.end(), [&](const JobPtr& j) {
      return j->reserved_for == nullptr && (!slot.spec.timing || matches(slot, j->request.device));
    });
  }

  bool can_take(Slot& slot) {
    auto& queue = slot.spec.timing ? slot.node->timing_queue : slot.node->compile_queue;
    return takeable(slot) != queue.end();
  }

  // The Measure request the timing slot takes next, reserved for it (another slot taking it
  // would waste the preparation), if one is queued and a compile slot has already imported its
  // module and run its wrapper (in warm-up mode): one whose import or host code hangs or kills
  // its process was caught there, so readying it cannot cost the request being timed.
  JobPtr next_measure(Slot& slot) {
    auto it = takeable(slot);
    if (it == slot.node->timing_queue.end()) return nullptr;
    const JobPtr& next = *it;
    if (next->request.kind != RequestKind::Measure || !next->ahead_compile_s) return nullptr;
    next->reserved_for = &slot;
    return next;
  }

  // The slot is lost: its node's queued requests move to nodes that still have timing slots.
  Doomed lose(Slot& slot, const std::string& why) {
    if (slot.state != Slot::State::Up) return {};
    slot.state = Slot::State::Opening; // until it is opened again or given up
    log(slot.spec.name, slot.spec.name + " lost (pid " + std::to_string(slot.pid.load()) + " on " +
                            field(slot.info, "host") + "): " + why);
    if (slot.spec.timing)
      log(options.name, "timing worker lost: " + (slot.info ? slot.info->device_name : "?") +
                            " on " + field(slot.info, "host") + " gpu " + field(slot.info, "gpu") +
                            " (" + why + ")");
    Node& node = *slot.node;
    if (timing_up(node, "") == 0) {
      std::deque<JobPtr> pending;
      for (auto* q : {&node.compile_queue, &node.timing_queue}) {
        pending.insert(pending.end(), q->begin(), q->end());
        q->clear();
      }
      for (const JobPtr& job : pending) {
        job->reserved_for = nullptr;
        route(job);
      }
    }
    if (!compiles(node)) { // compile-first requests go to the timing slots there
      for (const JobPtr& job : node.compile_queue)
        node.timing_queue.push_back(job);
      node.compile_queue.clear();
    }
    work_cv.notify_all();
    return settle();
  }

  // --- a slot's life, on its thread

  void run_slot(Slot& slot) {
    // SIGPIPE from writing to a dead worker is an error return here, not a signal.
    sigset_t pipe_set;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, nullptr);
    auto stop = [this] { return stop_flag.load(); };
    for (;;) {
      std::string error;
      std::unique_ptr<WorkerLink> link = placement.open(slot.spec, slot.restarts, stop, error);
      if (!link) return not_opened(slot, error);
      bool lost = false;
      if (options.eager_start) { // start importing torch now, not when the first request comes
        bool last_runtime_error = false;
        lost = start_worker(slot, *link, last_runtime_error, error) == Io::Lost;
      }
      if (lost) {
        Doomed doomed;
        {
          std::lock_guard lock(mutex);
          if (!current(slot)) return;
          slot.state = Slot::State::Up; // so that losing it is counted once
          doomed = lose(slot, link->lost_reason());
        }
        finish_all(doomed);
      } else {
        if (!opened(slot)) return;
        if (!serve(slot, *link)) return;
      }
      link.reset(); // the placement lets go of it (a Ray actor is killed)
      slot.pid = 0;
      if (!reopen(slot)) return;
      ++slot.restarts;
    }
  }

  void not_opened(Slot& slot, const std::string& error) {
    Doomed doomed;
    {
      std::lock_guard lock(mutex);
      if (!current(slot)) return;
      slot.state = Slot::State::Down;
      std::string message =
          slot.spec.name + " on node " + slot.spec.node.substr(0, 12) + ": " + error;
      start_errors.push_back(message);
      log(options.name, "did not start: " + message);
      Node& node = *slot.node;
      if (!compiles(node)) { // none will come: the timing slots compile
        for (const JobPtr& job : node.compile_queue)
          node.timing_queue.push_back(job);
        node.compile_queue.clear();
      }
      work_cv.notify_all();
      doomed = settle();
    }
    finish_all(doomed);
  }

  bool opened(Slot& slot) {
    Doomed doomed;
    {
      std::lock_guard lock(mutex);
      if (!current(slot)) return false;
      slot.state = Slot::State::Up;
      slot.was_up = true;
      if (slot.spec.timing && slot.info)
        log(options.name, "timing worker ready: " + slot.info->device_name + " on " +
                              field(slot.info, "host") + " gpu " + field(slot.info, "gpu"));
      work_cv.notify_all();
      doomed = settle();
    }
    finish_all(doomed);
    return true;
  }

  // After the slot was lost: whether to open it again (its node is alive).
  bool reopen(Slot& slot) {
    bool again = false;
    {
      std::lock_guard lock(mutex);
      if (!current(slot)) return false;
    }
    if (slot.restarts < options.max_restarts) {
      again = placement.node_alive(slot.spec.node);
      if (!again)
        log(options.name, "node " + slot.spec.node.substr(0, 12) + " is gone; " + slot.spec.name +
                              " is not restarted");
    }
    Doomed doomed;
    {
      std::lock_guard lock(mutex);
      if (!current(slot)) return false;
      if (!again) {
        slot.state = Slot::State::Down;
        doomed = settle();
      }
    }
    finish_all(doomed);
    return again;
  }

  Io start_worker(Slot& slot, WorkerLink& link, bool& last_runtime_error, std::string& error) {
    Io io = link.start(
        after(options.startup_timeout_s), [this] { return stop_flag.load(); }, error);
    if (io == Io::Lost) return io;
    if (io != Io::Done) {
      log(slot.spec.name, "worker did not start: " + error);
      slot.pid = 0;
      return io;
    }
    last_runtime_error = false;
    slot.pid = link.pid();
    const WorkerInfo& info = link.info();
    log(slot.spec.name, "hello: pid " + std::to_string(info.pid) + ", python " + info.python +
                            ", torch " + info.torch + ", triton " + info.triton + ", device " +
                            info.device_kind + " " + info.device_name);
    std::lock_guard lock(mutex);
    slot.info = info;
    return io;
  }

  // Serves requests until the slot ends (false) or is lost (true).
  bool serve(Slot& slot, WorkerLink& link) {
    bool last_runtime_error = false;
    for (;;) {
      JobPtr job, ahead;
      {
        std::unique_lock lock(mutex);
        work_cv.wait_for(lock, std::chrono::milliseconds(200),
                         [&] { return !current(slot) || can_take(slot); });
        if (!current(slot)) return false;
        if (auto it = takeable(slot);
            it != (slot.spec.timing ? slot.node->timing_queue : slot.node->compile_queue).end()) {
          job = *it;
          (slot.spec.timing ? slot.node->timing_queue : slot.node->compile_queue).erase(it);
          slot.busy = true;
          if (slot.spec.timing && options.prefetch) ahead = next_measure(slot);
        }
      }
      if (!job) {
        link.idle();
        continue;
      }
      bool lost = run_job(slot, link, job, ahead, last_runtime_error);
      Doomed doomed;
      {
        std::lock_guard lock(mutex);
        slot.busy = false;
        work_cv.notify_all();
        doomed = settle();
      }
      finish_all(doomed);
      if (lost) return true;
    }
  }

  // One job on the slot's worker. True when the slot was lost under it.
  bool run_job(Slot& slot, WorkerLink& link, const JobPtr& job, const JobPtr& ahead,
               bool& last_runtime_error) {
    Request request = job->request;
    if (!slot.spec.timing) request.kind = RequestKind::Compile;
    nlohmann::json sent = request_json(request, job->id);
    // A prefetch is work for the next request done within this one: allow this one time for
    // it, twice what the compile slot spent readying the same module (a bound: the compile
    // slot also compiled), so that a slow import of the next module does not time this one out.
    double limit_s = request.timeout_s;
    if (ahead) {
      sent["prefetch"] = request_json(ahead->request, ahead->id);
      limit_s += std::min(ahead->request.timeout_s, 2 * ahead->ahead_compile_s.value_or(0) + 1);
    }
    auto stop = [this] { return stop_flag.load(); };
    const std::string pid_text = "worker pid ";
    Result result;
    for (int attempt = 0;; ++attempt) {
      if (link.has_worker() && !link.running()) {
        log(slot.spec.name,
            pid_text + std::to_string(link.pid()) + " " + link.reap() + "; starting a new one");
        slot.pid = 0;
      }
      if (!link.has_worker()) {
        std::string error;
        Io io = start_worker(slot, link, last_runtime_error, error);
        if (io == Io::Lost) return lost_under(slot, link, job, ahead);
        if (io != Io::Done) {
          result =
              made_result(Status::Crashed, "worker did not start: " + error, link.stderr_tail());
          break;
        }
      }
      nlohmann::json reply;
      Io io = link.exchange(sent, after(limit_s), stop, reply);
      if (io == Io::Unsent && attempt == 0) {
        // It died while idle (after a CUDA error it exits): not this request's doing.
        log(slot.spec.name,
            pid_text + std::to_string(link.pid()) + " " + link.reap() + "; starting a new one");
        slot.pid = 0;
        continue;
      }
      if (io == Io::Done) {
        result = parse_result(reply);
        result.worker = link.info();
        break;
      }
      if (io == Io::Lost) return lost_under(slot, link, job, ahead);
      if (io == Io::Timeout) {
        link.kill();
        slot.pid = 0;
        result =
            made_result(Status::Timeout,
                        "no reply within " + std::to_string(limit_s) + " s; the worker was killed",
                        link.stderr_tail());
        log(slot.spec.name, "request " + job->id + " timed out; " + pid_text +
                                std::to_string(link.pid()) + " killed");
        break;
      }
      if (io == Io::Stopped) {
        link.kill();
        slot.pid = 0;
        result = made_result(Status::Crashed, "the pool shut down", link.stderr_tail());
        break;
      }
      // Closed: the worker died during the request.
      std::string how = link.reap();
      slot.pid = 0;
      log(slot.spec.name,
          pid_text + std::to_string(link.pid()) + " died during request " + job->id + ": " + how);
      if (last_runtime_error && attempt == 0) {
        last_runtime_error = false; // it was exiting after its previous request's error
        continue;
      }
      result = made_result(Status::Crashed, "the worker died: " + how, link.stderr_tail());
      break;
    }
    last_runtime_error = result.status == Status::RuntimeError;
    if (link.has_worker() && result.status == Status::RuntimeError &&
        is_cuda_error(result.message)) {
      log(slot.spec.name, "CUDA error: replacing " + pid_text + std::to_string(link.pid()));
      link.kill();
      slot.pid = 0;
    }
    if (!slot.spec.timing && job->request.kind == RequestKind::Measure &&
        result.status == Status::Ok) {
      std::lock_guard lock(mutex);
      if (!stopping && !job->withdrawn) {
        if (!current(slot) || job->done) return false; // the placement lost it with the job
        job->ahead_compile_s = result.compile_s;
        // On to a timing slot of the same node: its Triton cache has the kernels.
        if (timing_up(*slot.node, job->request.device) > 0) {
          slot.node->timing_queue.push_back(job);
          work_cv.notify_all();
        } else {
          route(job);
        }
        return false;
      }
      result =
          job->withdrawn ? withdrawn_result() : made_result(Status::Crashed, "the pool shut down");
    }
    finish(job, std::move(result));
    return false;
  }

  // The slot was lost under `job`: it goes back to a queue, unless it lost too many.
  bool lost_under(Slot& slot, WorkerLink& link, const JobPtr& job, const JobPtr& ahead) {
    std::string why = link.lost_reason();
    Doomed doomed;
    {
      std::lock_guard lock(mutex);
      if (ahead) ahead->reserved_for = nullptr;
      if (stopping) {
        doomed.push_back({job, made_result(Status::Crashed, "the pool shut down")});
      } else if (current(slot) && !job->done) {
        job->lost.push_back(slot.spec.name + " on " + field(slot.info, "host") + ": " + why);
        doomed = lose(slot, why);
        ++job->resends;
        job->reserved_for = nullptr;
        if (job->withdrawn) {
          doomed.push_back({job, withdrawn_result()});
        } else if (job->resends > options.max_resends) {
          std::string lost;
          for (const std::string& l : job->lost)
            lost += (lost.empty() ? "" : "; ") + l;
          doomed.push_back(
              {job, made_result(Status::Crashed, "lost " + std::to_string(job->resends) +
                                                     " workers while measuring this request (" +
                                                     lost + ")")});
        } else {
          log(options.name, "request " + job->id + " sent again (" + why + ")");
          job->ahead_compile_s.reset();
          route(job);
          Doomed more = settle();
          doomed.insert(doomed.end(), more.begin(), more.end());
        }
      }
    }
    finish_all(doomed);
    return true;
  }

  // --- plans

  Node& node_named(const std::string& id) {
    for (const auto& n : nodes)
      if (n->id == id) return *n;
    nodes.push_back(std::make_unique<Node>());
    nodes.back()->id = id;
    return *nodes.back();
  }

  // Under the mutex.
  void add_slots(const std::vector<SlotSpec>& specs) {
    planned = true;
    plan_error.clear();
    plan_specs = specs;
    for (const SlotSpec& spec : specs) {
      auto slot = std::make_unique<Slot>();
      slot->spec = spec;
      slot->node = &node_named(spec.node);
      slot->generation = generation;
      slot->node->slots.push_back(slot.get());
      Slot* s = slot.get();
      slots.push_back(std::move(slot));
      // Each slot's thread owns its worker: PR_SET_PDEATHSIG fires when the thread that forked
      // a worker ends, so a local slot's thread ends only in shutdown.
      s->thread = std::thread([this, s] { run_slot(*s); });
    }
  }

  // Under the mutex: plans the slots again on a thread of its own; requests wait meanwhile.
  void start_planning() {
    planning = true;
    planners.emplace_back([this, plan_of = generation] {
      std::vector<SlotSpec> specs;
      std::string error;
      try {
        specs = placement.plan();
      } catch (const std::exception& e) {
        error = e.what();
      }
      Doomed doomed;
      {
        std::lock_guard lock(mutex);
        planning = false;
        if (stopping) return;
        if (!error.empty())
          plan_error = error;
        else if (plan_of == generation) // else lost while it was planned: plan_error says how
          add_slots(specs);
        doomed = settle();
      }
      finish_all(doomed);
    });
  }

  static Result withdrawn_result() {
    return made_result(Status::Crashed, "withdrawn: the exploration that asked for it stopped");
  }

  JobPtr make_job(Request request, ResultCallback callback) {
    auto job = std::make_shared<Job>();
    job->id = std::to_string(next_id++);
    job->request = std::move(request);
    job->callback = std::move(callback);
    return job;
  }

  // Under the mutex, with room.
  Doomed enqueue(const JobPtr& job) {
    ++in_flight;
    active.insert(job);
    if (!planned && !planning) start_planning();
    route(job);
    return settle();
  }
};

MeasurementScheduler::MeasurementScheduler(Placement& placement, SchedulerOptions options)
    : impl_(std::make_unique<Impl>(placement, std::move(options))) {
  if (impl_->options.capacity == 0) impl_->options.capacity = 1;
}

MeasurementScheduler::~MeasurementScheduler() {
  shutdown();
}

void MeasurementScheduler::start() {
  Impl& s = *impl_;
  std::uint64_t plan_of = 0;
  {
    std::lock_guard lock(s.mutex);
    plan_of = s.generation;
  }
  std::vector<SlotSpec> specs = s.placement.plan();
  std::lock_guard lock(s.mutex);
  if (plan_of != s.generation) throw std::runtime_error(s.plan_error);
  if (!s.stopping) s.add_slots(specs);
}

std::future<Result> MeasurementScheduler::submit(Request request, ResultCallback callback) {
  Impl& s = *impl_;
  JobPtr job = s.make_job(std::move(request), std::move(callback));
  auto future = job->promise.get_future();
  Doomed doomed;
  {
    std::unique_lock lock(s.mutex);
    s.space_cv.wait(lock, [&] { return s.stopping || s.in_flight < s.options.capacity; });
    if (s.stopping) {
      ++s.in_flight; // finish() decrements
      doomed.push_back({job, made_result(Status::Crashed, "the pool shut down")});
    } else {
      doomed = s.enqueue(job);
    }
  }
  s.finish_all(doomed);
  return future;
}

std::optional<std::future<Result>> MeasurementScheduler::try_submit(Request request,
                                                                    ResultCallback callback) {
  Impl& s = *impl_;
  Doomed doomed;
  std::optional<std::future<Result>> future;
  {
    std::lock_guard lock(s.mutex);
    if (!s.stopping && s.in_flight >= s.options.capacity) return std::nullopt;
    JobPtr job = s.make_job(std::move(request), std::move(callback));
    future = job->promise.get_future();
    if (s.stopping) { // as submit: failed at once, not "full" forever
      ++s.in_flight;  // finish() decrements
      doomed.push_back({job, made_result(Status::Crashed, "the pool shut down")});
    } else {
      doomed = s.enqueue(job);
    }
  }
  s.finish_all(doomed);
  return future;
}

std::size_t MeasurementScheduler::withdraw(std::uint64_t owner) {
  Impl& s = *impl_;
  if (owner == 0) return 0;
  Doomed doomed;
  {
    std::lock_guard lock(s.mutex);
    auto mine = [owner](const JobPtr& job) { return job->request.owner == owner; };
    auto take = [&](std::deque<JobPtr>& queue) {
      for (const JobPtr& job : queue)
        if (mine(job)) doomed.push_back({job, Impl::withdrawn_result()});
      queue.erase(std::remove_if(queue.begin(), queue.end(), mine), queue.end());
    };
    for (const auto& n : s.nodes) {
      take(n->compile_queue);
      take(n->timing_queue);
    }
    take(s.parked);
    for (const JobPtr& job : s.active)
      if (mine(job)) job->withdrawn = true; // running: it ends where it is
  }
  std::size_t n = doomed.size();
  s.finish_all(doomed);
  return n;
}

void MeasurementScheduler::shutdown() {
  Impl& s = *impl_;
  Doomed doomed;
  {
    std::lock_guard lock(s.mutex);
    if (s.joined) return;
    s.stopping = true;
    s.stop_flag = true;
    for (const auto& n : s.nodes)
      for (auto* q : {&n->compile_queue, &n->timing_queue}) {
        for (const JobPtr& job : *q)
          doomed.push_back({job, made_result(Status::Crashed, "the pool shut down")});
        q->clear();
      }
    for (const JobPtr& job : s.parked)
      doomed.push_back({job, made_result(Status::Crashed, "the pool shut down")});
    s.parked.clear();
    s.work_cv.notify_all();
    s.space_cv.notify_all();
  }
  s.finish_all(doomed);
  for (auto& t : s.planners)
    if (t.joinable()) t.join();
  for (auto& slot : s.slots)
    if (slot->thread.joinable()) slot->thread.join();
  std::lock_guard lock(s.mutex);
  s.joined = true;
}

void MeasurementScheduler::placement_lost(const std::string& message, const std::string& tail) {
  Impl& s = *impl_;
  Doomed doomed;
  {
    std::lock_guard lock(s.mutex);
    if (s.stopping) return;
    ++s.generation; // every slot of the lost plan ends
    s.planned = false;
    s.plan_error = message;
    for (const auto& n : s.nodes) {
      n->compile_queue.clear();
      n->timing_queue.clear();
    }
    s.parked.clear();
    for (const JobPtr& job : s.active)
      doomed.push_back({job, made_result(Status::Crashed, message, tail)});
    s.work_cv.notify_all();
  }
  s.finish_all(doomed);
}

std::vector<WorkerInfo> MeasurementScheduler::timing_workers() const {
  const Impl& s = *impl_;
  std::lock_guard lock(s.mutex);
  std::vector<WorkerInfo> out;
  for (const auto& slot : s.slots)
    if (slot->spec.timing && slot->state == Slot::State::Up && s.same_plan(*slot) && slot->info)
      out.push_back(*slot->info);
  return out;
}

std::vector<long> MeasurementScheduler::worker_pids() const {
  const Impl& s = *impl_;
  std::lock_guard lock(s.mutex);
  std::vector<long> out;
  for (const auto& slot : s.slots)
    if (long pid = slot->pid.load(); pid && s.same_plan(*slot)) out.push_back(pid);
  return out;
}

std::size_t MeasurementScheduler::in_flight() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->in_flight;
}

std::vector<SlotSpec> MeasurementScheduler::slots() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->plan_specs;
}

} // namespace dtx::detail
