// dtxd's assembly: store, pool, scheduler, routes (see Server.h).
#include "dtx/server/Server.h"

#include "Api.h"
#include "Connection.h"
#include "Guard.h"

#include "dtx/Files.h"
#include "dtx/RayBackend.h"
#include "dtx/WorkerPool.h"

#include <chrono>
#include <filesystem>

#include <sys/resource.h>
#include <sys/socket.h>

namespace dtx::server {

struct Server::Impl {
  Config config;
  std::shared_ptr<spdlog::logger> log;
  std::unique_ptr<results::Store> store;
  Metrics metrics;
  std::unique_ptr<MeasurementBackend> pool;
  std::unique_ptr<Scheduler> scheduler;
  std::unique_ptr<Context> context;
  std::unique_ptr<HttpServer> http; // made at start(), with the configuration's limits
  std::unique_ptr<Api> api;
  int port = 0;
  int listen_fd = -1;
  std::mutex stop_mutex;
  bool stopped = false;
};

Server::Server(Config config, std::shared_ptr<spdlog::logger> log)
    : impl_(std::make_unique<Impl>()) {
  impl_->config = std::move(config);
  impl_->log = std::move(log);
}

Server::~Server() {
  stop();
}

void Server::start() {
  Impl& s = *impl_;
  Config& c = s.config;
  if (c.templates_dir.empty()) c.templates_dir = dtx_file("templates");
  if (c.web_dir.empty()) c.web_dir = dtx_file("web");
  s.log->info("dtx's files: {} ({})", files_root().dir.string(), files_root().how);
  std::filesystem::create_directories(c.data_dir);
  s.store = results::Store::open(c.db_path());
  // A damaged file would be served as if healthy, every read of its bad pages a 500.
  if (std::string damage = s.store->damage(); !damage.empty())
    throw std::runtime_error("the results store " + c.db_path().string() +
                             " is damaged; SQLite's quick_check found:\n" + damage +
                             "\nRestore it from a backup, or move it aside to start with a new "
                             "one (`sqlite3 FILE .recover` may save what is left of its rows)");
  s.log->info("results store {} (schema {})", c.db_path().string(), s.store->version());

  auto log = s.log;
  Metrics* metrics = &s.metrics;
  auto pool_log = [log, metrics](const std::string& who, const std::string& line) {
    if (line.rfind("started pid", 0) == 0) {
      metrics->worker_started();
      log->info("[{}] {}", who, line);
    } else if (line.rfind("hello:", 0) == 0 || line.rfind("worker ", 0) == 0 ||
               line.rfind("CUDA error", 0) == 0 || line.rfind("dtx-ray: ", 0) == 0 ||
               who == "ray") {
      log->info("[{}] {}", who, line);
    } else {
      log->debug("[{}] {}", who, line);
    }
  };
  // Enough requests in flight to keep every worker busy (compiles run ahead of timing), no
  // more: a deep queue would let one exploration's requests wait in front of another's.
  std::size_t in_flight = 0;
  if (c.backend == "ray") {
    RayOptions ro;
    ro.address = c.ray_address;
    if (!c.python.empty()) ro.python = c.python;
    if (!c.worker_script.empty()) ro.worker_script = c.worker_script;
    ro.interpreter_workers = c.ray_interpreter_workers;
    if (c.ray_compile_per_node >= 0) ro.compile_per_node = c.ray_compile_per_node;
    ro.log = pool_log;
    auto ray = std::make_unique<RayBackend>(std::move(ro)); // throws, saying why
    nlohmann::json hello = ray->cluster();
    std::size_t timing = hello.value("timing_workers", 0),
                compile = hello.value("compile_workers", 0);
    c.gpus.clear(); // what runs, for /healthz: the cluster's GPUs
    if (hello.contains("nodes"))
      for (const auto& n : hello["nodes"])
        for (int g = 0; g < n.value("gpus", 0) && c.ray_interpreter_workers == 0; ++g)
          c.gpus.push_back(static_cast<int>(c.gpus.size()));
    s.log->info("Ray cluster at {}: {} timing and {} compile actor(s){}", c.ray_address, timing,
                compile, c.ray_interpreter_workers ? " on the Triton interpreter" : "");
    in_flight = 2 * std::max<std::size_t>(1, timing + compile);
    s.pool = std::move(ray);
  } else {
    PoolOptions po;
    po.compile_workers = c.compile_workers;
    po.gpus = c.gpus_given ? c.gpus : visible_gpus();
    c.gpus = po.gpus; // what runs, for /healthz
    if (!c.python.empty()) po.python = c.python;
    if (!c.worker_script.empty()) po.worker_script = c.worker_script;
    po.triton_cache_dir = c.data_dir / "triton-cache";
    std::filesystem::create_directories(po.triton_cache_dir);
    po.log = pool_log;
    s.log->info("{} compile worker(s), {} timing worker(s){}", po.compile_workers,
                std::max<std::size_t>(1, po.gpus.size()),
                po.gpus.empty() ? " on the Triton interpreter (no GPU)" : "");
    in_flight = 2 * (std::max<std::size_t>(1, po.gpus.size()) +
                     static_cast<std::size_t>(std::max(0, po.compile_workers)));
    s.pool = std::make_unique<WorkerPool>(std::move(po));
  }
  s.scheduler = std::make_unique<Scheduler>(*s.store, *s.pool, c.max_running, in_flight, c.lease_s,
                                            s.metrics, s.log);
  s.context =
      std::make_unique<Context>(Context{s.config, *s.store, *s.scheduler, s.metrics, s.log});

  s.http = std::make_unique<HttpServer>(ConnectionLimits{
      .max_connections = c.connections.max_connections,
      .max_event_streams = c.connections.max_event_streams,
      .request_timeout_s = c.connections.request_timeout_s,
  });
  HttpServer& http = *s.http;
  // A thread and a descriptor per connection: raise the descriptor limit to what is allowed.
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0) {
    if (files.rlim_cur < files.rlim_max) {
      files.rlim_cur = files.rlim_max;
      ::setrlimit(RLIMIT_NOFILE, &files);
    }
    if (files.rlim_cur < c.connections.max_connections + 256)
      s.log->warn("max_connections {} needs about {} open files; this process may open {} "
                  "(raise `ulimit -n` or LimitNOFILE=)",
                  c.connections.max_connections, c.connections.max_connections + 256,
                  static_cast<unsigned long long>(files.rlim_cur));
  }
  http.set_payload_max_length(c.max_body);
  http.set_tcp_nodelay(true); // headers and body are separate writes: no Nagle delay
  // Debian's cpp-httplib listens with a backlog of 5: many clients connecting at once would
  // see dropped SYNs (a second's retransmission). Keep the socket to listen again with more.
  int* listen_fd = &s.listen_fd;
  http.set_socket_options([listen_fd](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    *listen_fd = sock;
  });
  // Before any route, a page or a static file: the body's framing, the request's Host and
  // Origin.
  http.set_pre_routing_handler([&s](const httplib::Request& req, httplib::Response& res) {
    auto refused = refuse_framing(req);
    // Its body is not read: a proxy in front should not send another request after it (httplib
    // itself reads on, the bytes that follow being taken for the next request).
    if (refused) res.set_header("Connection", "close");
    if (!refused) refused = refuse_origin(req, s.config, s.port);
    if (!refused) return httplib::Server::HandlerResponse::Unhandled;
    send_json(res, {{"error", {{"code", refused->code}, {"message", refused->what()}}}},
              refused->status);
    s.log->debug("{} {} refused: {}", req.method, req.path, refused->what());
    return httplib::Server::HandlerResponse::Handled;
  });
  s.api = std::make_unique<Api>(http, *s.context);
  register_system(*s.api);
  register_compile(*s.api);
  register_expand(*s.api);
  register_explorations(*s.api);
  register_columns(*s.api);
  register_schedules(*s.api);
  register_templates(*s.api);
  register_web(*s.api, http, *s.log);
  s.api->finish();

  // Resume what a previous process left (running ones were interrupted, even by SIGKILL), and
  // watch what another process on this store runs, to take it up if that process stops.
  for (const results::Exploration& x : s.store->unfinished())
    s.scheduler->adopt(x);
  // A first start queues the example, so that the API and the page have something to show.
  if (c.example && s.store->explorations({}).empty()) {
    std::filesystem::path example = c.templates_dir / "geglu.yaml";
    try {
      TemplateFile tf = load_template_file(example);
      bool gpu = !s.pool->timing_workers().empty() &&
                 s.pool->timing_workers().front().device_kind == "cuda";
      gpu = gpu || !visible_gpus().empty();
      std::vector<ShapeSizes> shapes = gpu || tf.test_shapes.empty() ? tf.shapes : tf.test_shapes;
      // Without a GPU, the largest test shape (the smallest may be below the template's blocks).
      auto numel = [](const ShapeSizes& shape) {
        long long n = 1;
        for (const auto& [l, v] : shape)
          n *= v;
        return n;
      };
      if (!gpu)
        std::sort(shapes.begin(), shapes.end(),
                  [&](const ShapeSizes& a, const ShapeSizes& b) { return numel(a) > numel(b); });
      ExploreSettings set = c.defaults;
      if (!gpu) {
        set.budget = 12;
        set.top = 3;
        set.rounds = 2;
        set.screen = {1, 5};
        set.full = {2, 10};
      }
      ExploreJob job{tf, shapes.front(), set, 0};
      std::int64_t id = s.store->create_exploration(spec_of(job));
      s.scheduler->enqueue(id);
      s.log->info("first start: queued the example exploration {} ({} at {})", id, tf.kernel,
                  results::shape_key(results::Shape(job.shape.begin(), job.shape.end())));
    } catch (const std::exception& e) {
      s.log->warn("the example exploration could not be queued: {}", e.what());
    }
  }

  s.port = c.port == 0 ? http.bind_to_any_port(c.bind) : c.port;
  if (c.port != 0 && !http.bind_to_port(c.bind, c.port))
    throw std::runtime_error("cannot listen on " + c.bind + ":" + std::to_string(c.port) +
                             " (in use, or not an address of this machine)");
  if (s.port < 0) throw std::runtime_error("cannot listen on " + c.bind);
  if (s.listen_fd >= 0) ::listen(s.listen_fd, SOMAXCONN);
}

void Server::run() {
  impl_->log->info("dtxd listening on http://{}:{}", impl_->config.bind, impl_->port);
  impl_->http->listen_after_bind();
}

void Server::stop() {
  std::lock_guard lock(impl_->stop_mutex);
  if (impl_->stopped) return;
  impl_->stopped = true;
  if (impl_->log) impl_->log->info("stopping: checkpointing explorations, stopping workers");
  // Each step's time in the log: a stop that takes long says which step held it.
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point since) {
    return std::chrono::duration<double>(Clock::now() - since).count();
  };
  Clock::time_point start = Clock::now(), step = start;
  if (impl_->http) impl_->http->shut_down();
  double http_s = seconds(step);
  step = Clock::now();
  if (impl_->scheduler) impl_->scheduler->shutdown();
  double explorations_s = seconds(step);
  step = Clock::now();
  if (impl_->pool) impl_->pool->shutdown();
  double workers_s = seconds(step);
  if (impl_->log)
    impl_->log->info("stopped in {:.2f} s (requests {:.2f} s, explorations {:.2f} s, workers "
                     "{:.2f} s)",
                     seconds(start), http_s, explorations_s, workers_s);
}

int Server::port() const {
  return impl_->port;
}

} // namespace dtx::server
