#include "dtx/WorkerPool.h"

#include "MeasurementScheduler.h"
#include "WorkerProcess.h"
#include "dtx/Files.h"
#include "dtx/Protocol.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

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

std::filesystem::path package_worker_script(const std::filesystem::path& python) {
  // The worker is the module dtx.worker of the installed package (pyproject.toml): the
  // interpreter that will run it says where that is, without importing torch.
  std::string command = "'" + python.string() +
                        "' -c 'import importlib.util as u; s = u.find_spec(\"dtx.worker\"); "
                        "print(s.origin if s else \"\")' 2>/dev/null";
  if (python.string().find('\'') != std::string::npos) return {};
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return {};
  std::string out;
  char buffer[4096];
  while (std::size_t n = std::fread(buffer, 1, sizeof buffer, pipe))
    out.append(buffer, n);
  ::pclose(pipe);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r'))
    out.pop_back();
  std::error_code ec;
  if (out.empty() || !std::filesystem::is_regular_file(out, ec)) return {};
  return out;
}

std::filesystem::path default_worker_script() {
  if (const char* p = std::getenv("DTX_WORKER_SCRIPT"); p && *p) return p;
  static const std::filesystem::path from_package = package_worker_script(default_worker_python());
  if (!from_package.empty()) return from_package;
  return dtx_file(std::filesystem::path("src") / "dtx" / "worker.py");
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

using detail::SlotSpec;
using detail::StopFn;

// A worker process that this process starts (WorkerProcess), as a slot reaches it.
class LocalLink final : public detail::WorkerLink {
public:
  explicit LocalLink(WorkerProcess::Spec spec) : spec_(std::move(spec)) {}

  Io start(Clock::time_point deadline, const StopFn& stop, std::string& error) override {
    proc_ = std::make_unique<WorkerProcess>(spec_);
    live_ = proc_->start(deadline, stop, error);
    if (live_) info_ = proc_->info();
    return live_ ? Io::Done : Io::Closed;
  }
  bool has_worker() const override { return live_; }
  bool running() override { return live_ && proc_->running(); }

  Io exchange(const nlohmann::json& request, Clock::time_point deadline, const StopFn& stop,
              nlohmann::json& reply) override {
    const nlohmann::json id = request.value("id", nlohmann::json());
    const std::string line =
        request.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    WorkerProcess::Io io = proc_->send(line, deadline, stop);
    if (io == WorkerProcess::Io::Closed) return Io::Unsent;
    std::string text;
    while (io == WorkerProcess::Io::Done) {
      io = proc_->read_line(text, deadline, stop);
      if (io != WorkerProcess::Io::Done) break;
      nlohmann::json message = nlohmann::json::parse(text, nullptr, false);
      if (message.is_object() && message.value("type", nlohmann::json()) == "result" &&
          message.value("id", nlohmann::json()) == id) {
        reply = std::move(message);
        return Io::Done;
      }
      if (spec_.log)
        spec_.log(spec_.name, "ignored a line from the worker: " + text.substr(0, 200));
    }
    switch (io) {
    case WorkerProcess::Io::Timeout:
      return Io::Timeout;
    case WorkerProcess::Io::Stopped:
      return Io::Stopped;
    default:
      return Io::Closed;
    }
  }

  void kill() override {
    if (proc_) proc_->kill();
    live_ = false;
  }
  std::string reap() override {
    live_ = false;
    return proc_ ? proc_->wait_and_describe() : "not started";
  }
  std::string stderr_tail() const override { return proc_ ? proc_->stderr_tail() : ""; }
  const WorkerInfo& info() const override { return info_; }
  long pid() const override { return proc_ ? proc_->pid() : 0; }
  void idle() override {
    if (live_) proc_->drain_stderr();
  }

private:
  WorkerProcess::Spec spec_;
  std::unique_ptr<WorkerProcess> proc_; // the latest worker, kept after it ended for its tail
  bool live_ = false;
  WorkerInfo info_;
};

// One node, this machine: compile slots and a timing slot per GPU (or one on the interpreter).
class LocalPlacement final : public detail::Placement {
public:
  LocalPlacement(const PoolOptions& options, std::filesystem::path cache_dir)
      : options_(options), cache_dir_(std::move(cache_dir)) {}

  std::vector<SlotSpec> plan() override {
    std::vector<SlotSpec> specs;
    auto add = [&](std::string name, bool timing, std::optional<int> gpu) {
      SlotSpec spec;
      spec.name = std::move(name);
      spec.node = "local";
      spec.timing = timing;
      if (gpu) spec.options["gpu"] = *gpu;
      specs.push_back(std::move(spec));
    };
    const std::vector<int>& gpus = options_.gpus;
    for (int i = 0; i < options_.compile_workers; ++i)
      add("compile-" + std::to_string(i), false,
          gpus.empty() ? std::nullopt
                       : std::optional<int>(gpus[static_cast<std::size_t>(i) % gpus.size()]));
    if (gpus.empty()) add("timing-cpu", true, std::nullopt);
    for (int gpu : gpus)
      add("timing-gpu" + std::to_string(gpu), true, gpu);
    return specs;
  }

  std::unique_ptr<detail::WorkerLink> open(const SlotSpec& slot, int, const StopFn&,
                                           std::string&) override {
    WorkerProcess::Spec spec;
    spec.name = slot.name;
    spec.python = options_.python.string();
    spec.args = {options_.worker_script.string(), "--role", slot.timing ? "timing" : "compile",
                 "--protocol", std::to_string(kProtocolVersion)};
    if (slot.options.contains("gpu")) {
      spec.args.push_back("--device-index");
      spec.args.push_back("0");
      spec.env["CUDA_VISIBLE_DEVICES"] = std::to_string(slot.options["gpu"].get<int>());
    }
    for (const auto& a : options_.extra_args)
      spec.args.push_back(a);
    spec.env["TRITON_CACHE_DIR"] = cache_dir_.string();
    spec.env["PYTHONUNBUFFERED"] = "1";
    spec.stderr_tail_bytes = options_.stderr_tail_bytes;
    spec.log = options_.log;
    return std::make_unique<LocalLink>(std::move(spec));
  }

  bool node_alive(const std::string&) override { return true; }

private:
  const PoolOptions& options_;
  std::filesystem::path cache_dir_;
};

} // namespace

struct WorkerPool::Impl {
  PoolOptions options;
  std::filesystem::path cache_dir;
  bool owns_cache = false;
  std::unique_ptr<LocalPlacement> placement;
  std::unique_ptr<detail::MeasurementScheduler> scheduler;
};

WorkerPool::WorkerPool(PoolOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  if (options.python.empty()) options.python = default_worker_python();
  options.python = find_program(options.python); // `python3` is looked up on PATH
  if (options.worker_script.empty()) options.worker_script = default_worker_script();
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
  s.placement = std::make_unique<LocalPlacement>(s.options, s.cache_dir);
  detail::SchedulerOptions so;
  so.capacity = s.options.capacity;
  so.startup_timeout_s = s.options.startup_timeout_s;
  so.eager_start = s.options.eager_start;
  so.prefetch = s.options.prefetch;
  so.name = "pool";
  so.log = s.options.log;
  s.scheduler = std::make_unique<detail::MeasurementScheduler>(*s.placement, std::move(so));
  s.scheduler->start();
}

WorkerPool::~WorkerPool() {
  shutdown();
}

std::future<Result> WorkerPool::submit(Request request, ResultCallback callback) {
  return impl_->scheduler->submit(std::move(request), std::move(callback));
}

std::optional<std::future<Result>> WorkerPool::try_submit(Request request,
                                                          ResultCallback callback) {
  return impl_->scheduler->try_submit(std::move(request), std::move(callback));
}

std::size_t WorkerPool::withdraw(std::uint64_t owner) {
  return impl_->scheduler->withdraw(owner);
}

void WorkerPool::shutdown() {
  Impl& s = *impl_;
  s.scheduler->shutdown();
  if (s.owns_cache) {
    std::error_code ec;
    std::filesystem::remove_all(s.cache_dir, ec);
    s.owns_cache = false;
  }
}

std::vector<WorkerInfo> WorkerPool::timing_workers() const {
  return impl_->scheduler->timing_workers();
}

std::vector<long> WorkerPool::worker_pids() const {
  return impl_->scheduler->worker_pids();
}

std::size_t WorkerPool::in_flight() const {
  return impl_->scheduler->in_flight();
}

} // namespace dtx
