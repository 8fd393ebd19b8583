// dtxd: the dtx daemon. Serves the HTTP/JSON API (docs/server.md) over the results store and
// a pool of measurement workers; SIGTERM or SIGINT stops it cleanly.
#include "dtx/server/Server.h"

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "dtx/cli/Checks.h"

#include <csignal>
#include <filesystem>
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
  // Every value is checked by the rule its configuration key follows (Config.h, Request.h):
  // a bad one is named and refused with exit status 2.
  using namespace dtx::cli;
  using dtx::server::config_rule;
  app.add_option("-c,--config", config_file, "a YAML configuration file")->check(CLI::ExistingFile);
  app.add_option("--bind", bind, "address to listen on (default 127.0.0.1)")
      ->check(
          CLI::Validator([](std::string& b) { return dtx::server::bind_problem(b); }, "ADDRESS"));
  app.add_option("--port", port, "port (default 8080; 0: any free port)")
      ->check(number_check(config_rule("port")));
  app.add_option("--data-dir", data_dir, "directory of the database and caches (default data)")
      ->check(non_empty_check());
  app.add_option("--db", db, "the SQLite database (default DATA_DIR/dtx.db)")
      ->check(output_file_check());
  app.add_option("--templates-dir", templates, "where baselines.py and baseline files are")
      ->check(CLI::ExistingDirectory);
  app.add_option("--web-dir", web, "the web page's files (default: web/ of the source tree)")
      ->check(CLI::ExistingDirectory);
  app.add_option("--compile-workers", compile_workers, "compile workers")
      ->check(number_check(dtx::pool_rule("compile_workers")));
  app.add_option("--gpus", gpus,
                 "GPU indices, one timing worker each (default: all visible; none: no GPU, the "
                 "Triton interpreter)")
      ->check(gpus_check());
  app.add_option("--python", python, "the workers' Python (default: the project's .venv)")
      ->check(program_check());
  app.add_option("--backend", backend,
                 "local (default): workers on this machine; ray: a Ray "
                 "cluster (docs/ray.md)")
      ->check(CLI::IsMember({"local", "ray"}));
  app.add_option("--ray-address", ray_address,
                 "the Ray cluster's head HOST:PORT (or auto, local); implies --backend ray")
      ->check(non_empty_check());
  app.add_option("--ray-interpreter-workers", ray_interpreter_workers,
                 "time on this many CPU actors with the Triton interpreter (testing)")
      ->check(number_check(dtx::pool_rule("ray_interpreter_workers")));
  app.add_option("--max-running", max_running, "explorations measured at once")
      ->check(number_check(config_rule("max_running")));
  app.add_option("--lease-s", lease_s,
                 "seconds another process waits for an exploration this one stopped renewing "
                 "(default 30)")
      ->check(CLI::Range(1.0, 3600.0));
  app.add_option("--token", tokens, "a token that writes need (repeatable)")->check(token_check());
  app.add_option("--log-format", log_format, "text or json")
      ->check(CLI::IsMember({"text", "json"}));
  app.add_option("--log-level", log_level, "debug, info, warn or error")
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}));
  app.add_flag("--protect-reads", protect_reads, "with --token: reads need a token too");
  app.add_flag("--no-example", no_example, "do not queue the example exploration on a first start");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Help is not an error; any other is a usage error, as for dtc and dtx.
    return app.exit(e) == 0 ? 0 : 2;
  }

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
    config.gpus = dtx::parse_gpus(gpus); // checked above: `none` is no GPU
    config.gpus_given = true;
  }
  // Where the database goes, from the file or the command line: usable, or said so now.
  {
    std::error_code ec;
    std::filesystem::create_directories(config.data_dir, ec);
    if (ec || !std::filesystem::is_directory(config.data_dir)) {
      std::cerr << "dtxd: --data-dir (data_dir) " << config.data_dir.string()
                << ": cannot make the directory" << (ec ? ": " + ec.message() : "") << "\n";
      return 2;
    }
    std::string db_path = config.db_path().string();
    if (std::string p = output_file_check()(db_path); !p.empty()) {
      std::cerr << "dtxd: --db (db): " << p << "\n";
      return 2;
    }
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
  log->info("every connection closed");
  server.stop();
  return 0;
}
