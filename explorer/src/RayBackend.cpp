#include "dtx/RayBackend.h"

#include "MeasurementScheduler.h"
#include "WorkerProcess.h"
#include "dtx/Files.h"
#include "dtx/Protocol.h"
#include "dtx/WorkerPool.h"
#include "dtx/results/Utf8.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

namespace dtx {

using detail::Clock;
using detail::WorkerProcess;

std::filesystem::path default_ray_driver() {
  if (const char* p = std::getenv("DTX_RAY_DRIVER"); p && *p) return p;
  return dtx_file(std::filesystem::path("explorer") / "ray" / "dtx_ray_pool.py");
}

namespace {

using detail::SlotSpec;
using detail::StopFn;
using Io = detail::WorkerLink::Io;

// Beyond the time an actor's call is given (a request's time limit, a worker's startup): an actor
// that does not answer within this much more is lost.
constexpr double kCallGraceS = 60;

// The driver's own explanation: its `dtx-ray:` lines, else the end of its standard error.
std::string explanation(const std::string& tail) {
  std::istringstream in(tail);
  std::string line, said;
  while (std::getline(in, line))
    if (line.rfind("dtx-ray: ", 0) == 0) said += (said.empty() ? "" : "\n") + line.substr(9);
  if (!said.empty()) return said;
  return utf8_tail(tail, 1500);
}

double seconds_until(Clock::time_point deadline) {
  return std::max(0.0, std::chrono::duration<double>(deadline - Clock::now()).count());
}

Clock::time_point after(double seconds) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

std::string text_of(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

std::string short_node(const std::string& node) {
  return node.substr(0, 8);
}

/// The slots of a cluster: per alive node, one timing slot per GPU and compile slots (default one
/// per timing slot, at most the node's CPUs); or, with `interpreter_workers`, that many timing
/// slots on CPUs spread over the nodes. Throws when there is nothing to time on.
std::vector<SlotSpec> plan_ray_slots(const nlohmann::json& nodes, const RayOptions& options) {
  std::vector<SlotSpec> specs;
  const int interpreter = options.interpreter_workers;
  std::size_t gpus_total = 0, cpus_total = 0;
  for (const auto& n : nodes) {
    gpus_total += n.value("gpus", 0);
    cpus_total += n.value("cpus", 0);
  }
  if (gpus_total == 0 && interpreter == 0)
    throw std::runtime_error(
        "the Ray backend could not start: the Ray cluster at " + options.address + " has no GPU (" +
        std::to_string(nodes.size()) + " node(s), " + std::to_string(cpus_total) +
        " CPU(s)). Add GPU nodes (`ray start --address HEAD:PORT` on each; Ray finds their "
        "GPUs), or time on the Triton interpreter with --ray-interpreter-workers N for testing");
  auto add = [&](const std::string& name, const std::string& node, bool timing,
                 nlohmann::json how) {
    SlotSpec spec;
    spec.name = name;
    spec.node = node;
    spec.timing = timing;
    spec.options = std::move(how);
    specs.push_back(std::move(spec));
  };
  for (std::size_t k = 0; k < nodes.size(); ++k) {
    const std::string node = text_of(nodes[k], "node");
    const int gpus = nodes[k].value("gpus", 0), cpus = nodes[k].value("cpus", 0);
    int timing = 0;
    if (interpreter == 0) {
      for (int i = 0; i < gpus; ++i)
        add("timing-" + short_node(node) + "-" + std::to_string(i), node, true,
            {{"num_gpus", 1}, {"num_cpus", 0}, {"visible_gpu", nullptr}});
      timing = gpus;
    } else {
      for (int i = static_cast<int>(k); i < interpreter; i += static_cast<int>(nodes.size()))
        ++timing;
      for (int i = 0; i < timing; ++i)
        add("timing-" + short_node(node) + "-cpu" + std::to_string(i), node, true,
            {{"num_gpus", 0}, {"num_cpus", 1}, {"visible_gpu", ""}});
    }
    if (timing == 0) continue;
    int compiles = options.compile_per_node
                       ? *options.compile_per_node
                       : std::max(1, std::min(timing, cpus - (interpreter ? timing : 0)));
    for (int i = 0; i < compiles; ++i)
      add("compile-" + short_node(node) + "-" + std::to_string(i), node, false,
          {{"num_gpus", 0},
           {"num_cpus", 1},
           {"visible_gpu", gpus > 0 && interpreter == 0 ? std::to_string(i % gpus) : ""}});
  }
  return specs;
}

} // namespace

struct RayBackend::Impl {
  RayOptions options;
  mutable std::mutex mutex;
  std::condition_variable work_cv;
  /// Calls waiting for the driver's reply, by number.
  std::map<std::uint64_t, std::shared_ptr<std::promise<nlohmann::json>>> pending;
  std::uint64_t next_call = 1;
  bool stopping = false;            // the io thread ends
  std::atomic<bool> closing{false}; // shutting down: a connection under way gives up
  bool connect_wanted = false;
  std::shared_ptr<std::promise<std::string>> connected; // "" or why not
  std::shared_future<std::string> connected_future;
  bool driver_up = false;
  std::uint64_t driver_number =
      0; // of the latest driver: an actor belongs to the one it was opened by
  nlohmann::json hello;
  std::map<std::string, std::string> baseline_sources; // by path
  std::thread io;
  /// Started, read and ended by the io thread, written by any: writing and ending it under
  /// driver_mutex.
  std::unique_ptr<WorkerProcess> driver;
  std::mutex driver_mutex;
  std::unique_ptr<detail::Placement> placement;
  std::unique_ptr<detail::MeasurementScheduler> scheduler;
  detail::MeasurementScheduler* lost_to = nullptr; // told when the driver dies

  void log(const std::string& line) const {
    if (options.log) options.log("ray", line);
  }

  // --- calls to the driver, from any thread

  enum class Answer { Value, Lost, Error, Timeout, Stopped };
  struct Reply {
    Answer answer;
    nlohmann::json value;
    std::string why;
  };

  // A command to driver number `of` (0: the one up now), answered by `deadline`.
  Reply call(nlohmann::json message, Clock::time_point deadline, const StopFn& stop,
             std::uint64_t of = 0) {
    auto promise = std::make_shared<std::promise<nlohmann::json>>();
    auto future = promise->get_future();
    std::uint64_t n = 0;
    {
      std::lock_guard lock(mutex);
      if (!driver_up || (of && of != driver_number))
        return {Answer::Lost, {}, "the Ray driver is gone"};
      of = driver_number;
      n = next_call++;
      message["n"] = n;
      pending[n] = promise;
    }
    // Unwritten, it is answered when the io thread finds the driver gone.
    write_line(of, message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    while (future.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
      bool stopped = stop && stop();
      if (stopped || Clock::now() >= deadline) {
        std::lock_guard lock(mutex);
        pending.erase(n);
        return {stopped ? Answer::Stopped : Answer::Timeout, {}, ""};
      }
    }
    nlohmann::json reply = future.get();
    if (reply.contains("lost")) return {Answer::Lost, {}, text_of(reply, "lost")};
    if (reply.contains("error")) return {Answer::Error, {}, text_of(reply, "error")};
    return {Answer::Value, reply.value("value", nlohmann::json()), ""};
  }

  void post(const nlohmann::json& message, std::uint64_t of) {
    write_line(of, message.dump() + "\n");
  }

  // Writes a line to driver number `of`, from any thread, at once (a slot's next request waits
  // for nothing); a driver gone or replaced takes nothing.
  bool write_line(std::uint64_t of, const std::string& line) {
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old); // a driver gone: an error return, not a signal
    bool ok = false;
    {
      std::lock_guard lock(driver_mutex);
      ok = driver && of == driver_number &&
           driver->write(line, after(60), [] { return false; }) == WorkerProcess::Io::Done;
    }
    if (!sigismember(&old, SIGPIPE)) {
      timespec zero{0, 0};
      while (sigtimedwait(&pipe_set, nullptr, &zero) > 0) {
      }
      pthread_sigmask(SIG_SETMASK, &old, nullptr);
    }
    return ok;
  }

  /// Starts a driver unless one is up (on the io thread: the driver dies with the thread that
  /// started it). "" or why it could not.
  std::string connect() {
    std::shared_future<std::string> done;
    {
      std::lock_guard lock(mutex);
      if (driver_up) return "";
      if (!connect_wanted) {
        connect_wanted = true;
        connected = std::make_shared<std::promise<std::string>>();
        connected_future = connected->get_future().share();
        work_cv.notify_all();
      }
      done = connected_future;
    }
    return done.get();
  }

  /// The file of a baseline travels with its request (a node has none of the caller's files).
  bool attach_baseline(nlohmann::json& request, std::string& problem) {
    auto b = request.find("baseline");
    if (b == request.end() || !b->is_object() || !b->contains("file")) return true;
    const std::string path = text_of(*b, "file");
    std::lock_guard lock(mutex);
    auto it = baseline_sources.find(path);
    if (it == baseline_sources.end()) {
      std::ifstream in(path, std::ios::binary);
      std::ostringstream text;
      text << in.rdbuf();
      if (!in) {
        problem = "cannot read the baseline file " + path + ": " + std::strerror(errno);
        return false;
      }
      it = baseline_sources.emplace(path, text.str()).first;
    }
    (*b)["source"] = it->second;
    return true;
  }

  // --- the io thread, which starts the driver and reads it

  bool start_driver(std::string& error) {
    WorkerProcess::Spec spec;
    spec.name = "ray-driver";
    spec.python = options.python.string();
    spec.args = {options.driver_script.string(), "--address", options.address, "--worker-script",
                 options.worker_script.string()};
    if (!options.triton_cache_dir.empty()) {
      spec.args.push_back("--triton-cache");
      spec.args.push_back(options.triton_cache_dir.string());
    }
    spec.env["PYTHONUNBUFFERED"] = "1";
    spec.stderr_tail_bytes = options.stderr_tail_bytes;
    spec.log = options.log;
    auto started = std::make_unique<WorkerProcess>(std::move(spec));
    std::string why;
    if (!started->start(
            after(options.connect_timeout_s), [this] { return closing.load(); }, why)) {
      std::string said = explanation(started->stderr_tail());
      error = "the Ray backend could not start: " + (said.empty() ? why : said);
      return false;
    }
    log("driver pid " + std::to_string(started->pid()) + " connected to " + options.address);
    std::scoped_lock lock(driver_mutex, mutex);
    hello = started->info().raw;
    driver = std::move(started);
    driver_up = true;
    ++driver_number;
    return true;
  }

  void on_line(const std::string& line) {
    nlohmann::json m = nlohmann::json::parse(line, nullptr, false);
    if (!m.is_object() || m.value("type", nlohmann::json()) != "reply" || !m.contains("n") ||
        !m["n"].is_number_unsigned()) {
      log("ignored a line from the driver: " + line.substr(0, 200));
      return;
    }
    std::shared_ptr<std::promise<nlohmann::json>> promise;
    {
      std::lock_guard lock(mutex);
      auto it = pending.find(m["n"].get<std::uint64_t>());
      if (it == pending.end()) return; // its caller gave up waiting
      promise = it->second;
      pending.erase(it);
    }
    promise->set_value(std::move(m));
  }

  // Every call still waiting is answered: the driver is gone.
  void answer_pending(const std::string& why) {
    std::map<std::uint64_t, std::shared_ptr<std::promise<nlohmann::json>>> left;
    {
      std::lock_guard lock(mutex);
      driver_up = false;
      left.swap(pending);
    }
    for (auto& [n, promise] : left)
      promise->set_value({{"lost", why}});
  }

  void driver_died() {
    std::string how, tail;
    long pid = 0;
    {
      std::lock_guard lock(driver_mutex);
      how = driver->wait_and_describe();
      tail = driver->stderr_tail();
      pid = driver->pid();
      driver.reset();
    }
    log("the driver (pid " + std::to_string(pid) + ") " + how);
    std::string message = "the Ray driver " + how + ": " + explanation(tail);
    detail::MeasurementScheduler* told = nullptr;
    {
      // Down before anyone hears of it: a request failed below may be followed at once by
      // another, whose connect() must start the next driver, not call this one.
      std::lock_guard lock(mutex);
      driver_up = false;
      told = lost_to;
    }
    // Its requests fail with its last words before its slots hear that it is gone, so that
    // none of them is sent again to a slot of the next driver.
    if (told) told->placement_lost(message, tail);
    answer_pending(message);
  }

  void run() {
    sigset_t pipe_set;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, nullptr);
    auto never = [] { return false; };
    for (;;) {
      bool stop = false, connect = false;
      {
        std::unique_lock lock(mutex);
        if (!driver_up)
          work_cv.wait_for(lock, std::chrono::milliseconds(200),
                           [&] { return stopping || connect_wanted; });
        stop = stopping;
        connect = connect_wanted;
      }
      if (stop) break;
      if (!driver) {
        if (!connect) continue;
        std::string error;
        start_driver(error);
        std::shared_ptr<std::promise<std::string>> waiting;
        {
          std::lock_guard lock(mutex);
          connect_wanted = false;
          waiting.swap(connected);
        }
        if (waiting) waiting->set_value(error);
        continue;
      }
      std::string reply;
      auto got = driver->read_line(reply, after(0.05), never);
      if (got == WorkerProcess::Io::Done)
        on_line(reply);
      else if (got == WorkerProcess::Io::Closed)
        driver_died();
    }
    // Shut down: the driver stops its actors and removes this run's files on the nodes.
    if (driver) {
      auto deadline = after(60);
      std::string reply;
      if (write_line(driver_number, "{\"type\": \"shutdown\"}\n"))
        while (driver->read_line(reply, deadline, never) == WorkerProcess::Io::Done)
          on_line(reply);
      std::lock_guard lock(driver_mutex);
      driver->kill();
      driver.reset();
    }
    answer_pending("the backend shut down");
    std::shared_ptr<std::promise<std::string>> waiting;
    {
      std::lock_guard lock(mutex);
      waiting.swap(connected);
    }
    if (waiting) waiting->set_value("the Ray backend could not start: it shut down");
  }
};

namespace {

// The worker a Ray actor hosts, reached through the driver.
class RayLink final : public detail::WorkerLink {
public:
  RayLink(RayBackend::Impl& backend, std::string key, std::uint64_t driver)
      : b_(backend), key_(std::move(key)), driver_(driver) {}
  ~RayLink() override { b_.post({{"type", "close"}, {"slot", key_}}, driver_); }

  Io start(Clock::time_point deadline, const StopFn& stop, std::string& error) override {
    live_ = false;
    tail_.clear();
    auto r = call("start", {seconds_until(deadline)}, deadline, stop);
    if (r.answer == RayBackend::Impl::Answer::Value) {
      if (auto hello = parse_hello(r.value.value("hello", nlohmann::json()))) {
        info_ = *hello;
        live_ = true;
        return Io::Done;
      }
      error = text_of(r.value, "error");
      tail_ = text_of(r.value, "tail");
      return Io::Closed;
    }
    if (r.answer == RayBackend::Impl::Answer::Error) {
      error = "the actor failed: " + r.why;
      return Io::Closed;
    }
    if (r.answer == RayBackend::Impl::Answer::Stopped) {
      error = "the pool is shutting down";
      return Io::Closed;
    }
    return lost(r);
  }

  bool has_worker() const override { return live_; }
  bool running() override { return live_; }

  Io exchange(const nlohmann::json& request, Clock::time_point deadline, const StopFn& stop,
              nlohmann::json& reply) override {
    nlohmann::json sent = request;
    std::string problem;
    if (!b_.attach_baseline(sent, problem)) {
      reply = {{"type", "result"},
               {"id", request.value("id", nlohmann::json())},
               {"status", "runtime_error"},
               {"message", problem}};
      return Io::Done;
    }
    auto r = call("exchange", {sent, seconds_until(deadline)}, deadline, stop);
    if (r.answer == RayBackend::Impl::Answer::Value) {
      const std::string io = text_of(r.value, "io");
      tail_ = text_of(r.value, "tail");
      if (io == "done") {
        reply = r.value.value("reply", nlohmann::json());
        return Io::Done;
      }
      if (io == "timeout") return Io::Timeout;
      live_ = false;
      how_ = text_of(r.value, "how");
      return io == "unsent" ? Io::Unsent : Io::Closed;
    }
    if (r.answer == RayBackend::Impl::Answer::Error) { // the actor raised: not the request's doing
      reply = {{"type", "result"},
               {"id", request.value("id", nlohmann::json())},
               {"status", "crashed"},
               {"message", "the actor failed: " + r.why}};
      return Io::Done;
    }
    if (r.answer == RayBackend::Impl::Answer::Stopped) return Io::Stopped;
    return lost(r);
  }

  void kill() override {
    live_ = false;
    call("kill", nlohmann::json::array(), Clock::now(), [this] { return b_.closing.load(); });
  }
  std::string reap() override {
    live_ = false;
    return how_;
  }
  std::string stderr_tail() const override { return tail_; }
  const WorkerInfo& info() const override { return info_; }
  long pid() const override { return info_.pid; }
  std::string lost_reason() const override { return lost_; }

private:
  // A call given until `deadline`, and kCallGraceS more to answer.
  RayBackend::Impl::Reply call(const char* method, nlohmann::json args, Clock::time_point deadline,
                               const StopFn& stop) {
    waited_s_ = seconds_until(deadline) + kCallGraceS;
    return b_.call({{"type", "call"}, {"slot", key_}, {"method", method}, {"args", args}},
                   after(waited_s_), stop, driver_);
  }

  Io lost(const RayBackend::Impl::Reply& r) {
    live_ = false;
    if (r.answer == RayBackend::Impl::Answer::Timeout) {
      std::ostringstream s;
      s << "the actor did not answer within " << waited_s_ << " s";
      lost_ = s.str();
    } else {
      lost_ = r.why;
    }
    return Io::Lost;
  }

  RayBackend::Impl& b_;
  std::string key_;
  std::uint64_t driver_;
  bool live_ = false;
  std::string tail_, how_, lost_;
  double waited_s_ = 0;
  WorkerInfo info_;
};

// The cluster's nodes, through the driver: actors placed on them, one per slot.
class RayPlacement final : public detail::Placement {
public:
  explicit RayPlacement(RayBackend::Impl& backend) : b_(backend) {}

  std::vector<SlotSpec> plan() override {
    if (std::string error = b_.connect(); !error.empty()) throw std::runtime_error(error);
    auto r = b_.call({{"type", "nodes"}}, after(kCallGraceS), {});
    if (r.answer != RayBackend::Impl::Answer::Value || !r.value.is_array())
      throw std::runtime_error("the Ray backend could not start: the driver did not list the "
                               "cluster's nodes (" +
                               (r.why.empty() ? "no answer" : r.why) + ")");
    std::vector<SlotSpec> specs = plan_ray_slots(r.value, b_.options);
    std::size_t timing = 0;
    for (const SlotSpec& s : specs)
      timing += s.timing ? 1 : 0;
    {
      std::lock_guard lock(b_.mutex);
      b_.hello["nodes"] = r.value;
      b_.hello["timing_workers"] = timing;
      b_.hello["compile_workers"] = specs.size() - timing;
    }
    b_.log(std::to_string(r.value.size()) + " node(s): starting " + std::to_string(timing) +
           " timing and " + std::to_string(specs.size() - timing) + " compile actor(s)");
    return specs;
  }

  std::unique_ptr<detail::WorkerLink> open(const SlotSpec& spec, int restarts, const StopFn& stop,
                                           std::string& error) override {
    const std::string key = spec.name + "-" + std::to_string(restarts);
    const double wait_s = b_.options.startup_timeout_s + kCallGraceS;
    nlohmann::json message = spec.options;
    message["type"] = "open";
    message["slot"] = key;
    message["node"] = spec.node;
    message["role"] = spec.timing ? "timing" : "compile";
    message["stderr_tail_bytes"] = b_.options.stderr_tail_bytes;
    std::uint64_t driver = 0;
    {
      std::lock_guard lock(b_.mutex);
      driver = b_.driver_number;
    }
    auto r = b_.call(message, after(wait_s), stop, driver);
    if (r.answer == RayBackend::Impl::Answer::Value)
      return std::make_unique<RayLink>(b_, key, driver);
    b_.post({{"type", "close"}, {"slot", key}}, driver);
    if (r.answer == RayBackend::Impl::Answer::Timeout) {
      std::ostringstream s;
      s << "not placed or not started within " << wait_s
        << " s (is the node's GPU or CPU taken by another job?)";
      error = s.str();
    } else {
      error = r.answer == RayBackend::Impl::Answer::Stopped ? "the pool is shutting down" : r.why;
    }
    return nullptr;
  }

  bool node_alive(const std::string& node) override {
    auto r = b_.call({{"type", "node_alive"}, {"node", node}}, after(kCallGraceS), {});
    return r.answer == RayBackend::Impl::Answer::Value && r.value.is_boolean() &&
           r.value.get<bool>();
  }

private:
  RayBackend::Impl& b_;
};

} // namespace

RayBackend::RayBackend(RayOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  if (options.address.empty())
    throw std::runtime_error("the Ray backend needs a cluster address (--ray-address)");
  if (options.python.empty()) options.python = default_worker_python();
  options.python = find_program(options.python); // `python3` is looked up on PATH
  if (options.driver_script.empty()) options.driver_script = default_ray_driver();
  if (options.worker_script.empty()) options.worker_script = default_worker_script();
  s.options = std::move(options);
  // The driver dies with the thread that started it (PR_SET_PDEATHSIG): that thread lives until
  // shutdown.
  s.io = std::thread([&s] { s.run(); });
  s.placement = std::make_unique<RayPlacement>(s);
  detail::SchedulerOptions so;
  so.capacity = s.options.capacity;
  so.startup_timeout_s = s.options.startup_timeout_s;
  so.name = "ray";
  so.log = s.options.log;
  s.scheduler = std::make_unique<detail::MeasurementScheduler>(*s.placement, std::move(so));
  {
    std::lock_guard lock(s.mutex);
    s.lost_to = s.scheduler.get();
  }
  try {
    s.scheduler->start();
  } catch (const std::exception& e) {
    shutdown();
    throw std::runtime_error(e.what());
  }
}

RayBackend::~RayBackend() {
  shutdown();
}

std::future<Result> RayBackend::submit(Request request, ResultCallback callback) {
  return impl_->scheduler->submit(std::move(request), std::move(callback));
}

std::optional<std::future<Result>> RayBackend::try_submit(Request request,
                                                          ResultCallback callback) {
  return impl_->scheduler->try_submit(std::move(request), std::move(callback));
}

std::size_t RayBackend::withdraw(std::uint64_t owner) {
  return impl_->scheduler->withdraw(owner);
}

void RayBackend::shutdown() {
  Impl& s = *impl_;
  s.closing = true;
  s.scheduler->shutdown();
  {
    std::lock_guard lock(s.mutex);
    s.stopping = true;
    s.work_cv.notify_all();
  }
  if (s.io.joinable()) s.io.join();
}

std::vector<WorkerInfo> RayBackend::timing_workers() const {
  return impl_->scheduler->timing_workers();
}

nlohmann::json RayBackend::cluster() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->hello;
}

std::size_t RayBackend::in_flight() const {
  return impl_->scheduler->in_flight();
}

} // namespace dtx
