#include "dtx/WorkerPool.h"

#include "WorkerProcess.h"
#include "dtx/Files.h"
#include "dtx/Protocol.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>

#include <unistd.h>

namespace dtx {

using detail::Clock;
using detail::WorkerProcess;

std::filesystem::path default_worker_python() {
  if (const char* p = std::getenv("DTX_WORKER_PYTHON"); p && *p) return p;
  // A source tree has the project's virtual environment (deploy/setup.sh); an installed tree
  // uses the python3 on PATH unless told otherwise (`--python`, the `python` key).
  if (!files_root().installed) return dtx_file(std::filesystem::path(".venv") / "bin" / "python");
  return find_program("python3");
}

std::filesystem::path search_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (std::size_t begin = 0; begin <= dirs.size();) {
    std::size_t end = dirs.find(':', begin);
    if (end == std::string::npos) end = dirs.size();
    std::filesystem::path candidate =
        std::filesystem::path(end > begin ? dirs.substr(begin, end - begin) : ".") / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    begin = end + 1;
  }
  return {};
}

std::filesystem::path find_program(const std::filesystem::path& program) {
  if (program.has_parent_path()) return program;
  std::filesystem::path found = search_path(program.string());
  return found.empty() ? program : found;
}

std::filesystem::path default_worker_script() {
  if (const char* p = std::getenv("DTX_WORKER_SCRIPT"); p && *p) return p;
  return dtx_file(std::filesystem::path("explorer") / "worker" / "dtx_worker.py");
}

std::vector<int> visible_gpus() {
  std::vector<int> gpus;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) {
    std::string s = v;
    for (std::size_t i = 0, n = 0; i <= s.size(); ++i)
      if (i == s.size() || s[i] == ',') {
        if (i > n) gpus.push_back(static_cast<int>(gpus.size()));
        n = i + 1;
      }
    return gpus; // indices within the visible set, as CUDA numbers them
  }
  for (int i = 0; i < 64; ++i)
    if (std::filesystem::exists("/dev/nvidia" + std::to_string(i))) gpus.push_back(i);
  return gpus;
}

std::vector<int> parse_gpus(const std::string& text) {
  if (text == "none") return {};
  std::vector<int> gpus;
  std::size_t start = 0;
  while (true) {
    std::size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? comma : comma - start);
    if (item.empty() || item.size() > 4 ||
        item.find_first_not_of("0123456789") != std::string::npos)
      throw std::invalid_argument(
          "`" + text + "`: give GPU indices separated by commas (0,1), or none for no GPU");
    int g = std::stoi(item);
    if (std::find(gpus.begin(), gpus.end(), g) != gpus.end())
      throw std::invalid_argument("`" + text + "`: GPU " + item + " is listed twice");
    gpus.push_back(g);
    if (comma == std::string::npos) return gpus;
    start = comma + 1;
  }
}

std::string program_problem(const std::filesystem::path& program) {
  std::filesystem::path found = find_program(program);
  std::error_code ec;
  if (program.empty() || !std::filesystem::is_regular_file(found, ec) ||
      access(found.c_str(), X_OK) != 0)
    return "`" + program.string() + "` is not an executable file" +
           (program.has_parent_path() ? "" : " nor a program on PATH");
  return "";
}

namespace {

struct Job {
  std::string id;
  Request request;
  std::promise<Result> promise;
  ResultCallback callback;
  std::optional<double> ahead_compile_s;
  /// The timing slot that was told to ready this job (`prefetch`) and so takes it; under
  /// Impl::mutex.
  const void* reserved_for = nullptr;
};
using JobPtr = std::shared_ptr<Job>;

Result pool_result(const std::string& id, Status status, std::string message,
                   std::string tail = {}) {
  Result r;
  r.id = id;
  r.status = status;
  r.message = std::move(message);
  r.stderr_tail = std::move(tail);
  return r;
}

} // namespace

struct WorkerPool::Impl {
  struct Slot {
    std::string name;
    bool timing = false;
    std::optional<int> gpu;
    std::thread thread;
    std::atomic<long> pid{0};
    std::optional<WorkerInfo> info; // under Impl::mutex
  };

  PoolOptions options;
  std::filesystem::path cache_dir;
  bool owns_cache = false;

  mutable std::mutex mutex;
  std::condition_variable work_cv, space_cv;
  std::deque<JobPtr> compile_queue, timing_queue;
  std::size_t in_flight = 0;
  bool stopping = false;
  std::atomic<bool> stop_flag{false};
  std::atomic<std::uint64_t> next_id{1};
  std::vector<std::unique_ptr<Slot>> slots;

  void log(const std::string& who, const std::string& line) const {
    if (options.log) options.log(who, line);
  }

  void finish(const JobPtr& job, Result result) {
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

  std::unique_ptr<WorkerProcess> make_process(Slot& slot) {
    WorkerProcess::Spec spec;
    spec.name = slot.name;
    spec.python = options.python.string();
    spec.args = {options.worker_script.string(), "--role", slot.timing ? "timing" : "compile"};
    if (slot.gpu) {
      spec.args.push_back("--device-index");
      spec.args.push_back("0");
      spec.env["CUDA_VISIBLE_DEVICES"] = std::to_string(*slot.gpu);
    }
    for (const auto& a : options.extra_args)
      spec.args.push_back(a);
    spec.env["TRITON_CACHE_DIR"] = cache_dir.string();
    spec.env["PYTHONUNBUFFERED"] = "1";
    spec.stderr_tail_bytes = options.stderr_tail_bytes;
    spec.log = options.log;
    return std::make_unique<WorkerProcess>(std::move(spec));
  }

  bool ensure_worker(Slot& slot, std::unique_ptr<WorkerProcess>& proc, bool& last_runtime_error,
                     std::string& error, std::string& tail) {
    proc = make_process(slot);
    auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(options.startup_timeout_s));
    if (!proc->start(
            deadline, [this] { return stop_flag.load(); }, error)) {
      tail = proc->stderr_tail();
      log(slot.name, "worker did not start: " + error);
      proc.reset();
      slot.pid = 0;
      return false;
    }
    slot.pid = proc->pid();
    last_runtime_error = false;
    const WorkerInfo& info = proc->info();
    log(slot.name, "hello: pid " + std::to_string(info.pid) + ", python " + info.python +
                       ", torch " + info.torch + ", triton " + info.triton + ", device " +
                       info.device_kind + " " + info.device_name);
    std::lock_guard lock(mutex);
    slot.info = info;
    return true;
  }

  void run_slot(Slot& slot) {
    // SIGPIPE from writing to a dead worker is an error return here, not a signal. The worker
    // gets an empty mask back in ChildSetup.
    sigset_t pipe_set;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, nullptr);

    std::unique_ptr<WorkerProcess> proc;
    bool last_runtime_error = false;
    auto& queue = slot.timing ? timing_queue : compile_queue;
    auto stop = [this] { return stop_flag.load(); };
    if (options.eager_start) { // start importing torch now, not when the first request comes
      std::string error, tail;
      ensure_worker(slot, proc, last_runtime_error, error, tail);
    }
    for (;;) {
      JobPtr job;
      {
        std::unique_lock lock(mutex);
        work_cv.wait_for(lock, std::chrono::milliseconds(200),
                         [&] { return stopping || takeable(queue, slot) != queue.end(); });
        if (stopping) break;
        if (auto it = takeable(queue, slot); it != queue.end()) {
          job = *it;
          queue.erase(it);
        }
      }
      if (!job) {
        if (proc) proc->drain_stderr();
        continue;
      }
      run_job(slot, proc, last_runtime_error, job, stop);
    }
    if (proc) proc->kill();
    slot.pid = 0;
  }

  void run_job(Slot& slot, std::unique_ptr<WorkerProcess>& proc, bool& last_runtime_error,
               const JobPtr& job, const std::function<bool()>& stop) {
    Request request = job->request;
    if (!slot.timing) request.kind = RequestKind::Compile;
    if (slot.timing && !request.device.empty()) {
      std::optional<WorkerInfo> info;
      {
        std::lock_guard lock(mutex);
        info = slot.info;
      }
      if (info && info->device_name != request.device)
        return finish(job, pool_result(job->id, Status::RuntimeError,
                                       "no timing worker of the device model `" + request.device +
                                           "` in this pool (" + slot.name + " has `" +
                                           info->device_name + "`)"));
    }
    nlohmann::json sent = request_json(request, job->id);
    // A prefetch is work for the next request done within this one: allow this one time for
    // it, twice what the compile worker spent readying the same module (a bound: the compile
    // worker also compiled), so that a slow import of the next module does not time this one
    // out.
    double limit_s = request.timeout_s;
    if (slot.timing && options.prefetch)
      if (JobPtr next = next_measure(slot); next) {
        sent["prefetch"] = request_json(next->request, next->id);
        limit_s += std::min(next->request.timeout_s, 2 * next->ahead_compile_s.value_or(0) + 1);
      }
    const std::string line =
        sent.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    Result result;
    for (int attempt = 0;; ++attempt) {
      if (proc && !proc->running()) {
        log(slot.name, "worker pid " + std::to_string(proc->pid()) + " " +
                           proc->wait_and_describe() + "; starting a new one");
        proc.reset();
      }
      if (!proc) {
        std::string error, tail;
        if (!ensure_worker(slot, proc, last_runtime_error, error, tail))
          return finish(
              job, pool_result(job->id, Status::Crashed, "worker did not start: " + error, tail));
      }
      auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                         std::chrono::duration<double>(limit_s));
      WorkerProcess::Io io = proc->send(line, deadline, stop);
      if (io == WorkerProcess::Io::Closed && attempt == 0) {
        // It died while idle (after a CUDA error it exits): not this request's doing.
        continue;
      }
      std::string reply;
      while (io == WorkerProcess::Io::Done) {
        io = proc->read_line(reply, deadline, stop);
        if (io != WorkerProcess::Io::Done) break;
        nlohmann::json message = nlohmann::json::parse(reply, nullptr, false);
        if (message.is_object() && message.value("type", "") == "result" &&
            message.value("id", "") == job->id)
          break;
        log(slot.name, "ignored a line from the worker: " + reply.substr(0, 200));
      }
      if (io == WorkerProcess::Io::Done) {
        result = parse_result(nlohmann::json::parse(reply, nullptr, false));
        result.worker = proc->info();
        break;
      }
      if (io == WorkerProcess::Io::Timeout) {
        proc->kill();
        result =
            pool_result(job->id, Status::Timeout,
                        "no reply within " + std::to_string(limit_s) + " s; the worker was killed",
                        proc->stderr_tail());
        log(slot.name, "request " + job->id + " timed out; worker pid " +
                           std::to_string(proc->pid()) + " killed");
        proc.reset();
        slot.pid = 0;
        break;
      }
      if (io == WorkerProcess::Io::Stopped) {
        proc->kill();
        result = pool_result(job->id, Status::Crashed, "the pool shut down", proc->stderr_tail());
        proc.reset();
        slot.pid = 0;
        break;
      }
      // Closed: the worker died during the request.
      std::string how = proc->wait_and_describe();
      std::string tail = proc->stderr_tail();
      log(slot.name, "worker pid " + std::to_string(proc->pid()) + " died during request " +
                         job->id + ": " + how);
      proc.reset();
      slot.pid = 0;
      if (last_runtime_error && attempt == 0) {
        last_runtime_error = false; // it was exiting after its previous request's error
        continue;
      }
      result = pool_result(job->id, Status::Crashed, "the worker died: " + how, tail);
      break;
    }
    last_runtime_error = result.status == Status::RuntimeError;
    if (proc && result.status == Status::RuntimeError && is_cuda_error(result.message)) {
      log(slot.name, "CUDA error: replacing worker pid " + std::to_string(proc->pid()));
      proc->kill();
      proc.reset();
      slot.pid = 0;
    }
    if (!slot.timing && job->request.kind == RequestKind::Measure && result.status == Status::Ok) {
      job->ahead_compile_s = result.compile_s;
      std::lock_guard lock(mutex);
      if (!stopping) {
        timing_queue.push_back(job);
        work_cv.notify_all();
        return;
      }
      result = pool_result(job->id, Status::Crashed, "the pool shut down");
    }
    finish(job, std::move(result));
  }

  // The job `slot` takes next: the one it was told to ready, else the first nobody was told
  // to ready. Under the lock.
  static std::deque<JobPtr>::iterator takeable(std::deque<JobPtr>& queue, const Slot& slot) {
    auto mine = std::find_if(queue.begin(), queue.end(),
                             [&](const JobPtr& j) { return j->reserved_for == &slot; });
    if (mine != queue.end()) return mine;
    return std::find_if(queue.begin(), queue.end(),
                        [](const JobPtr& j) { return j->reserved_for == nullptr; });
  }

  // The Measure request the timing worker of `slot` takes next, reserved for it (another
  // timing worker taking it would waste the preparation), if one is queued and a compile
  // worker has already imported its module and run its wrapper (in warm-up mode): one whose
  // import or host code hangs or kills its process was caught there, so readying it cannot
  // cost the request being timed.
  JobPtr next_measure(const Slot& slot) {
    std::lock_guard lock(mutex);
    auto it = takeable(timing_queue, slot);
    if (it == timing_queue.end()) return nullptr;
    const JobPtr& next = *it;
    if (next->request.kind != RequestKind::Measure || !next->ahead_compile_s) return nullptr;
    next->reserved_for = &slot;
    return next;
  }

  JobPtr make_job(Request request, ResultCallback callback) {
    auto job = std::make_shared<Job>();
    job->id = std::to_string(next_id++);
    job->request = std::move(request);
    job->callback = std::move(callback);
    return job;
  }

  // Under the lock, with room.
  void enqueue(const JobPtr& job) {
    ++in_flight;
    bool compile_stage =
        options.compile_workers > 0 &&
        ((job->request.kind == RequestKind::Measure && job->request.compile_first) ||
         job->request.kind == RequestKind::Compile);
    (compile_stage ? compile_queue : timing_queue).push_back(job);
    work_cv.notify_all();
  }
};

WorkerPool::WorkerPool(PoolOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  if (options.python.empty()) options.python = default_worker_python();
  options.python = find_program(options.python); // `python3` is looked up on PATH
  if (options.worker_script.empty()) options.worker_script = default_worker_script();
  if (options.capacity == 0) options.capacity = 1;
  s.options = std::move(options);
  if (s.options.triton_cache_dir.empty()) {
    std::string pattern = (std::filesystem::temp_directory_path() / "dtx-triton-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr)
      throw std::runtime_error("cannot create a Triton cache directory under " +
                               std::filesystem::temp_directory_path().string());
    s.cache_dir = pattern;
    s.owns_cache = true;
  } else {
    s.cache_dir = s.options.triton_cache_dir;
    std::filesystem::create_directories(s.cache_dir);
  }
  for (int i = 0; i < s.options.compile_workers; ++i) {
    auto slot = std::make_unique<Impl::Slot>();
    slot->name = "compile-" + std::to_string(i);
    if (!s.options.gpus.empty())
      slot->gpu = s.options.gpus[static_cast<std::size_t>(i) % s.options.gpus.size()];
    s.slots.push_back(std::move(slot));
  }
  if (s.options.gpus.empty()) {
    auto slot = std::make_unique<Impl::Slot>();
    slot->name = "timing-cpu";
    slot->timing = true;
    s.slots.push_back(std::move(slot));
  }
  for (int gpu : s.options.gpus) {
    auto slot = std::make_unique<Impl::Slot>();
    slot->name = "timing-gpu" + std::to_string(gpu);
    slot->timing = true;
    slot->gpu = gpu;
    s.slots.push_back(std::move(slot));
  }
  // Each slot's thread owns its worker for the pool's lifetime: PR_SET_PDEATHSIG fires when the
  // thread that forked a worker ends, so these threads end only in shutdown.
  for (auto& slot : s.slots)
    slot->thread = std::thread([&s, p = slot.get()] { s.run_slot(*p); });
}

WorkerPool::~WorkerPool() {
  shutdown();
}

std::future<Result> WorkerPool::submit(Request request, ResultCallback callback) {
  Impl& s = *impl_;
  JobPtr job = s.make_job(std::move(request), std::move(callback));
  auto future = job->promise.get_future();
  std::unique_lock lock(s.mutex);
  s.space_cv.wait(lock, [&] { return s.stopping || s.in_flight < s.options.capacity; });
  if (s.stopping) {
    ++s.in_flight; // finish() decrements
    lock.unlock();
    s.finish(job, pool_result(job->id, Status::Crashed, "the pool shut down"));
    return future;
  }
  s.enqueue(job);
  return future;
}

std::optional<std::future<Result>> WorkerPool::try_submit(Request request,
                                                          ResultCallback callback) {
  Impl& s = *impl_;
  std::unique_lock lock(s.mutex);
  if (s.stopping || s.in_flight >= s.options.capacity) return std::nullopt;
  JobPtr job = s.make_job(std::move(request), std::move(callback));
  auto future = job->promise.get_future();
  s.enqueue(job);
  return future;
}

void WorkerPool::shutdown() {
  Impl& s = *impl_;
  std::deque<JobPtr> dropped;
  {
    std::lock_guard lock(s.mutex);
    if (s.stopping && s.slots.empty()) return;
    s.stopping = true;
    s.stop_flag = true;
    for (auto* q : {&s.compile_queue, &s.timing_queue}) {
      dropped.insert(dropped.end(), q->begin(), q->end());
      q->clear();
    }
    s.work_cv.notify_all();
    s.space_cv.notify_all();
  }
  for (auto& job : dropped)
    s.finish(job, pool_result(job->id, Status::Crashed, "the pool shut down"));
  for (auto& slot : s.slots)
    if (slot->thread.joinable()) slot->thread.join();
  {
    std::lock_guard lock(s.mutex);
    s.slots.clear();
  }
  if (s.owns_cache) {
    std::error_code ec;
    std::filesystem::remove_all(s.cache_dir, ec);
    s.owns_cache = false;
  }
}

std::vector<WorkerInfo> WorkerPool::timing_workers() const {
  std::lock_guard lock(impl_->mutex);
  std::vector<WorkerInfo> out;
  for (const auto& slot : impl_->slots)
    if (slot->timing && slot->info) out.push_back(*slot->info);
  return out;
}

std::vector<long> WorkerPool::worker_pids() const {
  std::lock_guard lock(impl_->mutex);
  std::vector<long> out;
  for (const auto& slot : impl_->slots)
    if (long pid = slot->pid.load()) out.push_back(pid);
  return out;
}

std::size_t WorkerPool::in_flight() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->in_flight;
}

} // namespace dtx
