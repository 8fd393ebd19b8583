#include "dtx/RayBackend.h"

#include "WorkerProcess.h"
#include "dtx/Files.h"
#include "dtx/Protocol.h"
#include "dtx/WorkerPool.h"
#include "dtx/results/Utf8.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <deque>
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

struct Job {
  std::string id;
  Request request;
  std::promise<Result> promise;
  ResultCallback callback;
};
using JobPtr = std::shared_ptr<Job>;

Result backend_result(const std::string& id, Status status, std::string message,
                      std::string tail = {}) {
  Result r;
  r.id = id;
  r.status = status;
  r.message = std::move(message);
  r.stderr_tail = std::move(tail);
  return r;
}

// The driver's own explanation: its `dtx-ray:` lines, else the end of its standard error.
std::string explanation(const std::string& tail) {
  std::istringstream in(tail);
  std::string line, said;
  while (std::getline(in, line))
    if (line.rfind("dtx-ray: ", 0) == 0) said += (said.empty() ? "" : "\n") + line.substr(9);
  if (!said.empty()) return said;
  return utf8_tail(tail, 1500);
}

} // namespace

struct RayBackend::Impl {
  RayOptions options;
  mutable std::mutex mutex;
  std::condition_variable space_cv, work_cv;
  std::map<std::string, JobPtr> jobs; // in the backend: queued to send, or sent
  std::deque<std::string> outbox;     // request lines not yet written to the driver
  bool stopping = false;
  std::atomic<bool> kill_flag{false};
  std::atomic<std::uint64_t> next_id{1};
  std::vector<WorkerInfo> workers;
  nlohmann::json hello;
  std::thread io;
  std::unique_ptr<WorkerProcess> driver; // the io thread's

  void log(const std::string& line) const {
    if (options.log) options.log("ray", line);
  }

  void finish(const JobPtr& job, Result result) {
    result.id = job->id;
    if (job->callback) {
      try {
        job->callback(result);
      } catch (...) {
      }
    }
    {
      std::lock_guard lock(mutex);
      space_cv.notify_all();
    }
    job->promise.set_value(std::move(result));
  }

  // Fails every job in the backend (the driver is gone or the backend stops).
  void fail_all(Status status, const std::string& message, const std::string& tail = {}) {
    std::map<std::string, JobPtr> lost;
    {
      std::lock_guard lock(mutex);
      lost.swap(jobs);
      outbox.clear();
    }
    for (auto& [id, job] : lost)
      finish(job, backend_result(id, status, message, tail));
  }

  std::string request_line(const Job& job) const {
    nlohmann::json j = request_json(job.request, job.id);
    j["timeout_s"] = job.request.timeout_s;
    j["compile_first"] = job.request.compile_first;
    j["device"] = job.request.device;
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }

  bool start_driver(std::string& error) {
    WorkerProcess::Spec spec;
    spec.name = "ray-driver";
    spec.python = options.python.string();
    spec.args = {options.driver_script.string(),
                 "--address",
                 options.address,
                 "--worker-script",
                 options.worker_script.string(),
                 "--startup-timeout",
                 std::to_string(options.startup_timeout_s)};
    if (options.interpreter_workers > 0) {
      spec.args.push_back("--interpreter-workers");
      spec.args.push_back(std::to_string(options.interpreter_workers));
    }
    if (options.compile_per_node) {
      spec.args.push_back("--compile-per-node");
      spec.args.push_back(std::to_string(*options.compile_per_node));
    }
    if (!options.triton_cache_dir.empty()) {
      spec.args.push_back("--triton-cache");
      spec.args.push_back(options.triton_cache_dir.string());
    }
    spec.env["PYTHONUNBUFFERED"] = "1";
    spec.stderr_tail_bytes = options.stderr_tail_bytes;
    spec.log = options.log;
    driver = std::make_unique<WorkerProcess>(std::move(spec));
    auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(options.connect_timeout_s));
    std::string why;
    if (!driver->start(
            deadline, [this] { return kill_flag.load(); }, why)) {
      std::string said = explanation(driver->stderr_tail());
      error = "the Ray backend could not start: " + (said.empty() ? why : said);
      driver.reset();
      return false;
    }
    std::lock_guard lock(mutex);
    hello = driver->info().raw;
    log("driver pid " + std::to_string(driver->pid()) + " connected to " + options.address + ": " +
        std::to_string(hello.value("timing_workers", 0)) + " timing and " +
        std::to_string(hello.value("compile_workers", 0)) + " compile actor(s)");
    return true;
  }

  void on_line(const std::string& line) {
    nlohmann::json m = nlohmann::json::parse(line, nullptr, false);
    if (!m.is_object()) {
      log("ignored a line from the driver: " + line.substr(0, 200));
      return;
    }
    const std::string type = m.value("type", "");
    if (type == "result") {
      std::string id = m.contains("id") && m["id"].is_string() ? m["id"].get<std::string>() : "";
      JobPtr job;
      {
        std::lock_guard lock(mutex);
        if (auto it = jobs.find(id); it != jobs.end()) {
          job = it->second;
          jobs.erase(it);
        }
      }
      if (!job) {
        log("a result for no request in flight: " + line.substr(0, 200));
        return;
      }
      Result r = parse_result(m);
      if (auto w = m.find("worker"); w != m.end() && w->is_object()) r.worker = parse_hello(*w);
      if (auto a = m.find("ahead_compile_s"); a != m.end() && a->is_number())
        r.ahead_compile_s = a->get<double>();
      if (auto t = m.find("stderr_tail"); t != m.end() && t->is_string()) r.stderr_tail = *t;
      finish(job, std::move(r));
    } else if (type == "worker" || type == "worker_lost") {
      auto w = m.find("worker");
      if (w == m.end() || !w->is_object()) return;
      std::optional<WorkerInfo> info = parse_hello(*w);
      if (!info) return;
      auto same = [&](const WorkerInfo& x) {
        return x.raw.value("actor_pid", 0L) == info->raw.value("actor_pid", 0L) &&
               x.raw.value("node", "") == info->raw.value("node", "");
      };
      std::lock_guard lock(mutex);
      workers.erase(std::remove_if(workers.begin(), workers.end(), same), workers.end());
      if (type == "worker") workers.push_back(*info);
      log((type == "worker" ? "timing worker ready: " : "timing worker lost: ") +
          info->device_name + " on " + info->raw.value("host", "?") + " gpu " +
          info->raw.value("gpu", nlohmann::json()).dump() +
          (type == "worker_lost" ? " (" + m.value("reason", "") + ")" : ""));
    } else {
      log("ignored a message from the driver: " + line.substr(0, 200));
    }
  }

  void driver_died() {
    std::string how = driver->wait_and_describe();
    std::string tail = driver->stderr_tail();
    log("the driver (pid " + std::to_string(driver->pid()) + ") " + how);
    driver.reset();
    {
      std::lock_guard lock(mutex);
      workers.clear();
    }
    fail_all(Status::Crashed, "the Ray driver " + how + ": " + explanation(tail), tail);
  }

  void run(std::promise<std::string>& started) {
    sigset_t pipe_set;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, nullptr);
    auto hard_stop = [this] { return kill_flag.load(); };
    {
      std::string error;
      bool ok = start_driver(error);
      started.set_value(ok ? "" : error);
      if (!ok) return;
    }
    for (;;) {
      std::deque<std::string> lines;
      bool stop = false;
      {
        std::unique_lock lock(mutex);
        if (!driver)
          work_cv.wait_for(lock, std::chrono::milliseconds(200),
                           [&] { return stopping || !outbox.empty(); });
        stop = stopping;
        lines.swap(outbox);
      }
      if (stop) break;
      if (!driver) {
        if (lines.empty()) continue;
        std::string error;
        if (!start_driver(error)) { // its requests fail; a later one tries again
          fail_all(Status::Crashed, error);
          continue;
        }
      }
      bool closed = false;
      for (const std::string& line : lines) {
        auto deadline = Clock::now() + std::chrono::seconds(60);
        if (driver->send(line, deadline, hard_stop) != WorkerProcess::Io::Done) {
          closed = true;
          break;
        }
      }
      std::string reply;
      while (!closed) {
        auto got =
            driver->read_line(reply, Clock::now() + std::chrono::milliseconds(20), hard_stop);
        if (got == WorkerProcess::Io::Done) {
          on_line(reply);
          continue;
        }
        closed = got == WorkerProcess::Io::Closed;
        break;
      }
      if (closed) driver_died();
    }
    // Shut down: the driver fails its queued requests, stops its actors and removes its files.
    if (driver) {
      auto deadline = Clock::now() + std::chrono::seconds(60);
      if (driver->send("{\"type\": \"shutdown\"}\n", deadline, hard_stop) ==
          WorkerProcess::Io::Done) {
        std::string reply;
        while (driver->read_line(reply, deadline, hard_stop) == WorkerProcess::Io::Done)
          on_line(reply);
      }
      driver->kill();
      driver.reset();
    }
    fail_all(Status::Crashed, "the backend shut down");
  }
};

RayBackend::RayBackend(RayOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  if (options.address.empty())
    throw std::runtime_error("the Ray backend needs a cluster address (--ray-address)");
  if (options.python.empty()) options.python = default_worker_python();
  options.python = find_program(options.python); // `python3` is looked up on PATH
  if (options.driver_script.empty()) options.driver_script = default_ray_driver();
  if (options.worker_script.empty()) options.worker_script = default_worker_script();
  if (options.capacity == 0) options.capacity = 1;
  s.options = std::move(options);
  // The driver dies with the thread that started it (PR_SET_PDEATHSIG): that thread lives until
  // shutdown.
  std::promise<std::string> started;
  auto ready = started.get_future();
  s.io = std::thread([&s, &started] { s.run(started); });
  if (std::string error = ready.get(); !error.empty()) {
    s.io.join();
    throw std::runtime_error(error);
  }
}

RayBackend::~RayBackend() {
  shutdown();
}

namespace {

JobPtr make_job(std::atomic<std::uint64_t>& next_id, Request request, ResultCallback callback) {
  auto job = std::make_shared<Job>();
  job->id = std::to_string(next_id++);
  job->request = std::move(request);
  job->callback = std::move(callback);
  return job;
}

} // namespace

std::future<Result> RayBackend::submit(Request request, ResultCallback callback) {
  Impl& s = *impl_;
  JobPtr job = make_job(s.next_id, std::move(request), std::move(callback));
  auto future = job->promise.get_future();
  std::unique_lock lock(s.mutex);
  s.space_cv.wait(lock, [&] { return s.stopping || s.jobs.size() < s.options.capacity; });
  if (s.stopping) {
    lock.unlock();
    s.finish(job, backend_result(job->id, Status::Crashed, "the backend shut down"));
    return future;
  }
  s.jobs[job->id] = job;
  s.outbox.push_back(s.request_line(*job));
  s.work_cv.notify_all();
  return future;
}

std::optional<std::future<Result>> RayBackend::try_submit(Request request,
                                                          ResultCallback callback) {
  Impl& s = *impl_;
  std::lock_guard lock(s.mutex);
  if (s.stopping || s.jobs.size() >= s.options.capacity) return std::nullopt;
  JobPtr job = make_job(s.next_id, std::move(request), std::move(callback));
  auto future = job->promise.get_future();
  s.jobs[job->id] = job;
  s.outbox.push_back(s.request_line(*job));
  s.work_cv.notify_all();
  return future;
}

void RayBackend::shutdown() {
  Impl& s = *impl_;
  {
    std::lock_guard lock(s.mutex);
    if (s.stopping) return;
    s.stopping = true;
    s.work_cv.notify_all();
    s.space_cv.notify_all();
  }
  if (s.io.joinable()) s.io.join();
}

std::vector<WorkerInfo> RayBackend::timing_workers() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->workers;
}

nlohmann::json RayBackend::cluster() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->hello;
}

std::size_t RayBackend::in_flight() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->jobs.size();
}

} // namespace dtx
