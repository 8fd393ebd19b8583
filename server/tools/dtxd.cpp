// dtxd: the dtx daemon. Serves the HTTP/JSON API (docs/server.md) over the results store and
// a pool of measurement workers; SIGTERM or SIGINT stops it cleanly.
#include "dtx/server/Server.h"

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <iostream>
#include <thread>

int main(int argc, char** argv) {
  CLI::App app{"dtxd: the dtx daemon, an HTTP/JSON API for exploring Decoupled Triton schedules",
               "dtxd"};
  std::string config_file, bind, data_dir, db, python, gpus, log_format, log_level, templates, web;
  std::string backend, ray_address;
  int port = -1, compile_workers = -1, max_running = -1, ray_interpreter_workers = -1;
  double lease_s = 0;
  std::vector<std::string> tokens;
  bool no_example = false, protect_reads = false;
  app.add_option("-c,--config", config_file, "a YAML configuration file")->check(CLI::ExistingFile);
  app.add_option("--bind", bind, "address to listen on (default 127.0.0.1)");
  app.add_option("--port", port, "port (default 8080; 0: any free port)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--data-dir", data_dir, "directory of the database and caches (default data)");
  app.add_option("--db", db, "the SQLite database (default DATA_DIR/dtx.db)");
  app.add_option("--templates-dir", templates, "where baselines.py and baseline files are");
  app.add_option("--web-dir", web, "the web page's files (default: web/ of the source tree)");
  app.add_option("--compile-workers", compile_workers, "compile workers")
      ->check(CLI::Range(0, 256));
  app.add_option("--gpus", gpus, "GPU indices, one timing worker each (default: all visible)");
  app.add_option("--python", python, "the workers' Python (default: the project's .venv)");
  app.add_option("--backend", backend,
                 "local (default): workers on this machine; ray: a Ray "
                 "cluster (docs/ray.md)")
      ->check(CLI::IsMember({"local", "ray"}));
  app.add_option("--ray-address", ray_address,
                 "the Ray cluster's head HOST:PORT (or auto, local); implies --backend ray");
  app.add_option("--ray-interpreter-workers", ray_interpreter_workers,
                 "time on this many CPU actors with the Triton interpreter (testing)")
      ->check(CLI::Range(0, 1024));
  app.add_option("--max-running", max_running, "explorations measured at once")
      ->check(CLI::Range(1, 64));
  app.add_option("--lease-s", lease_s,
                 "seconds another process waits for an exploration this one stopped renewing "
                 "(default 30)")
      ->check(CLI::Range(1.0, 3600.0));
  app.add_option("--token", tokens, "a token that writes need (repeatable)");
  app.add_option("--log-format", log_format, "text or json")
      ->check(CLI::IsMember({"text", "json"}));
  app.add_option("--log-level", log_level, "debug, info, warn or error")
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}));
  app.add_flag("--protect-reads", protect_reads, "with --token: reads need a token too");
  app.add_flag("--no-example", no_example, "do not queue the example exploration on a first start");
  CLI11_PARSE(app, argc, argv);

  dtx::server::Config config;
  try {
    if (!config_file.empty()) config = dtx::server::load_config(config_file);
  } catch (const std::exception& e) {
    std::cerr << "dtxd: " << e.what() << "\n";
    return 2;
  }
  if (!bind.empty()) config.bind = bind;
  if (port >= 0) config.port = port;
  if (!data_dir.empty()) config.data_dir = data_dir;
  if (!db.empty()) config.db = db;
  if (!templates.empty()) config.templates_dir = templates;
  if (!web.empty()) config.web_dir = web;
  if (compile_workers >= 0) config.compile_workers = compile_workers;
  if (!python.empty()) config.python = python;
  if (max_running > 0) config.max_running = max_running;
  if (lease_s > 0) config.lease_s = lease_s;
  if (!tokens.empty()) config.tokens = tokens;
  if (!log_format.empty()) config.log_format = log_format;
  if (!log_level.empty()) config.log_level = log_level;
  if (no_example) config.example = false;
  if (!backend.empty()) config.backend = backend;
  if (!ray_address.empty()) {
    config.backend = "ray";
    config.ray_address = ray_address;
  }
  if (ray_interpreter_workers >= 0) config.ray_interpreter_workers = ray_interpreter_workers;
  if (config.backend == "ray" && config.ray_address.empty()) {
    std::cerr << "dtxd: --backend ray needs --ray-address (or `ray: {address: ...}` in the "
                 "configuration)\n";
    return 2;
  }
  if (protect_reads) config.protect_reads = true;
  if (!gpus.empty()) {
    config.gpus.clear();
    std::stringstream ss(gpus);
    for (std::string g; std::getline(ss, g, ',');)
      config.gpus.push_back(std::stoi(g));
    config.gpus_given = true;
  }

  auto log = spdlog::stderr_logger_mt("dtxd");
  if (config.log_format == "json")
    log->set_pattern(R"({"time":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l","message":"%v"})",
                     spdlog::pattern_time_type::utc);
  else
    log->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ %v");
  log->set_level(spdlog::level::from_str(config.log_level));
  log->flush_on(spdlog::level::info);

  // Signals are taken by a thread of their own (sigwait), so stop() runs outside a handler.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  dtx::server::Server server(config, log);
  try {
    server.start();
  } catch (const std::exception& e) {
    log->error("cannot start: {}", e.what());
    return 1;
  }
  std::cout << "dtxd: http://" << config.bind << ":" << server.port() << "/" << std::endl;
  std::thread signals([&] {
    int sig = 0;
    sigwait(&set, &sig);
    log->info("{} received", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    server.stop();
  });
  signals.detach();
  server.run();
  server.stop();
  return 0;
}
